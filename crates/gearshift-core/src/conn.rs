//! The connections ([`Conns`]): per connection what a worker can do and
//! holds, what a client waits on, its options, its sleep state, its held
//! output and its registry figures. Fields are private: every change is a
//! method of [`Conns`], so the handlers never touch a connection's books.

use std::collections::VecDeque;

use bytes::Bytes;

use gearshift_proto::worker_stats::WorkerStats;

use crate::effect::Effect;
use crate::ids::{ConnId, FuncId, IdMap, IdSet, JobId};
use crate::rights::Rights;
use crate::Millis;

/// A function a worker registered, with its per-job time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ability {
    /// The function.
    pub func: FuncId,
    /// CAN_DO_TIMEOUT in milliseconds, if any.
    pub timeout_ms: Option<u64>,
}

/// Facts about a connection the server supplies when it opens.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// File descriptor number, shown by `workers` (for a connection
    /// another node carries, the client's port).
    pub fd: i64,
    /// Peer address as text, shown by `workers`.
    pub ip: String,
    /// Peer port: with `node` and `ip`, names one client across the
    /// sub-connections a partitioned node opens for it.
    pub port: u16,
    /// Peer is on a loopback address.
    pub loopback: bool,
    /// What the peer may do (the config file's `[access]`, `--admin-allow`).
    pub rights: Rights,
    /// The cluster node that relayed the connection; None when the peer
    /// connected to this server directly.
    pub node: Option<String>,
    /// The subject of the TLS client certificate the peer presented.
    pub identity: Option<String>,
}

/// One connection's state in the core (read through its accessors; it
/// changes only through [`Conns`]).
#[derive(Debug)]
pub struct Conn {
    /// What the server told us at connect.
    info: ConnInfo,
    /// SET_CLIENT_ID, default `-`.
    client_id: Bytes,
    /// Registered functions, newest first.
    abilities: Vec<Ability>,
    /// Round-robin cursor into `abilities`.
    cursor: usize,
    /// Jobs this connection holds as a worker.
    held: Vec<JobId>,
    /// Foreground jobs this connection waits on as a client.
    waiting: IdSet<JobId>,
    /// OPTION_REQ exceptions.
    exceptions: bool,
    /// OPTION_REQ dead-set: its foreground jobs that fail for good under a
    /// policy go to the dead set, as background ones do (the GearMonkey bridge).
    dead_set: bool,
    /// OPTION_REQ epoch-early: handed epoch jobs at submission, before they
    /// are due (a bridge that schedules them itself).
    epoch_early: bool,
    /// OPTION_REQ `stats`: what its jobs cost so far, as it last said.
    stats: Option<WorkerStats>,
    /// Sent PRE_SLEEP and has not grabbed since.
    sleeping: bool,
    /// Was sent a NOOP and has sent nothing since.
    noop_sent: bool,
    /// Output held behind answers that wait for the store.
    outbox: VecDeque<Held>,
    /// The function this connection last submitted to: a hint, checked by name.
    last_func: FuncId,
    /// When it connected (Unix ms).
    connected: Millis,
    /// When it last sent a packet or line.
    last_seen: Millis,
    /// Runs it finished with WORK_COMPLETE.
    jobs_done: u64,
    /// Runs that ended otherwise while it held them (fail, exception, timeout).
    jobs_failed: u64,
    /// The job whose WORK_EXCEPTION this worker sent last, until its next
    /// packet: a WORK_FAIL for it then is the second half of one failure.
    after_exception: Option<JobId>,
    /// Sent an admin text line.
    admin: bool,
    /// Sent a binary packet (so not an admin-only connection).
    binary: bool,
}

impl Conn {
    fn new(info: ConnInfo, now: Millis) -> Self {
        Conn {
            info,
            client_id: Bytes::from_static(b"-"),
            abilities: Vec::new(),
            cursor: 0,
            held: Vec::new(),
            waiting: IdSet::default(),
            exceptions: false,
            dead_set: false,
            epoch_early: false,
            stats: None,
            sleeping: false,
            noop_sent: false,
            outbox: VecDeque::new(),
            last_func: FuncId::MAX,
            connected: now,
            last_seen: now,
            jobs_done: 0,
            jobs_failed: 0,
            after_exception: None,
            admin: false,
            binary: false,
        }
    }

    /// What the server told us at connect.
    pub fn info(&self) -> &ConnInfo {
        &self.info
    }

    /// The last OPTION_REQ `stats` it sent.
    pub fn stats(&self) -> Option<WorkerStats> {
        self.stats
    }

