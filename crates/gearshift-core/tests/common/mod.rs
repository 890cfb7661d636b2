//! A small harness for scenario tests on virtual time: a [`World`] wraps a
//! `Core`, opens numbered connections, sends requests and admin lines, and
//! files every effect under the connection it concerns so a test can pop
//! and assert them one connection at a time.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};

use bytes::{Bytes, BytesMut};
use gearshift_core::{
    ConnId, ConnInfo, Core, CoreConfig, Effect, Input, JobRecord, Rights, StoreOp,
};
use gearshift_proto::{
    decode_frame, parse_admin, Frame, GrabKind, Priority, Request, Response, Submit,
};

pub mod durable;
pub mod policy;

/// Connection numbers from here up are the harness's own admin probes.
pub const PROBE_BASE: u64 = 1_000_000;

/// Bytes from a string literal.
pub fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// An ERROR response.
pub fn err(code: &'static str, text: &'static str) -> Response {
    Response::error(code, text)
}

/// A plain (normal, foreground) submission.
pub fn job(function: &str, unique: &str, data: &str) -> Submit {
    Submit {
        function: b(function),
        unique: b(unique),
        data: b(data),
        priority: Priority::Normal,
        background: false,
        epoch: None,
        reducer: None,
    }
}

/// A submission with the given priority and background flag.
pub fn job_with(function: &str, unique: &str, data: &str, p: Priority, bg: bool) -> Submit {
    Submit {
        priority: p,
        background: bg,
        ..job(function, unique, data)
    }
}

/// An epoch (scheduled, background) submission due at `secs`.
pub fn epoch_job(function: &str, unique: &str, data: &str, secs: i64) -> Submit {
    Submit {
        background: true,
        epoch: Some(secs),
        ..job(function, unique, data)
    }
}

/// What happened to one connection, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Packet(Response),
    Text(Bytes),
    Close,
}

/// A core plus a clock plus per-connection outboxes.
pub struct World {
    pub core: Core,
    pub now: u64,
    outbox: BTreeMap<u64, VecDeque<Out>>,
    pub shutdowns: Vec<bool>,
    /// Store operations the core emitted, in order.
    pub store_ops: Vec<StoreOp>,
    /// Lifecycle events the core emitted, in order.
    pub events: Vec<gearshift_core::events::LiveEvent>,
    next_probe: u64,
    /// Plain submissions sent so far: every other one goes through the
    /// packet path the server takes (read in place, [`Request::from_packet`]), the rest as
    /// parsed requests, so every scenario holds both to the same answers.
    plain_submits: u64,
    /// Check the core's invariants after every step (costs a pass over
    /// every job, so off for the deep-queue scenarios).
    pub check: bool,
    /// Play a durable store that confirms every write at once, within the
    /// same step (the model test's durable mode).
    pub auto_persist: bool,
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

impl World {
    /// A world with the default configuration (prefix `H:localhost`).
    pub fn new() -> Self {
        World::with(CoreConfig::default())
    }

    /// A world with a given configuration.
    pub fn with(cfg: CoreConfig) -> Self {
        World {
            core: Core::new(cfg),
            now: 0,
            outbox: BTreeMap::new(),
            shutdowns: Vec::new(),
            store_ops: Vec::new(),
            events: Vec::new(),
            next_probe: PROBE_BASE,
            plain_submits: 0,
            check: false,
            auto_persist: false,
        }
    }

    /// A world whose core is backed by a durable store (`durable: true`);
    /// the test plays the store with [`World::persisted`] and friends.
    pub fn durable() -> Self {
        World::with(CoreConfig {
            durable: true,
            ..CoreConfig::default()
        })
    }

    /// The store confirms these jobs durable.
    pub fn persisted(&mut self, ids: &[u64]) {
        self.core.persisted(ids, self.now);
        self.collect();
    }

    /// The store failed to record these jobs.
    pub fn persist_failed(&mut self, ids: &[u64], reason: &str) {
        self.core.persist_failed(ids, reason);
        self.collect();
    }

