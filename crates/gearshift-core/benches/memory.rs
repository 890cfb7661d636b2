//! Heap bytes per queued job, all in: the wire bytes the job's fields point
//! into (its share of the read buffer), the job record, every index and
//! queue entry. Measured with a counting global allocator.
//!
//! Jobs arrive as the server sees them: encoded SUBMIT_JOB_BG /
//! SUBMIT_JOB packets in one read buffer, cut with `decode_frame` and
//! parsed with `Request::parse`, so `data` and `unique` are slices of that
//! buffer. Also counts heap allocations per job in a steady
//! submit → grab → complete cycle.
//!
//! Run: `cargo bench -p gearshift-core --bench memory`.

use std::alloc::System;

use bytes::{Bytes, BytesMut};
use gearshift_core::{ConnId, ConnInfo, Core, CoreConfig, Effect, Input, Rights};
use gearshift_proto::frame::{encode_parts, DEFAULT_MAX_PACKET};
use gearshift_proto::{decode_frame, Frame, GrabKind, Magic, PacketType, Request, Response};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CLIENT: ConnId = ConnId(1);
const WORKER: ConnId = ConnId(2);
const NOW: u64 = 1_700_000_000_000;
const DATA_LEN: usize = 100;

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

fn uuid(i: usize) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        i.wrapping_mul(2_654_435_761) & 0xffff_ffff,
        i & 0xffff,
        i & 0xfff,
        (i >> 12) & 0xfff,
        i
    )
}

/// Net heap bytes still held since `region` began.
fn held(region: &Region<System>) -> isize {
    let s = region.change();
    s.bytes_allocated as isize - s.bytes_deallocated as isize + s.bytes_reallocated
}

/// Queues `n` jobs from wire bytes and returns (all-in bytes, wire bytes).
fn queue(n: usize, uuids: bool, background: bool) -> (f64, f64) {
    let data = vec![b'x'; DATA_LEN];
    let uniques: Vec<String> = (0..n)
        .map(|i| if uuids { uuid(i) } else { String::new() })
        .collect();
    let kind = if background {
        PacketType::SubmitJobBg
    } else {
        PacketType::SubmitJob
    };
    let wire: usize = uniques
        .iter()
        .map(|u| 12 + b"resize".len() + 1 + u.len() + 1 + DATA_LEN)
        .sum();

    let mut core = Core::new(CoreConfig::default());
    core.connect(CLIENT, info(1));
    let _ = core.take_effects();
    let mut effects: Vec<Effect> = Vec::with_capacity(16);

    let region = Region::new(GLOBAL);
    let mut buf = BytesMut::with_capacity(wire);
    for u in &uniques {
        encode_parts(
            Magic::Req,
            kind,
            &[b"resize", u.as_bytes(), &data],
            &mut buf,
        );
    }
    while let Ok(Some(Frame::Packet(p))) = decode_frame(&mut buf, DEFAULT_MAX_PACKET) {
        let Ok(req) = Request::parse(&p) else {
            panic!("bad request")
        };
        drop(p);
        core.handle(CLIENT, Input::Request(req), NOW);
        core.drain_effects_into(&mut effects);
        effects.clear();
    }
    drop(buf);
    let total = held(&region);
    assert_eq!(core.job_count(), n);
    drop(core);
    (total as f64 / n as f64, wire as f64 / n as f64)
}