    /// SET_CLIENT_ID, `-` if none.
    pub fn client_id(&self) -> &Bytes {
        &self.client_id
    }

    /// Registered functions, newest first.
    pub fn abilities(&self) -> &[Ability] {
        &self.abilities
    }

    /// Whether it takes epoch jobs before they are due (OPTION_REQ epoch-early).
    pub fn epoch_early(&self) -> bool {
        self.epoch_early
    }

    /// Where GRAB's round-robin over `abilities` starts.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Jobs it holds as a worker, in the order it took them.
    pub fn held(&self) -> &[JobId] {
        &self.held
    }

    /// Foreground jobs it waits on as a client.
    pub fn waiting(&self) -> impl Iterator<Item = JobId> + '_ {
        self.waiting.iter().copied()
    }

    /// Whether it waits on job `id`.
    pub fn waits_on(&self, id: JobId) -> bool {
        self.waiting.contains(&id)
    }

    /// When it connected and when it last sent something.
    pub fn seen(&self) -> (Millis, Millis) {
        (self.connected, self.last_seen)
    }

    /// Runs it finished with WORK_COMPLETE, and runs that ended otherwise.
    pub fn runs(&self) -> (u64, u64) {
        (self.jobs_done, self.jobs_failed)
    }

    /// Only ever sent admin text lines.
    pub fn admin_only(&self) -> bool {
        self.admin && !self.binary
    }

    /// `CLIENT_ID@ADDRESS`, how history and `show job` name a worker.
    pub fn label(&self) -> Bytes {
        let mut w = self.client_id.to_vec();
        w.push(b'@');
        w.extend_from_slice(self.info.ip.as_bytes());
        Bytes::from(w)
    }

    /// Registered a function or holds a job (`show workers` lists it).
    pub fn is_worker(&self) -> bool {
        !self.abilities.is_empty() || !self.held.is_empty()
    }

    /// How live events name it: its client id, else `fd@address`.
    pub fn event_label(&self) -> Bytes {
        if !self.client_id.is_empty() && self.client_id[..] != b"-"[..] {
            return self.client_id.clone();
        }
        Bytes::from(format!("{}@{}", self.info.fd, self.info.ip))
    }

    /// The ability for `func`, if registered.
    pub fn ability(&self, func: FuncId) -> Option<&Ability> {
        self.abilities.iter().find(|a| a.func == func)
    }

    /// May be woken for `func`: asleep, not yet NOOPed, and still able to do it.
    pub fn wakeable_for(&self, func: FuncId) -> bool {
        self.sleeping && !self.noop_sent && self.ability(func).is_some()
    }
}

/// What [`Conns::add_ability`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    /// The function is new to this connection (else only its timeout moved).
    pub new: bool,
    /// It is the connection's first function: it became a worker.
    pub first: bool,
    /// The connection sleeps un-NOOPed, so it waits for this function too.
    pub asleep: bool,
}

/// What a closed connection leaves behind for the job table.
#[derive(Debug)]
pub struct Closed {
    /// The functions it could do.
    pub abilities: Vec<Ability>,
    /// The jobs it held as a worker.
    pub held: Vec<JobId>,
    /// The foreground jobs it waited on as a client.
    pub waiting: IdSet<JobId>,
    /// It took epoch jobs early (OPTION_REQ epoch-early).
    pub epoch_early: bool,
}

/// Every open connection, by id: the one place a connection's books change.
#[derive(Debug, Default)]
pub struct Conns {
    map: IdMap<u64, Conn>,
}

impl Conns {
    /// A connection opened at `now`.
    pub fn open(&mut self, id: ConnId, info: ConnInfo, now: Millis) {
        self.map.insert(id.0, Conn::new(info, now));
    }

    /// A connection closed: what it could do, held and waited on.
    pub fn close(&mut self, id: ConnId) -> Option<Closed> {
        let c = self.map.remove(&id.0)?;
        Some(Closed {
            abilities: c.abilities,
            held: c.held,
            waiting: c.waiting,
            epoch_early: c.epoch_early,
        })
    }

    /// A connection by id.
    #[inline]
    pub fn get(&self, id: ConnId) -> Option<&Conn> {
        self.map.get(&id.0)
    }

    /// Whether connection `id` is open.
    pub fn contains(&self, id: ConnId) -> bool {
        self.map.contains_key(&id.0)
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every connection, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        self.map.iter().map(|(&id, c)| (ConnId(id), c))
    }

