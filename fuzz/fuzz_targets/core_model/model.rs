//! The reference model of the routing core: the state every job and
//! connection should be in, updated beside the real `Core` on each `Op`.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use gearshift_core::policy::{can_do_timeout_ms, TimeoutUnit};
use gearshift_core::{ConnId, ConnInfo, Core, CoreConfig, Effect, Input};
use gearshift_proto::{GrabKind, Priority, Request, Response, Submit};

use crate::{Op, Work};

mod checks;
mod early;
mod work;

const SLOTS: usize = 4;
const FUNCS: [&str; 3] = ["a", "b", "c"];
const UNIQUES: [&str; 3] = ["u0", "u1", "u2"];
/// The connection the model asks GET_STATUS from after every step.
const OBSERVER: u64 = 1_000_000;
const PREFIX: &str = "H:fuzz";
/// The clock starts here (Unix ms); epoch submissions are around it.
const START: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Queued,
    Scheduled(u64),
    Running { worker: u64, deadline: Option<u64> },
    Done,
}

#[derive(Debug)]
struct MJob {
    func: usize,
    prio: usize,
    unique: Option<usize>,
    data: Bytes,
    bg: bool,
    state: St,
    /// Foreground submitters attached, once per submission.
    clients: Vec<u64>,
    retries: u32,
    /// An epoch job's due time, if it was in the future at submission.
    due: Option<u64>,
}

#[derive(Debug, Default)]
struct MConn {
    id: u64,
    /// Newest first, with the CAN_DO_TIMEOUT limit in ms.
    abilities: Vec<(usize, Option<u64>)>,
    exceptions: bool,
    after_exception: Option<u64>,
    /// OPTION_REQ epoch-early.
    early: bool,
    /// The last valid OPTION_REQ stats: (CPU ms, RSS KiB).
    stats: Option<(u64, u64)>,
}

pub(crate) struct Model {
    core: Core,
    now: u64,
    job_retries: u32,
    exceptions_all: bool,
    jobs: BTreeMap<u64, MJob>,
    /// Queued job ids per function and priority, in the order they run.
    queues: [[VecDeque<u64>; 3]; FUNCS.len()],
    slots: [MConn; SLOTS],
    /// Epoch jobs offered to each function's early takers, in order (with
    /// the ids of those since taken, due or gone, as the core keeps them).
    offered: [VecDeque<u64>; FUNCS.len()],
    next_conn: u64,
    /// Terminal packets the current step must produce: (client, job).
    expect_terminal: Vec<(u64, u64)>,
}

fn handle(id: u64) -> Bytes {
    Bytes::from(format!("{PREFIX}:{id}"))
}

fn id_of(h: &[u8]) -> u64 {
    std::str::from_utf8(h)
        .ok()
        .and_then(|s| s.strip_prefix(PREFIX))
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a handle of this core: {h:?}"))
}

fn info(fd: u64) -> ConnInfo {
    ConnInfo {
        fd: fd as i64,
        ip: "127.0.0.1".into(),
        port: 0,
        loopback: true,
        rights: gearshift_core::Rights::ALL,
        node: None,
        identity: None,
    }
}

impl Model {
    pub(crate) fn new(job_retries: u32, exceptions: bool) -> Model {
        let cfg = CoreConfig {
            handle_prefix: PREFIX.into(),
            job_retries,
            exceptions,
            ..CoreConfig::default()
        };
        let mut core = Core::new(cfg);
        core.set_now(START);
        core.connect(ConnId(OBSERVER), info(OBSERVER));
        let mut m = Model {
            core,
            now: START,
            job_retries,
            exceptions_all: exceptions,
            jobs: BTreeMap::new(),
            queues: Default::default(),
            slots: Default::default(),
            offered: Default::default(),
            next_conn: 1,
            expect_terminal: Vec::new(),
        };
        for s in 0..SLOTS {
            m.open(s);
        }
        m
    }

    fn open(&mut self, slot: usize) {
        let id = self.next_conn;
        self.next_conn += 1;
        self.slots[slot] = MConn {
            id,
            ..MConn::default()
        };
        self.core.connect(ConnId(id), info(id));
    }