/// Heap bytes per finished job kept queryable under a `keep_results`
/// policy (record, result, history), and per queued job under a policy
/// (its history record on top of the job): runs `n` background jobs with
/// UUID uniques through submit → grab → complete with a 100-byte result.
fn kept(n: usize) -> (f64, f64) {
    use gearshift_core::policy::{Policies, Policy, Rule};
    let mut core = Core::new(CoreConfig::default());
    core.set_policies(Policies {
        rules: vec![Rule {
            pattern: "*".into(),
            policy: std::sync::Arc::new(Policy {
                keep_results: 3_600_000,
                ..Policy::default()
            }),
        }],
        retention: gearshift_core::policy::Retention {
            max_kept: usize::MAX,
            ..Default::default()
        },
    });
    core.connect(CLIENT, info(1));
    core.connect(WORKER, info(2));
    let function = Bytes::from_static(b"resize");
    core.handle(
        WORKER,
        Input::Request(Request::CanDo(function.clone())),
        NOW,
    );
    let _ = core.take_effects();
    let data = Bytes::from(vec![b'x'; DATA_LEN]);
    let result = Bytes::from(vec![b'r'; DATA_LEN]);
    let region = Region::new(GLOBAL);
    for i in 0..n {
        core.handle(
            CLIENT,
            Input::Request(Request::submit(Box::new(gearshift_proto::Submit {
                function: function.clone(),
                unique: Bytes::from(uuid(i)),
                data: data.clone(),
                priority: gearshift_proto::Priority::Normal,
                background: true,
                epoch: None,
                reducer: None,
            }))),
            NOW,
        );
    }
    let _ = core.take_effects();
    let queued = held(&region) as f64 / n as f64;
    for _ in 0..n {
        core.handle(WORKER, Input::Request(Request::Grab(GrabKind::Plain)), NOW);
        let handle = match core.take_effects().pop() {
            Some(Effect::Send(_, Response::JobAssign { handle, .. })) => handle,
            other => panic!("expected JOB_ASSIGN, got {other:?}"),
        };
        core.handle(
            WORKER,
            Input::Request(Request::WorkComplete {
                handle,
                data: result.clone(),
            }),
            NOW,
        );
        let _ = core.take_effects();
    }
    assert_eq!(core.retained_counts().0, n);
    let kept = held(&region) as f64 / n as f64;
    drop(core);
    (queued, kept)
}

/// Heap allocations per job in a steady submit → grab → complete cycle
/// with `depth` jobs queued, after a warm-up.
fn steady_allocations(depth: usize, jobs: usize) -> f64 {
    let mut core = Core::new(CoreConfig::default());
    core.connect(CLIENT, info(1));
    core.connect(WORKER, info(2));
    let function = Bytes::from_static(b"resize");
    core.handle(
        WORKER,
        Input::Request(Request::CanDo(function.clone())),
        NOW,
    );
    let data = Bytes::from(vec![b'x'; DATA_LEN]);
    let submit = || {
        Input::Request(Request::submit(Box::new(gearshift_proto::Submit {
            function: function.clone(),
            unique: Bytes::new(),
            data: data.clone(),
            priority: gearshift_proto::Priority::Normal,
            background: true,
            epoch: None,
            reducer: None,
        })))
    };
    let mut effects: Vec<Effect> = Vec::with_capacity(16);
    for _ in 0..depth {
        core.handle(CLIENT, submit(), NOW);
    }
    core.drain_effects_into(&mut effects);
    effects.clear();
    let cycle = |core: &mut Core, effects: &mut Vec<Effect>| {
        core.handle(CLIENT, submit(), NOW);
        core.drain_effects_into(effects);
        effects.clear();
        core.handle(WORKER, Input::Request(Request::Grab(GrabKind::All)), NOW);
        core.drain_effects_into(effects);
        let handle = match effects.pop() {
            Some(Effect::Send(_, Response::JobAssignUniq { handle, .. })) => handle,
            other => panic!("expected JOB_ASSIGN_UNIQ, got {other:?}"),
        };
        effects.clear();
        let done = Request::WorkComplete {
            handle,
            data: Bytes::new(),
        };
        core.handle(WORKER, Input::Request(done), NOW);
        core.drain_effects_into(effects);
        effects.clear();
    };
    for _ in 0..jobs {
        cycle(&mut core, &mut effects);
    }
    let region = Region::new(GLOBAL);
    for _ in 0..jobs {
        cycle(&mut core, &mut effects);
    }
    let allocations = region.change().allocations;
    allocations as f64 / jobs as f64
}