    /// Rebuilds stored jobs, as after a restart.
    pub fn restore(&mut self, jobs: Vec<JobRecord>, next_id: u64) {
        self.core.restore(jobs, next_id, self.now);
        self.collect();
    }

    /// The store operations emitted since the last call, emptied.
    pub fn take_store_ops(&mut self) -> Vec<StoreOp> {
        std::mem::take(&mut self.store_ops)
    }

    /// The handle the default prefix gives job `n`.
    pub fn h(n: u64) -> Bytes {
        Bytes::from(format!("H:localhost:{n}"))
    }

    /// Opens connection `n` from loopback.
    pub fn conn(&mut self, n: u64) {
        self.conn_from(n, "127.0.0.1", true);
    }

    /// Opens connection `n` from a given address.
    pub fn conn_from(&mut self, n: u64, ip: &str, loopback: bool) {
        let info = ConnInfo {
            fd: n as i64,
            ip: ip.to_owned(),
            port: 0,
            loopback,
            rights: if loopback {
                Rights::ALL
            } else {
                Rights::NO_CHANGES
            },
            node: None,
            identity: None,
        };
        self.core.connect(ConnId(n), info);
    }

    /// Opens several loopback connections.
    pub fn conns(&mut self, ns: &[u64]) {
        for &n in ns {
            self.conn(n);
        }
    }

    /// Closes connection `n`.
    pub fn disconnect(&mut self, n: u64) {
        self.core.disconnect(ConnId(n), self.now);
        self.collect();
    }

    /// Moves the clock to `t` and fires what is due.
    pub fn advance_to(&mut self, t: u64) {
        assert!(t >= self.now, "time goes forward");
        self.now = t;
        self.core.on_timeout(t);
        self.collect();
    }

    /// Sends a request from connection `n`.
    pub fn req(&mut self, n: u64, r: Request) {
        if let Request::Submit(s) = &r {
            if s.epoch().is_none() && s.reducer().is_none() {
                self.plain_submits += 1;
                if self.plain_submits.is_multiple_of(2) {
                    let mut wire = BytesMut::new();
                    r.encode(&mut wire);
                    let Ok(Some(Frame::Packet(p))) = decode_frame(&mut wire, usize::MAX) else {
                        panic!("a submission encodes to one packet");
                    };
                    let Ok(r) = Request::from_packet(p) else {
                        panic!("a plain submission parses");
                    };
                    self.core.handle(ConnId(n), Input::Request(r), self.now);
                    self.collect();
                    return;
                }
            }
        }
        self.core.handle(ConnId(n), Input::Request(r), self.now);
        self.collect();
    }

    /// Sends an admin line from connection `n` and returns the text reply
    /// (empty if none).
    pub fn admin(&mut self, n: u64, line: &str) -> String {
        self.core.handle(
            ConnId(n),
            Input::Admin(Box::new(parse_admin(line.as_bytes()))),
            self.now,
        );
        self.collect();
        let mut text = String::new();
        let q = self.outbox.entry(n).or_default();
        while let Some(pos) = q.iter().position(|o| matches!(o, Out::Text(_))) {
            if let Some(Out::Text(t)) = q.remove(pos) {
                text.push_str(&String::from_utf8_lossy(&t));
            }
        }
        text
    }

    pub fn collect(&mut self) {
        let first = self.store_ops.len();
        self.collect_once();
        if self.auto_persist {
            let mut from = first;
            while from < self.store_ops.len() {
                let ids: Vec<u64> = self.store_ops[from..]
                    .iter()
                    .filter_map(|op| match op {
                        StoreOp::Add(j) => Some(j.id),
                        StoreOp::Schedule(s) => Some(s.id),
                        _ => None,
                    })
                    .collect();
                from = self.store_ops.len();
                if !ids.is_empty() {
                    self.core.persisted(&ids, self.now);
                    self.collect_once();
                }
            }
        }
    }

