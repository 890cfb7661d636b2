//! Memory budget of a queued job and allocations on the per-job path,
//! measured with a counting global allocator (so this binary holds one
//! test: a second one running in parallel would be counted too).
//!
//! - A queued background job with a 100-byte workload costs at most 250
//!   heap bytes all in (its packet's bytes, the job, its index and queue
//!   entries), and at most 280 with a 36-byte unique id (libgearman sends
//!   a UUID with every job).
//! - In steady state, a job's whole path — SUBMIT_JOB_BG, GRAB_JOB_ALL and
//!   WORK_COMPLETE decoded from read buffers, parsed, routed, and every
//!   reply encoded — allocates nothing but its share of the read buffers.
#![cfg(target_pointer_width = "64")]

use std::alloc::System;

use bytes::BytesMut;
use gearshift_core::{ConnId, ConnInfo, Core, CoreConfig, Input};
use gearshift_proto::frame::{encode_parts, DEFAULT_MAX_PACKET};
use gearshift_proto::{decode_frame, Frame, Magic, PacketType, Request};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

mod wire;
use wire::Wire;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CLIENT: ConnId = ConnId(1);
const WORKER: ConnId = ConnId(2);

fn core() -> Core {
    let mut core = Core::new(CoreConfig::default());
    for (conn, fd) in [(CLIENT, 1), (WORKER, 2)] {
        let info = ConnInfo {
            fd,
            ip: "127.0.0.1".into(),
            port: 0,
            loopback: true,
            rights: gearshift_core::Rights::ALL,
            node: None,
            identity: None,
        };
        core.connect(conn, info);
    }
    core
}

fn bytes_per_queued_job(n: usize, unique: impl Fn(usize) -> Vec<u8>) -> f64 {
    let mut core = core();
    let mut effects = Vec::with_capacity(16);
    let data = [b'x'; 100];
    let region = Region::new(GLOBAL);
    let mut buf = BytesMut::with_capacity(n * (12 + 7 + 1 + unique(0).len() + data.len()));
    for i in 0..n {
        encode_parts(
            Magic::Req,
            PacketType::SubmitJobBg,
            &[b"resize", &unique(i), &data],
            &mut buf,
        );
    }
    while let Ok(Some(Frame::Packet(p))) = decode_frame(&mut buf, DEFAULT_MAX_PACKET) {
        let Ok(req) = Request::parse(&p) else {
            panic!("a valid SUBMIT_JOB_BG")
        };
        drop(p);
        core.handle(CLIENT, Input::Request(req), 0);
        core.drain_effects_into(&mut effects);
        effects.clear();
    }
    drop(buf);
    let s = region.change();
    let held = s.bytes_allocated as isize - s.bytes_deallocated as isize + s.bytes_reallocated;
    assert_eq!(core.job_count(), n);
    held as f64 / n as f64
}

fn allocations_per_job(depth: usize, jobs: usize) -> f64 {
    let mut core = core();
    let (mut client, mut worker) = (Wire::new(), Wire::new());
    let mut effects = Vec::with_capacity(16);
    let data = [b'x'; 100];
    worker.send(PacketType::CanDo, &[b"resize"]);
    worker.serve(&mut core, WORKER, 0, &mut effects);
    for _ in 0..depth {
        client.send(PacketType::SubmitJobBg, &[b"resize", b"", &data]);
        client.serve(&mut core, CLIENT, 0, &mut effects);
    }
    let mut cycle = |core: &mut Core| {
        client.send(PacketType::SubmitJobBg, &[b"resize", b"", &data]);
        client.serve(core, CLIENT, 0, &mut effects);
        worker.send(PacketType::GrabJobAll, &[]);
        let handle = worker.serve(core, WORKER, 0, &mut effects);
        assert!(!handle.is_empty(), "a job was assigned");
        worker.send(PacketType::WorkComplete, &[&handle, b"ok"]);
        drop(handle);
        worker.serve(core, WORKER, 0, &mut effects);
    };
    for _ in 0..jobs {
        cycle(&mut core);
    }
    let region = Region::new(GLOBAL);
    for _ in 0..jobs {
        cycle(&mut core);
    }
    let allocations = region.change().allocations;
    assert_eq!(core.job_count(), depth);
    allocations as f64 / jobs as f64
}

#[test]
fn queued_jobs_are_small_and_the_job_path_does_not_allocate() {
    let per_job = bytes_per_queued_job(100_000, |_| Vec::new());
    // 120 of them are the packet itself (header, function, workload), 88
    // the job's slot.
    assert!(
        per_job <= 250.0,
        "a queued 100-byte job costs {per_job:.1} heap bytes (budget 250)"
    );
    // A named job keeps its unique and workload in one buffer of their
    // exact size (136 bytes), and its unique is indexed.
    let uuid = |i: usize| format!("{i:08x}-0000-4000-8000-000000000000").into_bytes();
    let per_job = bytes_per_queued_job(100_000, uuid);
    assert!(
        per_job <= 280.0,
        "a queued 100-byte job with a 36-byte unique costs {per_job:.1} heap bytes (budget 280)"
    );
    let per_job = allocations_per_job(5_000, 5_000);
    // Only the read buffers' 16 KiB chunks: about one per 130 packets.
    assert!(
        per_job < 0.05,
        "{per_job:.3} heap allocations per job in steady state"
    );
}
