//! Per-job cost of the routing core on virtual time: background submits
//! (empty and UUID-like uniques), a worker draining a queue with
//! GRAB_JOB_ALL + WORK_COMPLETE, a foreground submit → assign → complete
//! round trip, one background job through the whole server path (decode,
//! parse, route, encode), and the same drain at 10,000 and 1,000,000
//! queued jobs to show the per-job cost does not grow with depth.
//!
//! Inputs are built before the clock starts; effects are drained after
//! every input, as the server does, and dropped.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use gearshift_core::{ConnId, ConnInfo, Core, CoreConfig, Effect, Input, Rights};
use gearshift_proto::{GrabKind, PacketType, Priority, Request, Response, Submit};

/// Jobs per iteration of the submit and drain groups.
const N: usize = 10_000;
const CLIENT: ConnId = ConnId(1);
const WORKER: ConnId = ConnId(2);
const NOW: u64 = 1_700_000_000_000;

#[path = "../tests/wire/mod.rs"]
mod wire;
use wire::Wire;

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

/// A core with a client and a worker that can do `resize`.
fn core() -> Core {
    let mut core = Core::new(CoreConfig::default());
    core.connect(CLIENT, info(1));
    core.connect(WORKER, info(2));
    core.handle(
        WORKER,
        Input::Request(Request::CanDo(Bytes::from_static(b"resize"))),
        NOW,
    );
    let _ = core.take_effects();
    core
}

fn payload() -> Bytes {
    Bytes::from(vec![b'x'; 100])
}

fn uuid(i: usize) -> Bytes {
    Bytes::from(format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        i.wrapping_mul(2_654_435_761),
        i & 0xffff,
        i & 0xfff,
        (i >> 12) & 0xfff,
        i
    ))
}

fn submit(unique: Bytes, data: &Bytes, background: bool) -> Input {
    Input::Request(Request::submit(Box::new(Submit {
        function: Bytes::from_static(b"resize"),
        unique,
        data: data.clone(),
        priority: Priority::Normal,
        background,
        epoch: None,
        reducer: None,
    })))
}

fn submits(n: usize, uuids: bool) -> Vec<Input> {
    let data = payload();
    (0..n)
        .map(|i| {
            let unique = if uuids { uuid(i) } else { Bytes::new() };
            submit(unique, &data, true)
        })
        .collect()
}

fn run(core: &mut Core, conn: ConnId, inputs: Vec<Input>, effects: &mut Vec<Effect>) {
    for input in inputs {
        core.handle(conn, input, NOW);
        core.drain_effects_into(effects);
        effects.clear();
    }
}

/// A core with `n` queued background jobs (handles 1..=n).
fn queued(n: usize) -> Core {
    let mut core = core();
    run(&mut core, CLIENT, submits(n, false), &mut Vec::new());
    core
}

/// The WORK_COMPLETE a worker sends for handle `id`, as the reader would parse it.
fn completes(ids: std::ops::RangeInclusive<usize>) -> Vec<Input> {
    let result = Bytes::from_static(b"done");
    ids.map(|id| {
        Input::Request(Request::WorkComplete {
            handle: Bytes::from(format!("H:localhost:{id}")),
            data: result.clone(),
        })
    })
    .collect()
}

/// GRAB_JOB_ALL then WORK_COMPLETE for each prepared completion.
fn drain(core: &mut Core, completes: Vec<Input>, effects: &mut Vec<Effect>) {
    for complete in completes {
        core.handle(WORKER, Input::Request(Request::Grab(GrabKind::All)), NOW);
        core.drain_effects_into(effects);
        effects.clear();
        core.handle(WORKER, complete, NOW);
        core.drain_effects_into(effects);
        effects.clear();
    }
}

/// The handle of the JOB_ASSIGN_UNIQ just sent (GRAB_JOB_ALL of a job with no reducer).
fn assigned(effects: &mut Vec<Effect>) -> Bytes {
    match effects.pop() {
        Some(Effect::Send(_, Response::JobAssignUniq { handle, .. })) => handle,
        other => panic!("expected JOB_ASSIGN_UNIQ, got {other:?}"),
    }
}

