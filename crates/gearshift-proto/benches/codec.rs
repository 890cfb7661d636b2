//! Per-packet cost of the codec: cutting frames off a read buffer, parsing
//! them into requests, encoding responses, and parsing admin lines.
//!
//! Every group reports throughput in packets, so criterion's "elem/s" and
//! the time per iteration divided by [`N`] give the cost of one packet.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use gearshift_proto::frame::{encode_parts, DEFAULT_MAX_PACKET};
use gearshift_proto::{decode_frame, parse_admin, Frame, Magic, PacketType, Request, Response};

/// Packets per iteration.
const N: usize = 1000;

fn payload() -> Bytes {
    Bytes::from(vec![b'x'; 100])
}

/// A read buffer holding `N` copies of one request packet.
fn stream(kind: PacketType, parts: &[&[u8]]) -> BytesMut {
    let mut buf = BytesMut::new();
    for _ in 0..N {
        encode_parts(Magic::Req, kind, parts, &mut buf);
    }
    buf
}

fn streams() -> Vec<(&'static str, BytesMut)> {
    let data = payload();
    vec![
        (
            "submit_job_bg",
            stream(PacketType::SubmitJobBg, &[b"resize", b"", &data]),
        ),
        (
            "submit_job_bg_uuid",
            stream(
                PacketType::SubmitJobBg,
                &[b"resize", b"6f1c2a4e-9b3d-4f7a-8e21-0c5d9a7b3e14", &data],
            ),
        ),
        ("grab_job_all", stream(PacketType::GrabJobAll, &[])),
        (
            "work_complete",
            stream(PacketType::WorkComplete, &[b"H:localhost:123456", &data]),
        ),
    ]
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(N as u64));
    for (name, buf) in streams() {
        g.bench_function(name, |b| {
            b.iter_batched(
                || buf.clone(),
                |mut buf| {
                    while let Ok(Some(frame)) = decode_frame(&mut buf, DEFAULT_MAX_PACKET) {
                        black_box(frame);
                    }
                    buf
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn decode_and_parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_parse");
    g.throughput(Throughput::Elements(N as u64));
    for (name, buf) in streams() {
        g.bench_function(name, |b| {
            b.iter_batched(
                || buf.clone(),
                |mut buf| {
                    while let Ok(Some(frame)) = decode_frame(&mut buf, DEFAULT_MAX_PACKET) {
                        if let Frame::Packet(p) = frame {
                            let _ = black_box(Request::parse(&p));
                        }
                    }
                    buf
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(N as u64));
    for (name, mut buf) in streams() {
        let mut packets = Vec::with_capacity(N);
        while let Ok(Some(Frame::Packet(p))) = decode_frame(&mut buf, DEFAULT_MAX_PACKET) {
            packets.push(p);
        }
        g.bench_function(name, |b| {
            b.iter(|| {
                for p in &packets {
                    let _ = black_box(Request::parse(black_box(p)));
                }
            })
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let handle = Bytes::from_static(b"H:localhost:123456");
    let function = Bytes::from_static(b"resize");
    let unique = Bytes::from_static(b"6f1c2a4e-9b3d-4f7a-8e21-0c5d9a7b3e14");
    let data = payload();
    let cases = [
        ("job_created", Response::JobCreated(handle.clone())),
        (
            "job_assign_all",
            Response::JobAssignAll {
                handle: handle.clone(),
                function: function.clone(),
                unique: unique.clone(),
                reducer: Bytes::new(),
                data: data.clone(),
            },
        ),
        (
            "work_complete",
            Response::WorkComplete {
                handle: handle.clone(),
                data: data.clone(),
            },
        ),
        (
            "status_res",
            Response::StatusRes {
                handle: handle.clone(),
                known: true,
                running: true,
                numerator: 52,
                denominator: 100,
            },
        ),
    ];
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(N as u64));
    for (name, response) in cases {
        let mut out = BytesMut::with_capacity(N * 256);
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for _ in 0..N {
                    black_box(&response).encode(&mut out);
                }
                black_box(out.len())
            })
        });
    }
    g.finish();
}

fn admin(c: &mut Criterion) {
    let lines: [&[u8]; 4] = [
        b"status",
        b"maxqueue resize 10 20 30",
        b"show unique jobs",
        b"cancel job H:localhost:123456",
    ];
    let mut g = c.benchmark_group("admin_parse");
    g.throughput(Throughput::Elements(lines.len() as u64));
    g.bench_function("mixed", |b| {
        b.iter(|| {
            for line in lines {
                black_box(parse_admin(black_box(line)));
            }
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = decode, decode_and_parse, parse, encode, admin
}
criterion_main!(benches);
