//! Model-based test of the log store: random sequences of add, done,
//! update, retry, dead, schedule, unschedule, kept, forget, reserve,
//! flush, discard, reopen and crash run against a `BTreeMap` model of what
//! has been flushed (live and dead jobs, schedules, kept records).
//!
//! - After every reopen the replay equals the model's flushed state.
//! - A crash tears the last flush: the file becomes what it was before that
//!   flush plus a prefix of its frame (and, if that flush compacted, a
//!   half-written compaction temp file is left beside it). The replay is the
//!   state before that flush, or after it when the whole frame made it:
//!   never anything else.
//! - `next_id` never decreases across reopens and is at least every
//!   acknowledged job, schedule or kept id + 1 and reservation.
//! - After every flush the file is exactly the old file plus one frame of the
//!   buffered ops (or a compacted rewrite), `file_len()` is the real length,
//!   and the size obeys the compaction rule.
//!
//! Small `compact_min_bytes` (0, 1 KiB, 4 KiB) make compaction happen often.

mod flushed;
mod harness;
mod ops;

use std::time::Duration;

use gearshift_store::{Durability, LogOptions};
use harness::Harness;
use ops::{action, options, Action};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn log_store_matches_the_model(
        opts in options(),
        actions in prop::collection::vec(action(), 1..160),
    ) {
        let mut h = Harness::new(opts);
        for a in &actions {
            h.step(a);
        }
        // Whatever happened, a final flush and reopen keeps everything.
        h.flush();
        h.reopen("final reopen");
    }
}

#[test]
fn a_crash_right_after_a_compacting_flush_keeps_either_side() {
    // Deterministic cover for the compaction branch of the crash model:
    // every job done, threshold 0, so the flush compacts.
    for at in [0, u16::MAX / 3, u16::MAX - 1, u16::MAX] {
        let mut h = Harness::new(LogOptions {
            durability: Durability::Interval(Duration::from_millis(50)),
            compact_min_bytes: 0,
            background_compaction: false,
            ..LogOptions::default()
        });
        for _ in 0..5 {
            h.step(&Action::Add {
                data_len: 50,
                priority: 1,
            });
        }
        h.step(&Action::Flush);
        for i in 0..5 {
            h.step(&Action::Done(i));
        }
        h.step(&Action::Reserve(7));
        h.step(&Action::Flush);
        assert!(
            h.last.as_ref().is_some_and(|l| l.compacted),
            "flush compacted"
        );
        h.step(&Action::Crash {
            at,
            leftover_tmp: true,
        });
        for _ in 0..3 {
            h.step(&Action::Add {
                data_len: 10,
                priority: 0,
            });
        }
        h.step(&Action::Flush);
        h.step(&Action::Reopen);
    }
}