    /// Every connection, oldest (lowest id) first.
    pub fn in_order(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        let mut ids: Vec<u64> = self.map.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| self.map.get(&id).map(|c| (ConnId(id), c)))
    }

    /// Connections by role: workers, admin-only, the rest (clients).
    pub fn roles(&self) -> (u64, u64, u64) {
        let mut n = (0, 0, 0);
        for c in self.map.values() {
            if c.is_worker() {
                n.0 += 1;
            } else if c.admin_only() {
                n.1 += 1;
            } else {
                n.2 += 1;
            }
        }
        n
    }

    /// Any input from `id` at `now`: its rights, and whether a worker that
    /// slept and was NOOPed must go back on the wake lists (it sent
    /// something other than GRAB or PRE_SLEEP, which `settles` the sleep
    /// state itself). `admin`: a text line; `work_fail`: a WORK_FAIL, the
    /// only packet that keeps the pairing with a WORK_EXCEPTION.
    #[inline]
    pub fn heard_from(
        &mut self,
        id: ConnId,
        now: Millis,
        settles: bool,
        work_fail: bool,
        admin: bool,
    ) -> Option<(Rights, bool)> {
        let c = self.map.get_mut(&id.0)?;
        c.last_seen = now;
        if admin {
            c.admin = true;
        } else {
            c.binary = true;
        }
        if !work_fail {
            c.after_exception = None;
        }
        let mut enlist = false;
        if c.noop_sent {
            c.noop_sent = false;
            enlist = c.sleeping && !settles;
        }
        Some((c.info.rights, enlist))
    }

    /// OPTION_REQ exceptions.
    pub fn set_exceptions(&mut self, id: ConnId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.exceptions = true;
        }
    }

    /// Whether connection `id` asked for WORK_EXCEPTION packets.
    pub fn wants_exceptions(&self, id: ConnId) -> bool {
        self.map.get(&id.0).is_some_and(|c| c.exceptions)
    }

    /// OPTION_REQ dead-set.
    pub fn set_dead_set(&mut self, id: ConnId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.dead_set = true;
        }
    }

    /// Whether connection `id` asked for its failed jobs in the dead set.
    pub fn wants_dead_set(&self, id: ConnId) -> bool {
        self.map.get(&id.0).is_some_and(|c| c.dead_set)
    }

    /// OPTION_REQ epoch-early; returns the functions it had registered
    /// before (`None` if it already asked, or is unknown).
    pub fn set_epoch_early(&mut self, id: ConnId) -> Option<Vec<FuncId>> {
        let c = self.map.get_mut(&id.0).filter(|c| !c.epoch_early)?;
        c.epoch_early = true;
        Some(c.abilities.iter().map(|a| a.func).collect())
    }

    /// OPTION_REQ `stats`.
    pub fn set_stats(&mut self, id: ConnId, stats: WorkerStats) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.stats = Some(stats);
        }
    }

    /// SET_CLIENT_ID (the caller bounds its length).
    pub fn set_client_id(&mut self, id: ConnId, client_id: Bytes) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.client_id = client_id;
        }
    }

    /// The function `id` last submitted to (`FuncId::MAX`: none).
    #[inline]
    pub fn last_func(&self, id: ConnId) -> FuncId {
        self.map.get(&id.0).map_or(FuncId::MAX, |c| c.last_func)
    }

    /// Remembers the function `id` submitted to.
    #[inline]
    pub fn set_last_func(&mut self, id: ConnId, func: FuncId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.last_func = func;
        }
    }

    /// CAN_DO / CAN_DO_TIMEOUT: `ability` becomes the newest (a function
    /// already registered only changes its timeout).
    pub fn add_ability(&mut self, id: ConnId, ability: Ability) -> Option<Added> {
        let c = self.map.get_mut(&id.0)?;
        let existed = c.abilities.iter().position(|a| a.func == ability.func);
        if let Some(i) = existed {
            c.abilities.remove(i);
        }
        c.abilities.insert(0, ability);
        Some(Added {
            new: existed.is_none(),
            first: existed.is_none() && c.abilities.len() == 1,
            asleep: c.sleeping && !c.noop_sent,
        })
    }

    /// CANT_DO / RESET_ABILITIES: drops the abilities `which` picks and
    /// returns them; the round-robin starts over.
    pub fn drop_abilities(&mut self, id: ConnId, which: impl Fn(FuncId) -> bool) -> Vec<Ability> {
        let Some(c) = self.map.get_mut(&id.0) else {
            return Vec::new();
        };
        let mut dropped = Vec::new();
        c.abilities.retain(|a| {
            let drop = which(a.func);
            if drop {
                dropped.push(*a);
            }
            !drop
        });
        c.cursor = 0;
        dropped
    }

    /// GRAB's round-robin goes on from `at` next time.
    #[inline]
    pub fn set_cursor(&mut self, id: ConnId, at: usize) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.cursor = at;
        }
    }

    /// PRE_SLEEP: asleep; `noop` says it is NOOPed at once (work waits).
    pub fn sleep(&mut self, id: ConnId, noop: bool) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.sleeping = true;
            c.noop_sent = noop;
        }
    }

    /// GRAB: awake; false if the connection is unknown.
    #[inline]
    pub fn wake(&mut self, id: ConnId) -> bool {
        let Some(c) = self.map.get_mut(&id.0) else {
            return false;
        };
        c.sleeping = false;
        c.noop_sent = false;
        true
    }

    /// NOOPs a sleeper of `func` if it still may be woken for it and is of
    /// the kind the waking work is for (`early`: an epoch job offered to
    /// early takers); whether it was.
    #[inline]
    pub fn noop(&mut self, id: ConnId, func: FuncId, early: bool) -> bool {
        match self.map.get_mut(&id.0) {
            Some(c) if c.wakeable_for(func) && c.epoch_early == early => {
                c.noop_sent = true;
                true
            }
            _ => false,
        }
    }

    /// Whether `id` may be woken for `func`.
    pub fn wakeable_for(&self, id: ConnId, func: FuncId) -> bool {
        self.map.get(&id.0).is_some_and(|c| c.wakeable_for(func))
    }

    /// Worker `id` took job `job`.
    #[inline]
    pub fn hold(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.held.push(job);
        }
    }

    /// Worker `id` no longer holds job `job`.
    #[inline]
    pub fn let_go(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.held.retain(|&j| j != job);
        }
    }

    /// Client `id` waits on foreground job `job`.
    #[inline]
    pub fn wait_on(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.waiting.insert(job);
        }
    }

    /// Client `id` no longer waits on job `job`.
    #[inline]
    pub fn stop_waiting(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.waiting.remove(&job);
        }
    }

    /// A run worker `id` held ended: completed (`ok`) or otherwise.
    #[inline]
    pub fn count_run(&mut self, id: ConnId, ok: bool) {
        if let Some(c) = self.map.get_mut(&id.0) {
            if ok {
                c.jobs_done += 1;
            } else {
                c.jobs_failed += 1;
            }
        }
    }

    /// Worker `id` sent WORK_EXCEPTION for `job`.
    pub fn set_after_exception(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.after_exception = Some(job);
        }
    }

    /// The job of the WORK_EXCEPTION `id` sent just before, forgotten.
    pub fn take_after_exception(&mut self, id: ConnId) -> Option<JobId> {
        self.map.get_mut(&id.0)?.after_exception.take()
    }

    /// Queues `effect` for `id` behind its held answers; given back when
    /// nothing is held (it can go out at once).
    pub fn hold_output(&mut self, id: ConnId, effect: Effect) -> Option<Effect> {
        match self.map.get_mut(&id.0) {
            Some(c) if !c.outbox.is_empty() => {
                c.outbox.push_back(Held::Ready(effect));
                None
            }
            _ => Some(effect),
        }
    }

    /// Reserves the place of `job`'s answer to `id` until the store decides.
    pub fn hold_ack(&mut self, id: ConnId, job: JobId) {
        if let Some(c) = self.map.get_mut(&id.0) {
            c.outbox.push_back(Held::Ack(job));
        }
    }

    /// Fills `job`'s held answer to `id` with `answer` and moves everything
    /// now in order into `out`.
    pub fn resolve_ack(&mut self, id: ConnId, job: JobId, answer: Effect, out: &mut Vec<Effect>) {
        let Some(c) = self.map.get_mut(&id.0) else {
            return;
        };
        if let Some(slot) = c
            .outbox
            .iter_mut()
            .find(|h| matches!(h, Held::Ack(j) if *j == job))
        {
            *slot = Held::Ready(answer);
        }
        while let Some(Held::Ready(_)) = c.outbox.front() {
            if let Some(Held::Ready(e)) = c.outbox.pop_front() {
                out.push(e);
            }
        }
    }
}

/// One place in a connection's held output.
#[derive(Debug)]
pub enum Held {
    /// The answer to a submission of this job, still waiting for the store.
    Ack(JobId),
    /// A packet ready to go once everything before it has gone.
    Ready(Effect),
}

#[cfg(test)]
mod tests;
