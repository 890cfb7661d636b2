//! Retried and dead jobs in the log store's compaction: a compacted file
//! keeps each dead job (its Add, then a Dead op with its mark) and each
//! retried job's latest attempts and due time (patched into its Add), and
//! the rule for when to compact counts dead jobs' records as live.

mod common;

use common::{compactions_after_flush, fresh, opts, reopen, reopened, Both};
use gearshift_store::conformance::{job, mark};
use gearshift_store::{JobRecord, Op, Store};

fn big(id: u64, size: usize) -> JobRecord {
    let data: Vec<u8> = (0..size).map(|i| (i as u64 ^ id) as u8).collect();
    job(id, "resize", &format!("u{id}"), 1, &data)
}

#[test]
fn compaction_keeps_dead_jobs_and_retried_jobs_latest_attempts_and_due() {
    for background in [false, true] {
        let mut b = Both::new(background);
        let n = 400u64;
        for id in 1..=n {
            b.each(|s| s.add(&big(id, 1000)));
            if id % 50 == 0 {
                b.flush();
            }
        }
        b.flush();
        for id in 1..=n {
            b.each(|s| match id % 10 {
                0 => {
                    s.retry(id, 1, Some(1_900_000_000_000 + id));
                    s.retry(id, 2, Some(1_900_000_000_500 + id));
                }
                1 => {
                    s.retry(id, 1, Some(1_900_000_000_000));
                    s.dead(id, 3, &mark(1_700_000_000_000 + id, &format!("error {id}")));
                }
                2 => {
                    // Dead, then revived with no due time.
                    s.dead(id, 3, &mark(1, "first life"));
                    s.retry(id, 0, None);
                }
                3 => {}
                _ => s.done(id),
            });
        }
        b.flush_and_finish();
        assert!(
            b.log.compactions() >= 1,
            "background {background}: the flush of the ends compacted"
        );
        let (want, ops) = b.replay_both();
        assert_eq!(want.jobs.len() as u64, 3 * n / 10);
        assert_eq!(want.dead.len() as u64, n / 10);
        // The compacted file: a reservation, then each stored job's Add as
        // it stands now, a dead one's followed by its Dead op; no Retry is
        // left (its effect is in the Add).
        assert!(matches!(ops.first(), Some(Op::Reserve(_))));
        let mut dead = want.dead.iter();
        let mut live = want.jobs.iter();
        let mut rest = ops[1..].iter().peekable();
        while let Some(op) = rest.next() {
            let Op::Add(r) = op else {
                panic!("background {background}: unexpected {op:?} in a compacted file");
            };
            if let Some(Op::Dead { id, attempts, mark }) = rest.peek() {
                rest.next();
                let (want_r, want_mark) = dead.next().expect("a dead job");
                assert_eq!((*id, *attempts), (want_r.id, want_r.attempts));
                assert_eq!(mark, want_mark);
                assert_eq!(r, want_r, "the Add carries the last due time and count");
            } else {
                assert_eq!(Some(r), live.next());
            }
        }
        assert!(dead.next().is_none() && live.next().is_none());
    }
}

#[test]
fn dead_jobs_count_as_live_bytes_for_the_compaction_rule() {
    let (dir, mut s) = fresh(opts(0, false));
    for id in 1..=50 {
        s.add(&big(id, 4000));
    }
    s.flush().expect("flush");
    for id in 1..=50 {
        s.dead(id, 5, &mark(id, "gave up"));
    }
    // Only headers are obsolete: a compaction would gain nothing.
    assert_eq!(
        compactions_after_flush(&mut s),
        0,
        "dead jobs are not garbage"
    );
    drop(s);
    // The same once the sizes come from reading the file back.
    let (mut s, r) = reopen(dir.path(), opts(0, false));
    assert_eq!((r.jobs.len(), r.dead.len()), (0, 50));
    s.add(&big(51, 10));
    let why = "dead jobs are not garbage after a reopen";
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    // Dropping most of them makes the file worth compacting.
    for id in 1..=40 {
        s.done(id);
    }
    let why = "the dropped dead jobs are garbage";
    assert_eq!(compactions_after_flush(&mut s), 1, "{why}");
    drop(s);
    let r = reopened(dir.path());
    let dead: Vec<u64> = r.dead.iter().map(|(j, _)| j.id).collect();
    assert_eq!(dead, (41..=50).collect::<Vec<u64>>());
    assert_eq!(r.dead[0].1, mark(41, "gave up"));
    assert_eq!(r.dead[0].0.attempts, 5);
    assert_eq!(r.jobs, vec![big(51, 10)]);
}

#[test]
fn revived_jobs_marks_are_garbage_for_the_compaction_rule() {
    // Dead ops with long errors, then every job revived: the marks are
    // obsolete and outweigh the (small) jobs, so the file is compacted.
    let (dir, mut s) = fresh(opts(0, false));
    let error = "e".repeat(2000);
    for id in 1..=20 {
        s.add(&big(id, 100));
    }
    s.flush().expect("flush");
    for id in 1..=20 {
        s.dead(id, 1, &mark(id, &error));
    }
    let why = "the marks of dead jobs are not garbage";
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    drop(s);
    // Nor once the sizes come from reading the file back.
    let (mut s, _) = reopen(dir.path(), opts(0, false));
    s.reserve(100);
    let why = "the marks are not garbage after a reopen";
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    for id in 1..=20 {
        s.retry(id, 2, None);
    }
    let why = "revived jobs' marks are garbage";
    assert_eq!(compactions_after_flush(&mut s), 1, "{why}");
    drop(s);
    let r = reopened(dir.path());
    assert!(r.dead.is_empty());
    assert!(r.jobs.iter().all(|j| j.attempts == 2 && j.due_ms.is_none()));
    assert_eq!(r.jobs.len(), 20);
}
