//! The random actions the model test runs and the store options it runs them under.

use std::time::Duration;

use gearshift_store::{Durability, LogOptions};
use proptest::prelude::*;

#[derive(Debug, Clone)]
pub(crate) enum Action {
    Add {
        data_len: usize,
        priority: u8,
    },
    /// Done of the n-th job of the current view.
    Done(usize),
    /// Done of any id ever handed out (may be gone already).
    DoneStale(usize),
    Update(usize, u32),
    /// Retry of the n-th job (live or dead) of the current view, with this
    /// count and due time.
    Retry(usize, u32, Option<u64>),
    /// Death of the n-th job (live or dead) of the current view, with this
    /// count and an error this long.
    Dead(usize, u32, usize),
    /// A new schedule (a new id from the job counter), its data this long.
    Schedule(usize),
    /// A new version of the n-th schedule of the current view: a new next
    /// firing (none: it never fires again) and data this long.
    Reschedule(usize, Option<u64>, usize),
    /// Drops the n-th schedule of the current view.
    Unschedule(usize),
    /// Drops any id ever handed out (may be a job, or gone already).
    UnscheduleStale(usize),
    /// The n-th job (live or dead) of the current view ends and is kept
    /// (a Done, then a Kept, as the core writes them), with this outcome
    /// and a result this long.
    Finish(usize, u8, usize),
    /// A new version of the n-th kept record of the current view: a later
    /// expiry and a result this long.
    Rekeep(usize, usize),
    /// Forgets the n-th kept record of the current view.
    Forget(usize),
    /// Forgets any id ever handed out (may be a job, or gone already).
    ForgetStale(usize),
    /// Reserves this many ids past the next one.
    Reserve(u64),
    Flush,
    Discard,
    Reopen,
    /// Drops the store; tears the last flush at this fraction of its frame
    /// (in 1/65535ths); optionally leaves a compaction temp file behind.
    Crash {
        at: u16,
        leftover_tmp: bool,
    },
}

pub(crate) fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        8 => (0usize..400, 0u8..3).prop_map(|(data_len, priority)| Action::Add { data_len, priority }),
        5 => any::<usize>().prop_map(Action::Done),
        1 => any::<usize>().prop_map(Action::DoneStale),
        2 => (any::<usize>(), 0u32..20).prop_map(|(i, n)| Action::Update(i, n)),
        2 => (any::<usize>(), 0u32..20, prop::option::of(1_700_000_000_000u64..1_700_000_100_000))
            .prop_map(|(i, n, due)| Action::Retry(i, n, due)),
        2 => (any::<usize>(), 0u32..20, 0usize..300).prop_map(|(i, n, e)| Action::Dead(i, n, e)),
        1 => (0usize..300).prop_map(Action::Schedule),
        2 => (
            any::<usize>(),
            prop::option::of(1_700_000_000_000u64..1_700_000_100_000),
            0usize..300,
        )
            .prop_map(|(i, next, len)| Action::Reschedule(i, next, len)),
        1 => any::<usize>().prop_map(Action::Unschedule),
        1 => any::<usize>().prop_map(Action::UnscheduleStale),
        3 => (any::<usize>(), 0u8..3, 0usize..300)
            .prop_map(|(i, outcome, len)| Action::Finish(i, outcome, len)),
        1 => (any::<usize>(), 0usize..300).prop_map(|(i, len)| Action::Rekeep(i, len)),
        1 => any::<usize>().prop_map(Action::Forget),
        1 => any::<usize>().prop_map(Action::ForgetStale),
        1 => (0u64..40).prop_map(Action::Reserve),
        6 => Just(Action::Flush),
        1 => Just(Action::Discard),
        1 => Just(Action::Reopen),
        2 => (prop_oneof![4 => any::<u16>(), 1 => Just(0), 1 => Just(u16::MAX)], any::<bool>())
            .prop_map(|(at, leftover_tmp)| Action::Crash { at, leftover_tmp }),
    ]
}

pub(crate) fn options() -> impl Strategy<Value = LogOptions> {
    (
        prop_oneof![Just(0u64), Just(1024), Just(4096), Just(8 << 20)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(compact_min_bytes, fsync, direct_io)| LogOptions {
            durability: if fsync {
                Durability::Fsync
            } else {
                Durability::Interval(Duration::from_millis(50))
            },
            compact_min_bytes,
            // The checks below look at the file right after each flush.
            background_compaction: false,
            // With fsync: O_DIRECT block rewrites, or pwrite + fdatasync.
            direct_io,
        })
}
