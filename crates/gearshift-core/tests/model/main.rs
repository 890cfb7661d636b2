//! Model-based property test: random sequences of submits (plain and
//! epoch), grabs, results, ability changes, sleeps, cancels, disconnects,
//! clock advances and options (exceptions, epoch-early, stats) from several
//! connections run against the core and against a plain reference model
//! kept alongside. After every step the core's effects must equal the
//! model's prediction (as a multiset; grabs are checked against the rules
//! instead of predicted), and `status`, `prioritystatus`, `show jobs`,
//! `job_count()` and `running_jobs()` must agree with the model. At the end
//! every job is drained and every connected foreground client must have
//! received exactly one terminal packet per submission.

mod checks;
#[path = "../common/mod.rs"]
mod common;
mod epoch;
mod ops;
mod state;

use ops::{op, Op, Work};
use proptest::prelude::*;
use state::Model;

fn run(job_retries: u32, exceptions: bool, durable: bool, ops: &[Op]) {
    let mut m = Model::new(job_retries, exceptions, durable);
    for op in ops {
        m.step(op);
        m.check();
    }
    m.finish();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn core_matches_the_model(
        job_retries in prop_oneof![Just(0u32), Just(1), Just(3)],
        exceptions in any::<bool>(),
        durable in any::<bool>(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        run(job_retries, exceptions, durable, &ops);
    }
}

#[test]
fn model_smoke_sequence() {
    let ops = [
        Op::CanDo {
            slot: 1,
            func: 0,
            timeout: Some(1),
        },
        Op::Sleep { slot: 1 },
        Op::Submit {
            slot: 0,
            func: 0,
            unique: 2,
            data: 0,
            prio: 1,
            bg: false,
        },
        Op::Submit {
            slot: 2,
            func: 0,
            unique: 2,
            data: 1,
            prio: 0,
            bg: false,
        },
        Op::Grab { slot: 1, kind: 1 },
        Op::Advance { ms: 1000 },
        Op::Grab { slot: 1, kind: 0 },
        Op::Work {
            slot: 1,
            what: Work::Data,
            pick: 0,
            own: true,
        },
        Op::Disconnect { slot: 2 },
        Op::Work {
            slot: 1,
            what: Work::Exception,
            pick: 0,
            own: true,
        },
    ];
    run(0, false, false, &ops);
    run(0, false, true, &ops);
}

#[test]
fn model_epoch_smoke_sequence() {
    let ops = [
        Op::Epoch {
            slot: 0,
            func: 0,
            unique: 0,
            data: 0,
            secs: 2,
        },
        Op::CanDo {
            slot: 1,
            func: 0,
            timeout: Some(1),
        },
        Op::Sleep { slot: 1 },
        Op::EpochEarly { slot: 1 },
        Op::Grab { slot: 1, kind: 1 },
        // Its time limit runs out before the job is due: offered again.
        Op::Advance { ms: 1000 },
        Op::CanDo {
            slot: 2,
            func: 0,
            timeout: None,
        },
        Op::Grab { slot: 2, kind: 0 },
        Op::Stats { slot: 2, pick: 0 },
        Op::Stats { slot: 2, pick: 5 },
        Op::Grab { slot: 1, kind: 0 },
        Op::Disconnect { slot: 1 },
        Op::Advance { ms: 1000 },
        Op::Grab { slot: 2, kind: 2 },
    ];
    run(0, false, false, &ops);
    run(1, false, true, &ops);
}