fn submit_bg(c: &mut Criterion) {
    let mut g = c.benchmark_group("submit_bg");
    g.throughput(Throughput::Elements(N as u64));
    for (name, uuids) in [("empty_unique", false), ("uuid_unique", true)] {
        g.bench_function(name, |b| {
            let mut effects = Vec::new();
            b.iter_batched(
                || (core(), submits(N, uuids)),
                |(mut core, inputs)| {
                    run(&mut core, CLIENT, inputs, &mut effects);
                    core
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn grab_complete(c: &mut Criterion) {
    let mut g = c.benchmark_group("grab_complete");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("drain", |b| {
        let mut effects = Vec::new();
        b.iter_batched(
            || (queued(N), completes(1..=N)),
            |(mut core, completes)| {
                drain(&mut core, completes, &mut effects);
                core
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn foreground(c: &mut Criterion) {
    let mut g = c.benchmark_group("foreground");
    g.throughput(Throughput::Elements(1));
    g.bench_function("round_trip", |b| {
        let mut core = core();
        let data = payload();
        let result = Bytes::from_static(b"done");
        let mut effects = Vec::new();
        b.iter(|| {
            core.handle(CLIENT, submit(Bytes::new(), &data, false), NOW);
            core.drain_effects_into(&mut effects);
            effects.clear();
            core.handle(WORKER, Input::Request(Request::Grab(GrabKind::All)), NOW);
            core.drain_effects_into(&mut effects);
            let handle = assigned(&mut effects);
            effects.clear();
            core.handle(
                WORKER,
                Input::Request(Request::WorkComplete {
                    handle,
                    data: result.clone(),
                }),
                NOW,
            );
            core.drain_effects_into(&mut effects);
            black_box(effects.len());
            effects.clear();
        })
    });
    g.finish();
}

/// Draining a whole queue of `depth` jobs (grab + complete each), timed
/// per job: the cost must not grow with the depth.
fn depth(c: &mut Criterion) {
    let mut g = c.benchmark_group("depth_drain");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(1));
    for depth in [10_000usize, 1_000_000] {
        g.throughput(Throughput::Elements(depth as u64));
        g.bench_function(depth.to_string(), |b| {
            let mut effects = Vec::new();
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut core = queued(depth);
                    let completes = completes(1..=depth);
                    let start = Instant::now();
                    drain(&mut core, completes, &mut effects);
                    total += start.elapsed();
                    assert_eq!(core.job_count(), 0);
                }
                total
            })
        });
    }
    g.finish();

    // The same, steady: one submit, one grab, one complete per job while
    // `depth` jobs stay queued.
    let mut g = c.benchmark_group("depth_steady");
    for depth in [10_000usize, 1_000_000] {
        g.throughput(Throughput::Elements(1));
        let mut core = queued(depth);
        let data = payload();
        let mut effects = Vec::new();
        g.bench_function(depth.to_string(), |b| {
            b.iter(|| {
                core.handle(CLIENT, submit(Bytes::new(), &data, true), NOW);
                core.drain_effects_into(&mut effects);
                effects.clear();
                core.handle(WORKER, Input::Request(Request::Grab(GrabKind::All)), NOW);
                core.drain_effects_into(&mut effects);
                let handle = assigned(&mut effects);
                effects.clear();
                let complete = Input::Request(Request::WorkComplete {
                    handle,
                    data: Bytes::new(),
                });
                core.handle(WORKER, complete, NOW);
                core.drain_effects_into(&mut effects);
                effects.clear();
            })
        });
        assert_eq!(core.job_count(), depth);
    }
    g.finish();
}

/// The whole path of one background job through a server: SUBMIT_JOB_BG,
/// GRAB_JOB_ALL and WORK_COMPLETE packets cut from read buffers, parsed,
/// routed, and every reply encoded into a write buffer.
fn pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(1));
    g.bench_function("bg_submit_grab_complete", |b| {
        let mut core = Core::new(CoreConfig::default());
        core.connect(CLIENT, info(1));
        core.connect(WORKER, info(2));
        let (mut client, mut worker) = (Wire::new(), Wire::new());
        let mut effects = Vec::new();
        worker.send(PacketType::CanDo, &[b"resize"]);
        worker.serve(&mut core, WORKER, NOW, &mut effects);
        let data = vec![b'x'; 100];
        b.iter(|| {
            client.send(PacketType::SubmitJobBg, &[b"resize", b"", &data]);
            client.serve(&mut core, CLIENT, NOW, &mut effects);
            worker.send(PacketType::GrabJobAll, &[]);
            let handle = worker.serve(&mut core, WORKER, NOW, &mut effects);
            worker.send(PacketType::WorkComplete, &[&handle, b"ok"]);
            drop(handle);
            worker.serve(&mut core, WORKER, NOW, &mut effects);
        });
        assert_eq!(core.job_count(), 0);
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = submit_bg, grab_complete, foreground, pipeline, depth
}
criterion_main!(benches);
