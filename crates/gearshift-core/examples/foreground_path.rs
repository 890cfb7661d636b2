//! Runs foreground jobs through `Core::handle`, socket-free: SUBMIT_JOB,
//! GRAB_JOB_ALL, WORK_COMPLETE, for measuring which core files one job
//! passes through (docs/design.md, "Reading the core"):
//!
//!   cargo build --release -p gearshift-core --example foreground_path
//!   valgrind --tool=callgrind --toggle-collect='foreground_path::one_job' \
//!     target/release/examples/foreground_path 2000
//!   callgrind_annotate --threshold=100 callgrind.out.* |
//!     grep -oE 'gearshift-(core|proto)/src/[a-z_/]+\.rs' | sort -u
//!
//! Only `one_job` is counted: the connections and the worker's CAN_DO are
//! set up before, once.

use bytes::Bytes;
use gearshift_core::{ConnId, ConnInfo, Core, CoreConfig, Effect, Input, Rights};
use gearshift_proto::{GrabKind, Priority, Request, Response, Submit};

const CLIENT: ConnId = ConnId(1);
const WORKER: ConnId = ConnId(2);

fn info(fd: i64) -> ConnInfo {
    ConnInfo {
        fd,
        ip: "127.0.0.1".into(),
        port: 0,
        loopback: true,
        rights: Rights::ALL,
        node: None,
        identity: None,
    }
}

fn main() {
    let jobs: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let mut core = Core::new(CoreConfig::default());
    core.connect(CLIENT, info(1));
    core.connect(WORKER, info(2));
    let can_do = Request::CanDo(Bytes::from_static(b"resize"));
    core.handle(WORKER, Input::Request(can_do), 0);
    let data = Bytes::from(vec![b'x'; 100]);
    let mut effects: Vec<Effect> = Vec::new();
    for now in 0..jobs {
        one_job(&mut core, &data, &mut effects, now);
    }
    assert_eq!(core.job_count(), 0);
    println!("{jobs} foreground jobs");
}

/// One foreground job, socket to socket: SUBMIT_JOB, GRAB_JOB_ALL, WORK_COMPLETE.
#[inline(never)]
fn one_job(core: &mut Core, data: &Bytes, effects: &mut Vec<Effect>, now: u64) {
    let submit = Request::submit(Box::new(Submit {
        function: Bytes::from_static(b"resize"),
        unique: Bytes::new(),
        data: data.clone(),
        priority: Priority::Normal,
        background: false,
        epoch: None,
        reducer: None,
    }));
    core.handle(CLIENT, Input::Request(submit), now);
    effects.clear();
    core.drain_effects_into(effects);
    core.handle(WORKER, Input::Request(Request::Grab(GrabKind::All)), now);
    effects.clear();
    core.drain_effects_into(effects);
    let handle = match effects.pop() {
        Some(Effect::Send(_, Response::JobAssignUniq { handle, .. })) => handle,
        other => panic!("expected JOB_ASSIGN_UNIQ, got {other:?}"),
    };
    let complete = Request::WorkComplete {
        handle,
        data: Bytes::from_static(b"done"),
    };
    core.handle(WORKER, Input::Request(complete), now);
    effects.clear();
    core.drain_effects_into(effects);
    assert!(
        matches!(effects.last(), Some(Effect::Send(c, Response::WorkComplete { .. })) if *c == CLIENT),
        "the client hears WORK_COMPLETE"
    );
}
