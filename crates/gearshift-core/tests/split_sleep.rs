//! A worker split over three owners (the splitter in front of three real
//! cores, as on a partitioned node): whatever order the links deliver in
//! and whenever jobs arrive, the worker never ends up asleep while an
//! owner holds a job it could run, and every job runs once. The splitter
//! asks an owner for work, and tells it of a sleep, only when it may have
//! some; this checks that no wake-up is lost by it.

mod common;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use common::{Out as CoreOut, World};
use gearshift_core::split::{Out, Owner, Owners, Split};
use gearshift_core::CoreConfig;
use gearshift_proto::frame::encode_parts;
use gearshift_proto::{decode_frame, Frame, Magic, PacketType, Request, Response};
use proptest::prelude::*;

/// The worker's connection on each owner, and a client's.
const W: u64 = 1;
const C: u64 = 2;
/// A function per owner, and one more on owner 1; the last digit names it.
const FUNCTIONS: [&str; 4] = ["a0", "b1", "c2", "d1"];

struct Three;

impl Owners for Three {
    fn owner_of(&self, function: &[u8]) -> Option<Owner> {
        function.last().map(|&d| u32::from(d - b'0'))
    }
    fn all(&self) -> Vec<Owner> {
        vec![0, 1, 2]
    }
    fn local(&self) -> Owner {
        0
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A client of owner `o` submits a background job of `FUNCTIONS[f]`.
    Submit { f: usize },
    /// The link to owner `o` delivers what the splitter sent it.
    ToOwner(usize),
    /// Owner `o`'s replies reach the splitter.
    FromOwner(usize),
    /// The worker reads what the splitter sent it and answers.
    Worker,
    /// The worker finishes the job it holds (and asks for the next).
    Finish,
    /// Everything in flight is delivered and answered (the worker sleeps).
    Settle,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..FUNCTIONS.len()).prop_map(|f| Step::Submit { f }),
        (0..3usize).prop_map(Step::ToOwner),
        (0..3usize).prop_map(Step::FromOwner),
        Just(Step::Worker),
        Just(Step::Finish),
        Just(Step::Settle),
    ]
}

struct Model {
    owners: Vec<World>,
    split: Split,
    /// Splitter to owner, per owner, in order.
    links: Vec<VecDeque<Bytes>>,
    /// Splitter to worker.
    to_worker: BytesMut,
    sleeping: bool,
    held: Option<Bytes>,
    submitted: usize,
    ran: Vec<Bytes>,
}

fn packet(magic: Magic, kind: PacketType, parts: &[&[u8]]) -> BytesMut {
    let mut b = BytesMut::new();
    encode_parts(magic, kind, parts, &mut b);
    b
}

impl Model {
    fn new() -> Model {
        let owners = (0..3)
            .map(|o| {
                // Handles are unique across owners, as across nodes.
                let mut w = World::with(CoreConfig {
                    handle_prefix: format!("H:owner{o}"),
                    ..CoreConfig::default()
                });
                w.check = true;
                w.conns(&[W, C]);
                w
            })
            .collect();
        let mut m = Model {
            owners,
            split: Split::new(1 << 20),
            links: vec![VecDeque::new(); 3],
            to_worker: BytesMut::new(),
            sleeping: false,
            held: None,
            submitted: 0,
            ran: Vec::new(),
        };
        let mut hello = BytesMut::new();
        for f in FUNCTIONS {
            hello.extend_from_slice(&packet(Magic::Req, PacketType::CanDo, &[f.as_bytes()]));
        }
        hello.extend_from_slice(&packet(Magic::Req, PacketType::GrabJob, &[]));
        m.worker_sends(hello);
        m
    }

    fn route(&mut self, out: Vec<Out>) {
        for o in out {
            match o {
                Out::ToOwner(k, b) => self.links[k as usize].push_back(b),
                Out::ToClient(b) => self.to_worker.extend_from_slice(&b),
                Out::Close(why) => panic!("the worker's connection closed: {why}"),
            }
        }
    }

    fn worker_sends(&mut self, mut bytes: BytesMut) {
        let mut out = Vec::new();
        self.split.from_client(&mut bytes, &Three, &mut out);
        self.route(out);
    }