    fn collect_once(&mut self) {
        if self.check {
            if let Err(e) = self.core.check_invariants() {
                panic!("invariant broken: {e}");
            }
        }
        for e in self.core.take_effects() {
            match e {
                Effect::Send(c, r) => self
                    .outbox
                    .entry(c.0)
                    .or_default()
                    .push_back(Out::Packet(r)),
                Effect::Created(c, id) => {
                    let r = self.core.job_created(id);
                    self.outbox
                        .entry(c.0)
                        .or_default()
                        .push_back(Out::Packet(r));
                }
                Effect::Text(c, t) => self.outbox.entry(c.0).or_default().push_back(Out::Text(t)),
                Effect::Listing(c, l) => self
                    .outbox
                    .entry(c.0)
                    .or_default()
                    .push_back(Out::Text(l.render().into())),
                Effect::Close(c) => self.outbox.entry(c.0).or_default().push_back(Out::Close),
                Effect::Shutdown { graceful } => self.shutdowns.push(graceful),
                Effect::Store(op) => self.store_ops.push(op),
                Effect::Event(e) => self.events.push(*e),
            }
        }
    }

    // ---- popping and asserting -------------------------------------------

    /// Everything queued for connection `n`, emptied.
    pub fn take(&mut self, n: u64) -> Vec<Out> {
        self.outbox.entry(n).or_default().drain(..).collect()
    }

    /// Everything queued for every connection, emptied, as (conn, effect).
    pub fn take_all(&mut self) -> Vec<(u64, Out)> {
        let mut all = Vec::new();
        for (&c, q) in self.outbox.iter_mut() {
            all.extend(q.drain(..).map(|o| (c, o)));
        }
        all
    }

    /// The packets queued for connection `n`, emptied (panics on text).
    pub fn packets(&mut self, n: u64) -> Vec<Response> {
        self.take(n)
            .into_iter()
            .map(|o| match o {
                Out::Packet(r) => r,
                other => panic!("conn {n}: expected a packet, got {other:?}"),
            })
            .collect()
    }

    /// The next packet for connection `n`; panics if there is none.
    pub fn pop(&mut self, n: u64) -> Response {
        match self.outbox.entry(n).or_default().pop_front() {
            Some(Out::Packet(r)) => r,
            other => panic!("conn {n}: expected a packet, got {other:?}"),
        }
    }

    /// Asserts the next packet for `n` is `r`.
    pub fn expect(&mut self, n: u64, r: Response) {
        assert_eq!(self.pop(n), r, "conn {n}");
    }

    /// Asserts nothing is queued for connection `n`.
    pub fn quiet(&mut self, n: u64) {
        let q = self.take(n);
        assert!(q.is_empty(), "conn {n}: expected nothing, got {q:?}");
    }

    /// Asserts nothing is queued for any connection.
    pub fn all_quiet(&mut self) {
        let left: Vec<_> = self.outbox.iter().filter(|(_, q)| !q.is_empty()).collect();
        assert!(left.is_empty(), "unexpected effects: {left:?}");
    }

    /// Clears every outbox.
    pub fn clear(&mut self) {
        self.outbox.clear();
    }

    // ---- common conversations ----------------------------------------------

    /// Submits from `n` and returns the handle from JOB_CREATED.
    pub fn submit(&mut self, n: u64, s: Submit) -> Bytes {
        self.req(n, Request::submit(Box::new(s)));
        match self.pop(n) {
            Response::JobCreated(h) => h,
            other => panic!("conn {n}: expected JOB_CREATED, got {other:?}"),
        }
    }

    /// Submits a normal foreground job and returns its handle.
    pub fn fg(&mut self, n: u64, function: &str, unique: &str, data: &str) -> Bytes {
        self.submit(n, job(function, unique, data))
    }

    /// Submits a normal background job and returns its handle.
    pub fn bg(&mut self, n: u64, function: &str, unique: &str, data: &str) -> Bytes {
        self.submit(n, job_with(function, unique, data, Priority::Normal, true))
    }

