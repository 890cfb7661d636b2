//! The random operations the model test runs, and their proptest strategy.

use proptest::prelude::*;

pub(crate) const SLOTS: usize = 4;
pub(crate) const FUNCS: [&str; 3] = ["a", "b", "c"];
pub(crate) const UNIQUES: [&str; 4] = ["", "-", "u1", "u2"];
/// The connection admin `cancel` lines come from; it never sleeps or works.
pub(crate) const ADMIN: u64 = 0;
/// OPTION_REQ `stats` texts, each with the figures (CPU ms, RSS KiB) it
/// leaves on the worker, or `None`: malformed, refused, nothing changes.
pub(crate) const STATS: [(&str, Option<(u64, u64)>); 10] = [
    ("stats cpu=2.5 rss=4096", Some((2_500, 4_096))),
    ("stats cpu=0.125 rss=1", Some((125, 1))),
    ("STATS cpu=3", Some((3_000, 0))),
    ("stats rss=900 gpu=1", Some((0, 900))),
    ("stats cpu=1.2345 rss=7", Some((1_234, 7))),
    ("stats cpu=x", None),
    ("stats cpu=-1 rss=2", None),
    ("stats rss", None),
    ("stats cpu=.5", None),
    ("stats rss=1k", None),
];

#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    Status,
    Data,
    Warning,
    Complete,
    Fail,
    Exception,
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Submit {
        slot: usize,
        func: usize,
        unique: usize,
        data: u8,
        prio: usize,
        bg: bool,
    },
    CanDo {
        slot: usize,
        func: usize,
        timeout: Option<u64>,
    },
    CantDo {
        slot: usize,
        func: usize,
    },
    Reset {
        slot: usize,
    },
    Sleep {
        slot: usize,
    },
    Grab {
        slot: usize,
        kind: usize,
    },
    Work {
        slot: usize,
        what: Work,
        pick: usize,
        own: bool,
    },
    GetStatus {
        slot: usize,
        pick: usize,
    },
    Exceptions {
        slot: usize,
    },
    Cancel {
        pick: usize,
    },
    Disconnect {
        slot: usize,
    },
    Advance {
        ms: u64,
    },
    /// SUBMIT_JOB_EPOCH (background, normal priority as on the wire), due
    /// `secs` seconds after the current whole second: -1 is past, 0 now
    /// (due at or before the clock), 1 to 3 in the future.
    Epoch {
        slot: usize,
        func: usize,
        unique: usize,
        data: u8,
        secs: i64,
    },
    /// OPTION_REQ epoch-early.
    EpochEarly {
        slot: usize,
    },
    /// OPTION_REQ with one of [`STATS`].
    Stats {
        slot: usize,
        pick: usize,
    },
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let slot = 0..SLOTS;
    let func = 0..FUNCS.len();
    let work = prop_oneof![
        Just(Work::Status),
        Just(Work::Data),
        Just(Work::Warning),
        Just(Work::Complete),
        Just(Work::Fail),
        Just(Work::Exception),
    ];
    prop_oneof![
        6 => (slot.clone(), func.clone(), 0..UNIQUES.len(), 0..3u8, 0..3usize, any::<bool>())
            .prop_map(|(slot, func, unique, data, prio, bg)| Op::Submit { slot, func, unique, data, prio, bg }),
        3 => (slot.clone(), func.clone(), prop_oneof![Just(None), Just(Some(1)), Just(Some(2000))])
            .prop_map(|(slot, func, timeout)| Op::CanDo { slot, func, timeout }),
        1 => (slot.clone(), func.clone()).prop_map(|(slot, func)| Op::CantDo { slot, func }),
        1 => slot.clone().prop_map(|slot| Op::Reset { slot }),
        2 => slot.clone().prop_map(|slot| Op::Sleep { slot }),
        5 => (slot.clone(), 0..3usize).prop_map(|(slot, kind)| Op::Grab { slot, kind }),
        6 => (slot.clone(), work, any::<usize>(), prop::bool::weighted(0.8))
            .prop_map(|(slot, what, pick, own)| Op::Work { slot, what, pick, own }),
        1 => (slot.clone(), any::<usize>()).prop_map(|(slot, pick)| Op::GetStatus { slot, pick }),
        1 => slot.clone().prop_map(|slot| Op::Exceptions { slot }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => slot.clone().prop_map(|slot| Op::Disconnect { slot }),
        2 => (0..2500u64).prop_map(|ms| Op::Advance { ms }),
        3 => (slot.clone(), func.clone(), 0..UNIQUES.len(), 0..3u8, -1..4i64)
            .prop_map(|(slot, func, unique, data, secs)| Op::Epoch { slot, func, unique, data, secs }),
        2 => slot.clone().prop_map(|slot| Op::EpochEarly { slot }),
        1 => (slot, 0..STATS.len()).prop_map(|(slot, pick)| Op::Stats { slot, pick }),
    ]
}
