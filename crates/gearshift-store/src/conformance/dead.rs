//! Checks of retries and dead jobs.

use super::*;

pub(super) fn retry_sets_attempts_and_due<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut epoch = job(2, "f", "", 1, b"y");
    epoch.due_ms = Some(1_800_000_000_000);
    s.add(&job(1, "f", "", 1, b"x"));
    s.add(&epoch);
    s.add(&job(3, "f", "", 1, b"z"));
    s.flush().expect("flush");
    s.retry(1, 1, Some(1_900_000_000_000));
    s.retry(2, 4, None);
    s.flush().expect("flush");
    s.retry(1, 2, Some(1_900_000_000_500));
    s.retry(99, 9, Some(5));
    let r = reopened(s, &mut open);
    let got: Vec<(u64, u32, Option<u64>)> = r
        .jobs
        .iter()
        .map(|j| (j.id, j.attempts, j.due_ms))
        .collect();
    assert_eq!(
        got,
        vec![(1, 2, Some(1_900_000_000_500)), (2, 4, None), (3, 0, None)],
        "retry sets attempts and due time (None clears it); an unknown id changes nothing"
    );
    assert!(r.dead.is_empty(), "a retry kills nothing");
    let mut want = job(1, "f", "", 1, b"x");
    want.attempts = 2;
    want.due_ms = Some(1_900_000_000_500);
    assert_eq!(r.jobs[0], want, "a retry changes nothing else");
}

pub(super) fn dead_jobs_are_kept_apart<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=4 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.retry(2, 1, Some(1_900_000_000_000));
    s.dead(2, 3, &mark(1_700_000_000_777, "first error"));
    s.dead(4, 2, &mark(1_700_000_000_888, "boom"));
    s.dead(99, 1, &mark(1, "no such job"));
    s.flush().expect("flush");
    // A dead job keeps the count it died with; dying again replaces the
    // count and mark.
    s.update(2, 50);
    s.dead(2, 5, &mark(1_700_000_000_999, "last error"));
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.dead.len(),
        2,
        "replay reports dead jobs, however often asked"
    );
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(1, 0), (3, 0)], vec![(2, 5), (4, 2)]),
        "dead jobs replay apart from live ones, in id order, with the attempts they died with"
    );
    let mut two = job(2, "f", "", 1, b"x");
    two.attempts = 5;
    two.due_ms = Some(1_900_000_000_000);
    assert_eq!(
        r.dead[0],
        (two, mark(1_700_000_000_999, "last error")),
        "a dead job keeps its record, last due time and latest mark"
    );
    assert_eq!(r.dead[1].1, mark(1_700_000_000_888, "boom"));
    assert!(r.next_id > 4, "dead jobs' ids are not reused");
}

pub(super) fn retry_revives_a_dead_job<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"x"));
    s.add(&job(2, "f", "", 1, b"y"));
    s.flush().expect("flush");
    s.dead(1, 3, &mark(10, "gone"));
    s.dead(2, 3, &mark(11, "gone too"));
    let (mut s, r) = reopen(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![], vec![(1, 3), (2, 3)]));
    s.retry(1, 0, Some(1_950_000_000_000));
    let r = reopened(s, &mut open);
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(1, 0)], vec![(2, 3)]),
        "a retry brings a dead job back, its mark gone"
    );
    assert_eq!(r.jobs[0].due_ms, Some(1_950_000_000_000));
    // Revived, it can die again.
    let mut s = opened(&mut open);
    s.dead(1, 1, &mark(12, "again"));
    let r = reopened(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![], vec![(1, 1), (2, 3)]));
    assert_eq!(r.dead[0].1, mark(12, "again"));
}

pub(super) fn done_forgets_a_dead_job<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=3 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.dead(1, 2, &mark(10, "e"));
    s.dead(2, 2, &mark(10, "e"));
    s.flush().expect("flush");
    s.done(1);
    let r = reopened(s, &mut open);
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(3, 0)], vec![(2, 2)]),
        "done drops a dead job"
    );
    // Nor can a retry bring a dropped job back.
    let mut s = opened(&mut open);
    s.retry(1, 0, None);
    s.done(2);
    let r = reopened(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![(3, 0)], vec![]));
    assert!(r.next_id > 3, "ids of dropped dead jobs are not reused");
}

/// Retries and deaths among many jobs coming and going, over many flushes
/// (for the log store with a small threshold: across compactions), checked
/// against the expected outcome after every reopen.
pub(super) fn retries_and_deaths_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want_live: BTreeMap<u64, JobRecord> = BTreeMap::new();
    let mut want_dead: BTreeMap<u64, (JobRecord, DeadMark)> = BTreeMap::new();
    for id in 1..=300u64 {
        let r = job(id, "f", "", 1, &[id as u8; 200]);
        s.add(&r);
        want_live.insert(id, r);
        // A short-lived job beside each: the garbage that makes the log
        // store (with a small threshold) compact after most flushes.
        short_lived(&mut s, 1000 + id, 2000);
        match id % 6 {
            // Ends soon: the churn that makes compaction worth it.
            0 | 1 => {
                s.done(id);
                want_live.remove(&id);
            }
            2 => {
                s.retry(id, 2, Some(1_900_000_000_000 + id));
                if let Some(r) = want_live.get_mut(&id) {
                    r.attempts = 2;
                    r.due_ms = Some(1_900_000_000_000 + id);
                }
            }
            3 => {
                s.retry(id, 1, Some(7));
                let m = mark(1_700_000_000_000 + id, &format!("error {id}"));
                s.dead(id, 4, &m);
                if let Some(mut r) = want_live.remove(&id) {
                    r.attempts = 4;
                    r.due_ms = Some(7);
                    want_dead.insert(id, (r, m));
                }
            }
            _ => {}
        }
        // A dead job from a while ago is revived, one before is dropped.
        if id % 12 == 3 && id > 30 {
            let old = id - 24;
            s.retry(old, 9, None);
            if let Some((mut r, _)) = want_dead.remove(&old) {
                r.attempts = 9;
                r.due_ms = None;
                want_live.insert(old, r);
            }
            s.done(old - 6);
            want_live.remove(&(old - 6));
            want_dead.remove(&(old - 6));
        }
        let r;
        (s, r) = end_of_round(s, &mut open, id, 5);
        if let Some(r) = r {
            let after = format!("after {id} submissions");
            assert_eq!(r.jobs, values(&want_live), "live jobs {after}");
            assert_eq!(r.dead, values(&want_dead), "dead jobs {after}");
        }
    }
}