/// Heap allocations per job on the whole path a server runs: each packet
/// decoded from a connection's read buffer, parsed, handled, and every
/// reply encoded into the connection's write buffer; steady state with
/// `depth` jobs queued.
fn pipeline_allocations(depth: usize, jobs: usize) -> f64 {
    let mut core = Core::new(CoreConfig::default());
    core.connect(CLIENT, info(1));
    core.connect(WORKER, info(2));
    let data = vec![b'x'; DATA_LEN];
    let mut client_in = BytesMut::with_capacity(16 * 1024);
    let mut worker_in = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut effects: Vec<Effect> = Vec::with_capacity(16);
    let mut assigned = BytesMut::with_capacity(64);
    // Feeds every frame in `input` from `conn` and encodes the replies.
    let mut feed =
        |core: &mut Core, conn: ConnId, input: &mut BytesMut, assigned: &mut BytesMut| {
            while let Ok(Some(frame)) = decode_frame(input, DEFAULT_MAX_PACKET) {
                let Frame::Packet(p) = frame else { continue };
                let req = match Request::parse(&p) {
                    Ok(r) => Input::Request(r),
                    Err(e) => Input::Invalid(e),
                };
                core.handle(conn, req, NOW);
                core.drain_effects_into(&mut effects);
                out.clear();
                for e in effects.drain(..) {
                    match e {
                        Effect::Send(_, r) => {
                            if let Response::JobAssignUniq { handle, .. } = &r {
                                assigned.clear();
                                assigned.extend_from_slice(handle);
                            }
                            r.encode(&mut out);
                        }
                        Effect::Created(_, id) => core.encode_job_created(id, &mut out),
                        _ => {}
                    }
                }
            }
        };
    let write = |buf: &mut BytesMut, kind: PacketType, parts: &[&[u8]]| {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(16 * 1024);
        }
        encode_parts(Magic::Req, kind, parts, buf);
    };
    write(&mut worker_in, PacketType::CanDo, &[b"resize"]);
    feed(&mut core, WORKER, &mut worker_in, &mut assigned);
    for _ in 0..depth {
        write(
            &mut client_in,
            PacketType::SubmitJobBg,
            &[b"resize", b"", &data],
        );
        feed(&mut core, CLIENT, &mut client_in, &mut assigned);
    }
    let mut cycle = |core: &mut Core, assigned: &mut BytesMut| {
        write(
            &mut client_in,
            PacketType::SubmitJobBg,
            &[b"resize", b"", &data],
        );
        feed(core, CLIENT, &mut client_in, assigned);
        write(&mut worker_in, PacketType::GrabJobAll, &[]);
        feed(core, WORKER, &mut worker_in, assigned);
        let handle = assigned.split().freeze();
        write(&mut worker_in, PacketType::WorkComplete, &[&handle, b"ok"]);
        drop(handle);
        feed(core, WORKER, &mut worker_in, assigned);
    };
    for _ in 0..jobs {
        cycle(&mut core, &mut assigned);
    }
    let region = Region::new(GLOBAL);
    for _ in 0..jobs {
        cycle(&mut core, &mut assigned);
    }
    let allocations = region.change().allocations;
    assert_eq!(core.job_count(), depth);
    allocations as f64 / jobs as f64
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it briefly.
    let quick = !std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if quick {
        &[10_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    println!(
        "heap bytes per queued {DATA_LEN}-byte job, all in (wire bytes of its packet in brackets)"
    );
    for &n in sizes {
        for (label, uuids, bg) in [
            ("background, empty unique", false, true),
            ("background, UUID unique ", true, true),
            ("foreground, empty unique", false, false),
        ] {
            let (total, wire) = queue(n, uuids, bg);
            println!("  {n:>9} jobs, {label}: {total:7.1} B/job  ({wire:.0} B wire)");
        }
    }
    let n = if quick { 10_000 } else { 100_000 };
    let (queued, kept) = kept(n);
    println!(
        "under a keep_results policy, {n} jobs with UUID uniques: {queued:.1} B per queued job \
         (history included); {kept:.1} B per finished job kept with a {DATA_LEN}-byte result"
    );
    let depth = if quick { 1_000 } else { 100_000 };
    let per_job = steady_allocations(depth, 10_000);
    println!(
        "heap allocations per job, steady submit+grab+complete at depth {depth}: {per_job:.3}"
    );
    let per_job = pipeline_allocations(depth, 10_000);
    println!(
        "  the same through decode + parse + core + encode: {per_job:.3} \
         (read buffers are 16 KiB chunks, as the server's)"
    );
}