    fn send(&mut self, conn: u64, req: Request) -> Vec<Effect> {
        self.core
            .handle(ConnId(conn), Input::Request(req), self.now);
        self.core.take_effects()
    }

    fn queue_of(&mut self, id: u64) -> &mut VecDeque<u64> {
        let j = &self.jobs[&id];
        let (f, p) = (j.func, j.prio);
        &mut self.queues[f][p]
    }

    fn unqueue(&mut self, id: u64) {
        self.queue_of(id).retain(|&j| j != id);
    }

    /// PRE_SLEEP finds work: queued jobs of its functions, or for an
    /// early taker offers (stale ones included, as the core counts them).
    fn ready_for(&self, conn: &MConn) -> bool {
        conn.abilities.iter().any(|&(f, _)| match conn.early {
            true => !self.offered[f].is_empty(),
            false => self.queues[f].iter().any(|q| !q.is_empty()),
        })
    }

    /// A job ends and tells each waiting client once.
    fn finish_told(&mut self, id: u64) {
        let job = self.jobs.get_mut(&id).expect("live job");
        job.state = St::Done;
        for &c in &job.clients {
            self.expect_terminal.push((c, id));
        }
        job.clients.clear();
    }

    /// A held job goes back to its queue (gearmand's requeue).
    fn requeue(&mut self, id: u64) {
        let limit = self.job_retries;
        let job = self.jobs.get_mut(&id).expect("live job");
        assert!(matches!(job.state, St::Running { .. }));
        job.retries += 1;
        if limit > 0 && job.retries >= limit {
            self.finish_told(id);
        } else if !job.bg && job.clients.is_empty() {
            job.state = St::Done;
        } else if let Some(due) = job.due.filter(|&d| d > self.now) {
            job.state = St::Scheduled(due);
            self.offer_early(id);
        } else {
            job.state = St::Queued;
            let q = self.queue_of(id);
            let at = q.iter().position(|&j| j > id).unwrap_or(q.len());
            q.insert(at, id);
        }
    }