    fn apply(&mut self, s: &Step) {
        match *s {
            Step::Submit { f } => {
                let name = FUNCTIONS[f];
                let o = usize::from(name.as_bytes()[1] - b'0');
                let unique = format!("u{}", self.submitted);
                self.owners[o].bg(C, name, &unique, "x");
                self.owners[o].take(C);
                self.submitted += 1;
            }
            Step::ToOwner(o) => {
                while let Some(b) = self.links[o].pop_front() {
                    let mut buf = BytesMut::from(&b[..]);
                    while let Ok(Some(Frame::Packet(p))) = decode_frame(&mut buf, 1 << 20) {
                        let r = Request::from_packet(p).expect("the splitter sends requests");
                        self.owners[o].req(W, r);
                    }
                }
            }
            Step::FromOwner(o) => {
                let mut buf = BytesMut::new();
                for r in self.owners[o].take(W) {
                    match r {
                        CoreOut::Packet(p) => p.encode(&mut buf),
                        other => panic!("owner {o} sent {other:?}"),
                    }
                }
                let mut out = Vec::new();
                self.split
                    .from_owner(o as Owner, &mut buf, &Three, &mut out);
                self.route(out);
            }
            Step::Worker => {
                let mut replies = BytesMut::new();
                while let Ok(Some(Frame::Packet(p))) = decode_frame(&mut self.to_worker, 1 << 20) {
                    match Response::parse(&p).expect("the splitter sends responses") {
                        Response::NoJob => {
                            self.sleeping = true;
                            replies.extend_from_slice(&packet(
                                Magic::Req,
                                PacketType::PreSleep,
                                &[],
                            ));
                        }
                        Response::Noop if self.sleeping => {
                            self.sleeping = false;
                            replies.extend_from_slice(&packet(
                                Magic::Req,
                                PacketType::GrabJob,
                                &[],
                            ));
                        }
                        Response::Noop => {}
                        Response::JobAssign { handle, .. } => {
                            assert!(self.held.is_none(), "one job at a time");
                            self.held = Some(handle);
                        }
                        other => panic!("the worker got {other:?}"),
                    }
                }
                if !replies.is_empty() {
                    self.worker_sends(replies);
                }
            }
            Step::Settle => self.settle(),
            Step::Finish => {
                if let Some(h) = self.held.take() {
                    let mut b = packet(Magic::Req, PacketType::WorkComplete, &[&h, b""]);
                    b.extend_from_slice(&packet(Magic::Req, PacketType::GrabJob, &[]));
                    self.ran.push(h);
                    self.worker_sends(b);
                }
            }
        }
    }

    /// Runs links and worker until nothing moves.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let before = (
                self.ran.len(),
                self.links.iter().map(VecDeque::len).sum::<usize>(),
            );
            let busy = self.links.iter().any(|l| !l.is_empty())
                || !self.to_worker.is_empty()
                || self.held.is_some();
            for o in 0..3 {
                self.apply(&Step::ToOwner(o));
                self.apply(&Step::FromOwner(o));
            }
            self.apply(&Step::Worker);
            self.apply(&Step::Finish);
            let after = (
                self.ran.len(),
                self.links.iter().map(VecDeque::len).sum::<usize>(),
            );
            if !busy && before == after && self.to_worker.is_empty() {
                return;
            }
        }
        panic!("the links never settled");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_wake_up_is_lost(steps in proptest::collection::vec(step(), 1..120)) {
        let mut m = Model::new();
        for s in &steps {
            m.apply(s);
        }
        m.settle();
        let queued: Vec<String> = (0..3)
            .flat_map(|o| {
                let st = m.owners[o].admin(C, "status");
                st.lines()
                    .filter(|l| l.split('\t').nth(1).is_some_and(|q| q != "0"))
                    .map(|l| format!("owner {o}: {l}"))
                    .collect::<Vec<_>>()
            })
            .collect();
        prop_assert!(queued.is_empty(), "the worker sleeps while jobs wait: {queued:?}");
        prop_assert_eq!(m.ran.len(), m.submitted, "every job ran once");
        let mut handles: Vec<Bytes> = m.ran.clone();
        handles.sort();
        handles.dedup();
        prop_assert_eq!(handles.len(), m.ran.len(), "no job ran twice");
    }
}
