//! Checks of kept records.

use super::*;

/// Ids of the replayed kept records.
pub(super) fn kept_ids(r: &Replayed) -> Vec<u64> {
    r.kept.iter().map(|k| k.id).collect()
}
pub(super) fn kept_records_are_replayed<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"still running"));
    s.add(&job(2, "f", "", 1, b"about to finish"));
    s.flush().expect("flush");
    // Odd values in every field: no start, no worker, an empty error,
    // times at the ends of their range, empty and binary bytes.
    let mut odd: KeptRecord = kept(9, 1, b"");
    odd.started_ms = Some(u64::MAX);
    odd.created_ms = 0;
    odd.finished_ms = u64::MAX;
    odd.expires_ms = u64::MAX;
    odd.error = Some(Bytes::new());
    odd.history = Bytes::new();
    odd.unique = Bytes::new();
    odd.priority = 2;
    odd.attempts = u32::MAX;
    let mut never_ran: KeptRecord = kept(12, 2, b"");
    never_ran.started_ms = None;
    never_ran.worker = Bytes::new();
    let all = vec![
        kept(2, 0, b"the result \0\xff"),
        kept(4, 1, b"partial"),
        kept(5, 0, &vec![5u8; 1 << 20]),
        odd,
        never_ran,
    ];
    // The core ends a job with a Done, then keeps it, in one batch; the
    // rest are stored out of id order: replay sorts them.
    s.done(2);
    for k in all.iter().rev() {
        s.kept(k);
    }
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.kept, all,
        "replay reports kept records, however often asked"
    );
    assert_eq!(
        r.kept, all,
        "every field of every kept record survives, in id order"
    );
    assert_eq!(
        r.jobs,
        vec![job(1, "f", "", 1, b"still running")],
        "a kept job is not live (its Done ended it), and kept records are not jobs"
    );
    assert!(r.dead.is_empty() && r.schedules.is_empty());
}

pub(super) fn a_new_version_of_a_kept_record_replaces_it<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.kept(&kept(1, 0, b"first"));
    s.kept(&kept(2, 1, b"second"));
    s.flush().expect("flush");
    // A longer life, then (same batch) a whole new record.
    let mut longer: KeptRecord = kept(1, 0, b"first");
    longer.expires_ms += 3_600_000;
    s.kept(&longer);
    let mut changed: KeptRecord = kept(1, 2, b"changed");
    changed.history = Bytes::from_static(b"more history");
    changed.background = !changed.background;
    s.kept(&changed);
    s.flush().expect("flush");
    let mut two: KeptRecord = kept(2, 1, b"second");
    two.expires_ms += 1;
    s.kept(&two);
    let r = reopened(s, &mut open);
    assert_eq!(
        r.kept,
        vec![changed, two],
        "the latest version of each kept record wins, once"
    );
}

pub(super) fn forget_drops_a_kept_record_and_done_does_not<S: Store>(mut open: impl FnMut() -> S) {
    let (mut s, r) = ending_drops_one_and_done_does_not(&mut open, Kind::Kept);
    assert_eq!(r.kept[1], kept(3, 0, b"r"));
    // Forgotten, then kept again (never sent, but well defined): back.
    s.forget(1);
    s.forget(3);
    s.kept(&kept(3, 1, b"again"));
    let r = reopened(s, &mut open);
    assert_eq!(r.kept, vec![kept(3, 1, b"again"), kept(4, 0, b"r")]);
}

/// A kept record whose outcome replay would refuse as corrupt fails its
/// flush, storing none of its batch; the store opens again.
pub(super) fn kept_records_with_unknown_outcomes_are_refused<S: Store>(
    mut open: impl FnMut() -> S,
) {
    let mut s = opened(&mut open);
    s.kept(&kept(1, 2, b"cancelled is the last outcome"));
    s.flush().expect("flush");
    for outcome in [3, u8::MAX] {
        s.add(&job(7, "f", "", 1, b"same batch"));
        s.forget(1);
        s.kept(&kept(2, outcome, b"r"));
        match s.flush() {
            Err(StoreError::InvalidRecord(msg)) => {
                assert!(msg.contains(&format!("outcome {outcome}")), "{msg}")
            }
            other => panic!("outcome {outcome} must fail its flush, got {other:?}"),
        }
    }
    // An id past MAX_ID in the same batch: the first refusal is reported.
    s.kept(&kept(MAX_ID + 1, 0, b"r"));
    s.kept(&kept(3, 9, b"r"));
    assert!(
        matches!(s.flush(), Err(StoreError::IdOutOfRange(_))),
        "the first refusal of a batch is the one reported"
    );
    let r = next_batch_stored(s, &mut open);
    assert_eq!(r.kept, vec![kept(1, 2, b"cancelled is the last outcome")]);
    assert_eq!(
        job_ids(&r),
        vec![8],
        "none of the refused batches is stored"
    );
}

/// Jobs finishing into kept records among many jobs coming and going,
/// records kept longer and forgotten, over many flushes (for the log
/// store with a small threshold: across compactions), checked after every
/// reopen: each kept record's latest version, none forgotten.
pub(super) fn kept_records_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want: BTreeMap<u64, KeptRecord> = BTreeMap::new();
    let mut want_live: BTreeMap<u64, JobRecord> = BTreeMap::new();
    let mut next_id = 1u64;
    for round in 1..=300u64 {
        // Garbage: a short-lived job, so the log store compacts often.
        short_lived(&mut s, next_id, 1500);
        next_id += 1;
        // A job that runs a while, then finishes and is kept.
        let r = job(next_id, "f", "", 1, &[1; 200]);
        s.add(&r);
        want_live.insert(r.id, r);
        next_id += 1;
        if round % 2 == 0 {
            if let Some((id, _)) = want_live.pop_first() {
                let k: KeptRecord = kept(id, (round % 3) as u8, &[round as u8; 300]);
                s.done(id);
                s.kept(&k);
                want.insert(id, k);
            }
        }
        // Now and then one is kept longer (a new version), the oldest
        // expires (forgotten), and a Done names a kept id (harmless).
        if round % 5 == 0 {
            if let Some(k) = want.values_mut().last() {
                k.expires_ms += 60_000;
                k.history = Bytes::from(format!("read in round {round}").into_bytes());
                s.kept(k);
            }
        }
        if round % 7 == 0 {
            if let Some((id, _)) = want.pop_first() {
                s.forget(id);
            }
            if let Some(&id) = want.keys().next() {
                s.done(id);
            }
        }
        let r;
        (s, r) = end_of_round(s, &mut open, round, 3);
        if let Some(r) = r {
            assert_eq!(r.kept, values(&want), "kept records after {round} rounds");
            assert_eq!(r.jobs, values(&want_live), "live jobs after {round} rounds");
            assert!(r.next_id >= next_id, "after {round} rounds");
        }
    }
}