    /// CAN_DO for each function.
    pub fn can_do(&mut self, n: u64, functions: &[&str]) {
        for f in functions {
            self.req(n, Request::CanDo(b(f)));
        }
    }

    /// CAN_DO_TIMEOUT.
    pub fn can_do_timeout(&mut self, n: u64, function: &str, ms: &str) {
        self.req(
            n,
            Request::CanDoTimeout {
                function: b(function),
                timeout: b(ms),
            },
        );
    }

    /// Sends GRAB_JOB and returns the reply.
    pub fn grab(&mut self, n: u64) -> Response {
        self.grab_kind(n, GrabKind::Plain)
    }

    /// Sends a grab of the given kind and returns the reply.
    pub fn grab_kind(&mut self, n: u64, kind: GrabKind) -> Response {
        self.req(n, Request::Grab(kind));
        self.pop(n)
    }

    /// Grabs and returns (handle, data) of the assigned job; panics on NO_JOB.
    pub fn grab_job(&mut self, n: u64) -> (Bytes, Bytes) {
        match self.grab(n) {
            Response::JobAssign { handle, data, .. } => (handle, data),
            other => panic!("conn {n}: expected JOB_ASSIGN, got {other:?}"),
        }
    }

    /// Grabs, expecting NO_JOB.
    pub fn grab_none(&mut self, n: u64) {
        assert_eq!(self.grab(n), Response::NoJob, "conn {n}");
    }

    /// Grabs and returns only the workload of the assigned job.
    pub fn grab_data(&mut self, n: u64) -> String {
        String::from_utf8_lossy(&self.grab_job(n).1).into_owned()
    }

    /// PRE_SLEEP.
    pub fn sleep(&mut self, n: u64) {
        self.req(n, Request::PreSleep);
    }

    /// WORK_COMPLETE.
    pub fn complete(&mut self, n: u64, handle: &Bytes, data: &str) {
        self.req(
            n,
            Request::WorkComplete {
                handle: handle.clone(),
                data: b(data),
            },
        );
    }

    /// WORK_FAIL.
    pub fn fail(&mut self, n: u64, handle: &Bytes) {
        self.req(
            n,
            Request::WorkFail {
                handle: handle.clone(),
            },
        );
    }

    /// Runs an admin line on a fresh, short-lived connection (so it does not
    /// disturb the connections under test) and returns the reply.
    pub fn probe(&mut self, line: &str) -> String {
        let n = self.next_probe;
        self.next_probe += 1;
        self.conn(n);
        let text = self.admin(n, line);
        self.disconnect(n);
        self.outbox.remove(&n);
        text
    }

    /// The lines of `status` split on tabs, without the `.` terminator.
    pub fn status(&mut self) -> Vec<Vec<String>> {
        table(&self.probe("status"))
    }

    /// The `status` row for one function as (total, running, workers).
    pub fn status_of(&mut self, function: &str) -> Option<(u32, u32, u32)> {
        self.status()
            .into_iter()
            .find(|r| r[0] == function)
            .map(|r| {
                (
                    r[1].parse().expect("total"),
                    r[2].parse().expect("running"),
                    r[3].parse().expect("workers"),
                )
            })
    }

    /// `show jobs` rows: handle, retries, ignore, queued.
    pub fn show_jobs(&mut self) -> Vec<Vec<String>> {
        table(&self.probe("show jobs"))
    }

    /// The retries count of one job from `show jobs`.
    pub fn retries_of(&mut self, handle: &Bytes) -> Option<u32> {
        let h = String::from_utf8_lossy(handle).into_owned();
        self.show_jobs()
            .into_iter()
            .find(|r| r[0] == h)
            .map(|r| r[1].parse().expect("retries"))
    }
}

/// Splits a `.`-terminated admin list into tab-separated rows.
pub fn table(text: &str) -> Vec<Vec<String>> {
    assert!(text.ends_with(".\n"), "list not terminated: {text:?}");
    text[..text.len() - 2]
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}
