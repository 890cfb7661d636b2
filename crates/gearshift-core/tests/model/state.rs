//! The reference model: plain records of jobs and connections, updated by
//! the same rules the core follows, predicting each step's effects.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;
use gearshift_core::CoreConfig;
use gearshift_proto::{Priority, Request, Response, Submit};

use crate::checks::norm;
use crate::common::{b, Out, World};
use crate::ops::{Op, ADMIN, FUNCS, SLOTS, UNIQUES};

#[derive(Debug)]
pub(crate) struct MJob {
    pub(crate) handle: Bytes,
    pub(crate) func: usize,
    pub(crate) unique: &'static str,
    pub(crate) data: Bytes,
    pub(crate) prio: usize,
    pub(crate) bg: bool,
    pub(crate) clients: Vec<u64>,
    pub(crate) holder: Option<u64>,
    pub(crate) cancelled: bool,
    pub(crate) retries: u32,
    pub(crate) num: u32,
    pub(crate) den: u32,
    pub(crate) deadline: Option<u64>,
    /// An epoch job's due time (ms), if it was in the future at submission.
    pub(crate) due: Option<u64>,
    /// Waiting for its due time: in no queue, runnable only by early takers.
    pub(crate) scheduled: bool,
}

#[derive(Debug, Default)]
pub(crate) struct MConn {
    pub(crate) abilities: Vec<(usize, Option<u64>)>,
    pub(crate) sleeping: bool,
    pub(crate) noop_sent: bool,
    pub(crate) exceptions: bool,
    pub(crate) held: Vec<u64>,
    /// The handle of the job this worker's last packet was a WORK_EXCEPTION
    /// for: a WORK_FAIL for it next is the same failure (no answer).
    pub(crate) after_exception: Option<Bytes>,
    /// OPTION_REQ epoch-early: takes only epoch jobs not yet due.
    pub(crate) early: bool,
    /// The last valid OPTION_REQ `stats`: (CPU ms, RSS KiB).
    pub(crate) stats: Option<(u64, u64)>,
}

impl MConn {
    pub(crate) fn can(&self, func: usize) -> bool {
        self.abilities.iter().any(|a| a.0 == func)
    }
}

/// A submission's kind: plain, or an epoch job due `secs` seconds after
/// the current whole second.
pub(crate) enum Kind {
    Plain { prio: usize, bg: bool },
    Epoch { secs: i64 },
}

pub(crate) struct Model {
    pub(crate) w: World,
    pub(crate) exceptions_all: bool,
    pub(crate) job_retries: u32,
    pub(crate) next_id: u64,
    pub(crate) jobs: BTreeMap<u64, MJob>,
    pub(crate) conns: BTreeMap<u64, MConn>,
    pub(crate) slots: [u64; SLOTS],
    pub(crate) next_conn: u64,
    pub(crate) handles: Vec<Bytes>,
    /// Queued job ids per function and priority, in the order they run.
    pub(crate) queues: [[VecDeque<u64>; 3]; FUNCS.len()],
    /// Epoch jobs offered to each function's early takers, in order; ids
    /// of jobs since due, taken or gone stay until a grab skips them (the
    /// core keeps them too, and PRE_SLEEP counts them as work).
    pub(crate) offered: [VecDeque<u64>; FUNCS.len()],
    pub(crate) funcs_seen: Vec<usize>,
    pub(crate) expected: Vec<(u64, Out)>,
    /// Foreground submissions per (client, handle).
    pub(crate) subs: HashMap<(u64, Bytes), u32>,
    /// Terminal packets seen per (client, handle).
    pub(crate) terms: HashMap<(u64, Bytes), u32>,
}

