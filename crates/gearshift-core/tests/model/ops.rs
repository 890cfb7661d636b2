//! The random operations the model test runs, and their proptest strategy.

use proptest::prelude::*;

pub(crate) const SLOTS: usize = 4;
pub(crate) const FUNCS: [&str; 3] = ["a", "b", "c"];
pub(crate) const UNIQUES: [&str; 4] = ["", "-", "u1", "u2"];
/// The connection admin `cancel` lines come from; it never sleeps or works.
pub(crate) const ADMIN: u64 = 0;

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
        1 => (0..2500u64).prop_map(|ms| Op::Advance { ms }),
    ]
}
