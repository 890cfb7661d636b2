//! Model-based fuzzing of the routing core: typed requests from four
//! connections (submissions with and without unique ids, priorities and run
//! times; abilities with and without time limits; grabs; work results and
//! updates; status queries; sleeps; disconnects; time moving) drive a
//! `Core` and a small reference model side by side. After every step the
//! core's own `check_invariants` must hold and the core must agree with the
//! model: every handle it created is queued, scheduled or running on exactly
//! one live worker that can do its function, or finished (never to come
//! back); a named unique id joins the live job that has it; a grab takes the
//! head of the highest-priority queue the worker can do, or NO_JOB only when
//! there is none; a result reaches each waiting client exactly once; a lost
//! worker's jobs go back to their queue (or fail at the retry limit); a
//! foreground job nobody waits for any more is dropped before it starts;
//! a worker that sent OPTION_REQ epoch-early is handed exactly the epoch
//! jobs offered to it (not yet due) and nothing else, and a job it loses
//! waits for its time again; OPTION_REQ stats is kept or refused.
//!
//! `main.rs` holds the operations the fuzzer generates; `model.rs` the
//! reference model, which drives the core with them (a worker's side in
//! `model/work.rs`, early takers and options in `model/early.rs`);
//! `model/checks.rs` what must agree between the two after every step.

#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

mod model;

use model::Model;

#[derive(Debug, Arbitrary)]
struct Case {
    job_retries: u8,
    exceptions: bool,
    ops: Vec<Op>,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Work {
    Complete,
    Fail,
    Exception,
    Data,
    Warning,
    Status,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Submit {
        slot: u8,
        func: u8,
        unique: Option<u8>,
        prio: u8,
        bg: bool,
        /// Seconds after the clock's start to run at (SUBMIT_JOB_EPOCH).
        epoch: Option<u8>,
    },
    CanDo {
        slot: u8,
        func: u8,
        timeout: Option<u16>,
    },
    CantDo {
        slot: u8,
        func: u8,
    },
    Reset {
        slot: u8,
    },
    PreSleep {
        slot: u8,
    },
    Grab {
        slot: u8,
        kind: u8,
    },
    Work {
        slot: u8,
        what: Work,
        /// Picks one of the slot's held jobs, else any handle ever made.
        pick: u8,
        own: bool,
    },
    GetStatus {
        slot: u8,
        pick: u8,
    },
    Exceptions {
        slot: u8,
    },
    Disconnect {
        slot: u8,
    },
    Advance {
        ms: u16,
        fire: bool,
    },
    /// OPTION_REQ epoch-early: the worker takes only epoch jobs not yet due.
    EpochEarly {
        slot: u8,
    },
    /// OPTION_REQ `stats cpu=S rss=KIB`, or a malformed one.
    Stats {
        slot: u8,
        cpu_ms: u16,
        rss: u16,
        malformed: bool,
    },
}

fuzz_target!(|case: Case| {
    let mut m = Model::new(u32::from(case.job_retries % 3), case.exceptions);
    for op in case.ops.iter().take(200) {
        m.step(op);
    }
});