    fn held_by(&self, conn: u64) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|(_, j)| matches!(j.state, St::Running { worker, .. } if worker == conn))
            .map(|(&id, _)| id)
            .collect()
    }

    pub(crate) fn step(&mut self, op: &Op) {
        self.expect_terminal.clear();
        let slot = |s: &u8| usize::from(*s) % SLOTS;
        let effects = match op {
            Op::Submit {
                slot: s,
                func,
                unique,
                prio,
                bg,
                epoch,
            } => self.submit(
                slot(s),
                usize::from(*func) % FUNCS.len(),
                unique.map(|u| usize::from(u) % UNIQUES.len()),
                usize::from(*prio) % 3,
                *bg,
                *epoch,
            ),
            Op::CanDo {
                slot: s,
                func,
                timeout,
            } => {
                let s = slot(s);
                let f = usize::from(*func) % FUNCS.len();
                let name = Bytes::from_static(FUNCS[f].as_bytes());
                let (req, ms) = match timeout {
                    Some(t) => (
                        Request::CanDoTimeout {
                            function: name,
                            timeout: Bytes::from(t.to_string()),
                        },
                        can_do_timeout_ms(i64::from(*t), TimeoutUnit::Auto),
                    ),
                    None => (Request::CanDo(name), None),
                };
                let conn = &mut self.slots[s];
                conn.after_exception = None;
                let new = !conn.abilities.iter().any(|a| a.0 == f);
                conn.abilities.retain(|a| a.0 != f);
                conn.abilities.insert(0, (f, ms));
                let id = conn.id;
                if new && conn.early {
                    self.early_taker_joined(f);
                }
                let effects = self.send(id, req);
                only_noops(&effects);
                effects
            }
            Op::CantDo { slot: s, func } => {
                let f = usize::from(*func) % FUNCS.len();
                self.drop_abilities(
                    slot(s),
                    Request::CantDo(Bytes::from_static(FUNCS[f].as_bytes())),
                    Some(f),
                )
            }
            Op::Reset { slot: s } => self.drop_abilities(slot(s), Request::ResetAbilities, None),
            Op::PreSleep { slot: s } => {
                let conn = &mut self.slots[slot(s)];
                conn.after_exception = None;
                let id = conn.id;
                let ready = self.ready_for(&self.slots[slot(s)]);
                let effects = self.send(id, Request::PreSleep);
                let noop = effects == [Effect::Send(ConnId(id), Response::Noop)];
                assert!(
                    noop == ready && (ready || effects.is_empty()),
                    "{effects:?}"
                );
                effects
            }
            Op::Grab { slot: s, kind } => self.grab(slot(s), *kind),
            Op::Work {
                slot: s,
                what,
                pick,
                own,
            } => self.work(slot(s), *what, *pick, *own),
            Op::GetStatus { slot: s, pick } => {
                let conn = &mut self.slots[slot(s)];
                conn.after_exception = None;
                let id = conn.id;
                let job = self.pick_any(*pick);
                let effects = self.send(id, Request::GetStatus(handle(job)));
                assert_eq!(effects.len(), 1, "{effects:?}");
                self.check_status(&effects[0], job);
                effects
            }
            Op::Exceptions { slot: s } => {
                let conn = &mut self.slots[slot(s)];
                conn.after_exception = None;
                conn.exceptions = true;
                let id = conn.id;
                let name = Bytes::from_static(b"exceptions");
                let effects = self.send(id, Request::Option(name.clone()));
                assert_eq!(
                    effects,
                    [Effect::Send(ConnId(id), Response::OptionRes(name))]
                );
                effects
            }
            Op::Disconnect { slot: s } => self.disconnect(slot(s)),
            Op::EpochEarly { slot: s } => self.epoch_early(slot(s)),
            Op::Stats {
                slot: s,
                cpu_ms,
                rss,
                malformed,
            } => self.stats(slot(s), *cpu_ms, *rss, *malformed),
            Op::Advance { ms, fire } => {
                self.now += u64::from(*ms);
                self.core.set_now(self.now);
                if *fire {
                    self.fire_timers()
                } else {
                    Vec::new()
                }
            }
        };
        self.check_terminals(&effects);
        self.check_core();
    }

    fn submit(
        &mut self,
        s: usize,
        func: usize,
        unique: Option<usize>,
        prio: usize,
        bg: bool,
        epoch: Option<u8>,
    ) -> Vec<Effect> {
        let conn = self.slots[s].id;
        self.slots[s].after_exception = None;
        let data = Bytes::from(format!("{}", self.jobs.len()));
        let req = Request::submit(Box::new(Submit {
            function: Bytes::from_static(FUNCS[func].as_bytes()),
            unique: unique.map_or(Bytes::new(), |u| Bytes::from_static(UNIQUES[u].as_bytes())),
            data: data.clone(),
            priority: Priority::ALL[prio],
            background: bg,
            epoch: epoch.map(|e| (START / 1000 + u64::from(e)) as i64),
            reducer: None,
        }));
        let effects = self.send(conn, req);
        // One JOB_CREATED to the submitter; the rest can only wake sleepers.
        let mut created = None;
        for e in &effects {
            match e {
                Effect::Created(c, id) if c.0 == conn && created.is_none() => created = Some(*id),
                Effect::Send(c, Response::JobCreated(h)) if c.0 == conn && created.is_none() => {
                    created = Some(id_of(h))
                }
                Effect::Send(_, Response::Noop) => {}
                other => panic!("submit: unexpected {other:?} in {effects:?}"),
            }
        }
        let id = created.unwrap_or_else(|| panic!("submit: no JOB_CREATED in {effects:?}"));
        let live = |j: &MJob| j.state != St::Done;
        let existing = unique.and_then(|u| {
            self.jobs
                .iter()
                .find(|(_, j)| live(j) && j.func == func && j.unique == Some(u))
                .map(|(&id, _)| id)
        });
        match existing {
            Some(old) => {
                assert_eq!(id, old, "unique id {:?} did not join its job", unique);
                let job = self.jobs.get_mut(&old).expect("live job");
                if !bg {
                    job.clients.push(conn);
                }
                job.bg |= bg;
            }
            None => {
                let last = self.jobs.keys().next_back().copied().unwrap_or(0);
                assert!(id > last, "handle {id} reused (last {last})");
                let due = epoch
                    .map(|e| (START / 1000 + u64::from(e)) * 1000)
                    .filter(|&d| d > self.now);
                self.jobs.insert(
                    id,
                    MJob {
                        func,
                        prio,
                        unique,
                        data,
                        bg,
                        state: due.map_or(St::Queued, St::Scheduled),
                        clients: if bg { Vec::new() } else { vec![conn] },
                        retries: 0,
                        due,
                    },
                );
                match due {
                    None => self.queues[func][prio].push_back(id),
                    Some(_) => self.offer_early(id),
                }
            }
        }
        effects
    }

    fn drop_abilities(&mut self, s: usize, req: Request, which: Option<usize>) -> Vec<Effect> {
        let conn = self.slots[s].id;
        self.slots[s].after_exception = None;
        let dropped: Vec<usize> = self.slots[s]
            .abilities
            .iter()
            .map(|a| a.0)
            .filter(|&f| which.is_none_or(|w| w == f))
            .collect();
        self.slots[s].abilities.retain(|a| !dropped.contains(&a.0));
        self.prune_offers();
        for id in self.held_by(conn) {
            if dropped.contains(&self.jobs[&id].func) {
                self.requeue(id);
            }
        }
        self.send(conn, req)
    }

    fn disconnect(&mut self, s: usize) -> Vec<Effect> {
        let conn = self.slots[s].id;
        self.slots[s].abilities.clear();
        self.slots[s].early = false;
        self.prune_offers();
        for id in self.held_by(conn) {
            self.requeue(id);
        }
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        for id in ids {
            let job = self.jobs.get_mut(&id).expect("job");
            if !job.clients.contains(&conn) {
                continue;
            }
            job.clients.retain(|&c| c != conn);
            let waiting = matches!(job.state, St::Queued | St::Scheduled(_));
            if job.clients.is_empty() && !job.bg && waiting {
                job.state = St::Done;
                self.unqueue(id);
            }
        }
        self.core.disconnect(ConnId(conn), self.now);
        let effects = self.core.take_effects();
        self.open(s);
        effects
    }

    fn fire_timers(&mut self) -> Vec<Effect> {
        let now = self.now;
        // In the core's timer order: by time, then due times before run
        // time limits, then by job.
        let mut due: Vec<(u64, u8, u64)> = Vec::new();
        for (&id, job) in &self.jobs {
            match job.state {
                St::Scheduled(t) if t <= now => due.push((t, 0, id)),
                St::Running {
                    deadline: Some(t), ..
                } if t <= now => due.push((t, 1, id)),
                _ => {}
            }
        }
        due.sort_unstable();
        for (_, kind, id) in due {
            if kind == 0 {
                self.jobs.get_mut(&id).expect("job").state = St::Queued;
                self.queue_of(id).push_back(id);
            } else {
                self.requeue(id);
            }
        }
        self.core.on_timeout(now);
        self.core.take_effects()
    }

    fn wants_exception(&self, client: u64) -> bool {
        self.exceptions_all || self.slots.iter().any(|c| c.id == client && c.exceptions)
    }
}

/// A WORK_DATA, WORK_WARNING or WORK_STATUS about `h`, as forwarded.
fn forwarded(r: &Response, h: &Bytes) -> bool {
    match r {
        Response::WorkData { handle, .. }
        | Response::WorkWarning { handle, .. }
        | Response::WorkStatus { handle, .. } => handle == h,
        _ => false,
    }
}

fn only_noops(effects: &[Effect]) {
    for e in effects {
        assert!(matches!(e, Effect::Send(_, Response::Noop)), "{effects:?}");
    }
}