pub(crate) fn id_of(h: &Bytes) -> u64 {
    let s = std::str::from_utf8(h).expect("utf8 handle");
    s.rsplit(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl Model {
    pub(crate) fn new(job_retries: u32, exceptions: bool, durable: bool) -> Model {
        let mut w = World::with(CoreConfig {
            job_retries,
            exceptions,
            durable,
            ..CoreConfig::default()
        });
        w.conn(ADMIN);
        w.check = true;
        w.auto_persist = durable;
        // Events never reach a connection: the predictions hold with them on.
        w.core.set_lifecycle_events(durable);
        let mut m = Model {
            w,
            exceptions_all: exceptions,
            job_retries,
            next_id: 1,
            jobs: BTreeMap::new(),
            conns: BTreeMap::new(),
            slots: [0; SLOTS],
            next_conn: 1,
            handles: Vec::new(),
            queues: Default::default(),
            offered: Default::default(),
            funcs_seen: Vec::new(),
            expected: Vec::new(),
            subs: HashMap::new(),
            terms: HashMap::new(),
        };
        for s in 0..SLOTS {
            m.open(s);
        }
        m
    }

    pub(crate) fn open(&mut self, slot: usize) {
        let id = self.next_conn;
        self.next_conn += 1;
        self.slots[slot] = id;
        self.conns.insert(id, MConn::default());
        self.w.conn(id);
    }

    pub(crate) fn send(&mut self, c: u64, r: Response) {
        self.expected.push((c, Out::Packet(r)));
    }

    pub(crate) fn see_func(&mut self, f: usize) {
        if !self.funcs_seen.contains(&f) {
            self.funcs_seen.push(f);
        }
    }

    /// Every packet a connection sends first clears its NOOP-sent flag.
    pub(crate) fn touch(&mut self, c: u64) {
        if let Some(conn) = self.conns.get_mut(&c) {
            conn.noop_sent = false;
            conn.after_exception = None;
        }
    }

    pub(crate) fn wake(&mut self, func: usize) {
        let woken: Vec<u64> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| c.sleeping && !c.noop_sent && c.can(func) && !c.early)
            .map(|(&id, c)| {
                c.noop_sent = true;
                id
            })
            .collect();
        for c in woken {
            self.send(c, Response::Noop);
        }
    }

    pub(crate) fn remove(&mut self, id: u64) -> MJob {
        let job = self.jobs.remove(&id).expect("live job");
        self.queues[job.func][job.prio].retain(|&j| j != id);
        if let Some(h) = job.holder {
            if let Some(c) = self.conns.get_mut(&h) {
                c.held.retain(|&j| j != id);
            }
        }
        job
    }

    pub(crate) fn requeue(&mut self, id: u64) {
        let job = self.jobs.get_mut(&id).expect("live job");
        if job.cancelled {
            self.remove(id);
            return;
        }
        job.retries += 1;
        if self.job_retries > 0 && job.retries >= self.job_retries {
            let job = self.remove(id);
            for c in job.clients {
                self.send(c, Response::WorkFail(job.handle.clone()));
            }
            return;
        }
        if !job.bg && job.clients.is_empty() {
            self.remove(id);
            return;
        }
        self.remove_holder(id);
        self.back_in_line(id);
    }

    pub(crate) fn remove_holder(&mut self, id: u64) {
        let job = self.jobs.get_mut(&id).expect("live job");
        let holder = job.holder.take();
        job.num = 0;
        job.den = 0;
        job.deadline = None;
        if let Some(c) = holder.and_then(|h| self.conns.get_mut(&h)) {
            c.held.retain(|&j| j != id);
        }
    }

    pub(crate) fn pick(&self, pick: usize) -> Bytes {
        if self.handles.is_empty() {
            b("H:localhost:1")
        } else {
            self.handles[pick % self.handles.len()].clone()
        }
    }

    pub(crate) fn step(&mut self, op: &Op) {
        self.expected.clear();
        match *op {
            Op::Submit {
                slot,
                func,
                unique,
                data,
                prio,
                bg,
            } => self.submit(slot, func, unique, data, Kind::Plain { prio, bg }),
            Op::CanDo {
                slot,
                func,
                timeout,
            } => {
                let c = self.slots[slot];
                self.touch(c);
                self.see_func(func);
                let conn = self.conns.get_mut(&c).expect("conn");
                let new = !conn.can(func);
                let early = conn.early;
                conn.abilities.retain(|a| a.0 != func);
                conn.abilities.insert(
                    0,
                    (
                        func,
                        timeout.map(|t| if t < 1000 { t * 1000 } else { t }.max(1000)),
                    ),
                );
                if new && early {
                    self.early_taker_joined(func);
                }
                match timeout {
                    Some(t) => self.w.can_do_timeout(c, FUNCS[func], &t.to_string()),
                    None => self.w.can_do(c, &[FUNCS[func]]),
                }
            }
            Op::CantDo { slot, func } => {
                let c = self.slots[slot];
                self.touch(c);
                self.drop_abilities(c, |f| f == func);
                self.w.req(c, Request::CantDo(b(FUNCS[func])));
            }
            Op::Reset { slot } => {
                let c = self.slots[slot];
                self.touch(c);
                self.drop_abilities(c, |_| true);
                self.w.req(c, Request::ResetAbilities);
            }
            Op::Sleep { slot } => {
                let c = self.slots[slot];
                self.touch(c);
                let conn = &self.conns[&c];
                // An early taker counts only offered epoch jobs as work.
                let ready = conn.abilities.iter().any(|&(f, _)| match conn.early {
                    true => !self.offered[f].is_empty(),
                    false => self.queues[f].iter().any(|q| !q.is_empty()),
                });
                let conn = self.conns.get_mut(&c).expect("conn");
                conn.sleeping = true;
                conn.noop_sent = ready;
                if ready {
                    self.send(c, Response::Noop);
                }
                self.w.sleep(c);
            }
            Op::Grab { slot, kind } => return self.grab(slot, kind),
            Op::Work {
                slot,
                what,
                pick,
                own,
            } => self.work(slot, what, pick, own),
            Op::GetStatus { slot, pick } => {
                let c = self.slots[slot];
                self.touch(c);
                let h = self.pick(pick);
                let r = match self.jobs.get(&id_of(&h)).filter(|j| j.handle == h) {
                    Some(j) => (true, j.holder.is_some(), j.num, j.den),
                    None => (false, false, 0, 0),
                };
                self.send(
                    c,
                    Response::StatusRes {
                        handle: h.clone(),
                        known: r.0,
                        running: r.1,
                        numerator: r.2,
                        denominator: r.3,
                    },
                );
                self.w.req(c, Request::GetStatus(h));
            }
            Op::Exceptions { slot } => {
                let c = self.slots[slot];
                self.touch(c);
                self.conns.get_mut(&c).expect("conn").exceptions = true;
                self.send(c, Response::OptionRes(b("exceptions")));
                self.w.req(c, Request::Option(b("exceptions")));
            }
            Op::Cancel { pick } => {
                let h = self.pick(pick);
                let id = id_of(&h);
                let reply = if let Some(job) = self.jobs.get_mut(&id) {
                    let clients = std::mem::take(&mut job.clients);
                    let running = job.holder.is_some();
                    job.cancelled |= running;
                    for c in clients {
                        self.send(c, Response::WorkFail(h.clone()));
                    }
                    if !running {
                        self.remove(id);
                    }
                    "OK\r\n"
                } else {
                    "ERR UNKNOWN_JOB\r\n"
                };
                let line = format!("cancel job {}", String::from_utf8_lossy(&h));
                assert_eq!(self.w.admin(ADMIN, &line), reply);
            }
            Op::Disconnect { slot } => {
                let c = self.slots[slot];
                let conn = self.conns.remove(&c).expect("conn");
                self.prune_offers();
                for id in conn.held {
                    self.requeue(id);
                }
                let waiting: Vec<u64> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.clients.contains(&c))
                    .map(|(&id, _)| id)
                    .collect();
                for id in waiting {
                    let job = self.jobs.get_mut(&id).expect("job");
                    job.clients.retain(|&x| x != c);
                    if job.clients.is_empty() && !job.bg && job.holder.is_none() {
                        self.remove(id);
                    }
                }
                self.w.disconnect(c);
                self.open(slot);
            }
            Op::Advance { ms } => self.advance(ms),
            Op::Epoch {
                slot,
                func,
                unique,
                data,
                secs,
            } => self.submit(slot, func, unique, data, Kind::Epoch { secs }),
            Op::EpochEarly { slot } => self.epoch_early(slot),
            Op::Stats { slot, pick } => self.stats(slot, pick),
        }
        let actual = self.w.take_all();
        self.tally(&actual);
        assert_eq!(norm(&actual), norm(&self.expected), "after {op:?}");
    }

    pub(crate) fn submit(&mut self, slot: usize, func: usize, unique: usize, data: u8, kind: Kind) {
        let (prio, bg, epoch) = match kind {
            Kind::Plain { prio, bg } => (prio, bg, None),
            // As on the wire: background, normal priority.
            Kind::Epoch { secs } => (1, true, Some(secs)),
        };
        let c = self.slots[slot];
        self.touch(c);
        self.see_func(func);
        let unique = UNIQUES[unique];
        let data = Bytes::from(format!("d{data}"));
        // An epoch job is due `secs` after the current whole second.
        let secs = epoch.map(|s| (self.w.now / 1000) as i64 + s);
        let dup = self
            .jobs
            .iter()
            .find(|(_, j)| {
                !j.cancelled
                    && j.func == func
                    && match unique {
                        "" => false,
                        "-" => j.unique == "-" && j.data == data,
                        u => j.unique == u,
                    }
            })
            .map(|(&id, _)| id);
        let handle = match dup {
            Some(id) => {
                let job = self.jobs.get_mut(&id).expect("job");
                if bg {
                    job.bg = true;
                } else {
                    job.clients.push(c);
                }
                job.handle.clone()
            }
            None => {
                let id = self.next_id;
                self.next_id += 1;
                let handle = World::h(id);
                self.handles.push(handle.clone());
                self.jobs.insert(
                    id,
                    MJob {
                        handle: handle.clone(),
                        func,
                        unique,
                        data: data.clone(),
                        prio,
                        bg,
                        clients: if bg { vec![] } else { vec![c] },
                        holder: None,
                        cancelled: false,
                        retries: 0,
                        num: 0,
                        den: 0,
                        deadline: None,
                        due: None,
                        scheduled: false,
                    },
                );
                // A due time not in the future makes an ordinary queued job.
                let due = secs.map(|s| s.max(0) as u64 * 1000);
                self.place(id, due.filter(|&d| d > self.w.now));
                handle
            }
        };
        self.send(c, Response::JobCreated(handle.clone()));
        if !bg {
            *self.subs.entry((c, handle)).or_default() += 1;
        }
        let s = Submit {
            function: b(FUNCS[func]),
            unique: b(unique),
            data,
            priority: Priority::ALL[prio],
            background: bg,
            epoch: secs,
            reducer: None,
        };
        self.w.req(c, Request::submit(Box::new(s)));
    }

    pub(crate) fn drop_abilities(&mut self, c: u64, which: impl Fn(usize) -> bool) {
        let conn = self.conns.get_mut(&c).expect("conn");
        let dropped: Vec<usize> = conn
            .abilities
            .iter()
            .map(|a| a.0)
            .filter(|&f| which(f))
            .collect();
        conn.abilities.retain(|a| !which(a.0));
        let held = conn.held.clone();
        self.prune_offers();
        for id in held {
            if dropped.contains(&self.jobs[&id].func) {
                self.requeue(id);
            }
        }
    }
}
