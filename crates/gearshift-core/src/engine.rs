//! The [`Core`] struct, made of its parts (the [`crate::table::JobTable`],
//! the connections, the timers, the handles, retained jobs, schedules), and
//! the entry points a driver calls (`connect`, `handle`, `disconnect`,
//! `on_timeout`, `next_deadline`), which dispatch to the handlers.
//!
//! Every entry point takes `now` and appends [`Effect`]s; the driver drains
//! them with [`Core::take_effects`] and carries them out in order. Replies
//! keep request order per connection, behind answers held for the store.

use bytes::Bytes;
use gearshift_proto::{Progress, Request, Response};

use crate::config::CoreConfig;
use crate::conn::{ConnInfo, Conns};
use crate::effect::{Effect, Input};
use crate::history::History;
use crate::ids::{ConnId, JobHandles, JobId};
use crate::kept::Retained;
use crate::policy::{can_do_timeout_ms, Policies, Reason, TimeoutUnit};
use crate::rights::Rights;
use crate::table::JobTable;
use crate::timers::{Timer, Timers};
use crate::Millis;

/// The job-routing state machine.
pub struct Core {
    pub(crate) cfg: CoreConfig,
    /// Every job and function, with their counts ([`JobTable`]).
    pub(crate) table: JobTable,
    /// Every open connection ([`Conns`]).
    pub(crate) conns: Conns,
    /// Submitters owed a JOB_CREATED once the store confirms the job.
    pub(crate) acks: crate::acks::Acks,
    /// Whether starts of stored jobs go to the store ([`Core::track_runs`]).
    pub(crate) track_runs: bool,
    /// Requests the access rules refused: submit, work, read, change.
    pub(crate) denied: [u64; 4],
    pub(crate) handles: JobHandles,
    pub(crate) timers: Timers,
    pub(crate) effects: Vec<Effect>,
    /// Per-function policies from the config file.
    pub(crate) policies: Policies,
    /// History and attempt records of live jobs under a policy ([`History`]).
    pub(crate) history: History,
    /// Finished jobs kept queryable, and the dead set.
    pub(crate) retained: Retained,
    /// The latest time an entry point was given.
    pub(crate) now: Millis,
    /// Recurring jobs.
    pub(crate) schedules: crate::cron::Schedules,
    /// Which kinds of transition go out as [`Effect::Event`]s (a mask of
    /// [`crate::events::Kind`] bits; 0: none).
    pub(crate) events: u16,
}

impl Core {
    /// A core with no connections and no jobs; handles start at 1.
    pub fn new(cfg: CoreConfig) -> Self {
        Core::with_first_handle(cfg, 1)
    }

    /// A core whose handle counter starts at `first` (for restarts that
    /// must never reuse a handle).
    pub fn with_first_handle(cfg: CoreConfig, first: JobId) -> Self {
        Core {
            handles: JobHandles::new(&cfg.handle_prefix, first),
            cfg,
            table: JobTable::default(),
            conns: Conns::default(),
            acks: crate::acks::Acks::default(),
            track_runs: false,
            denied: [0; 4],
            timers: Timers::default(),
            effects: Vec::new(),
            policies: Policies::default(),
            history: History::default(),
            retained: Retained::default(),
            now: 0,
            schedules: Default::default(),
            events: 0,
        }
    }

    /// Puts new per-function policies in force (at start, and on reload).
    /// Every function looks its policy up again; jobs already waiting for
    /// a retry keep their time.
    pub fn set_policies(&mut self, policies: Policies) {
        for f in self.table.funcs_mut() {
            f.policy = policies.lookup(&f.name);
        }
        self.policies = policies;
        let gone: Vec<JobId> = self.history.ids().filter(|&id| !self.tracks(id)).collect();
        for id in gone {
            self.history.forget(id);
        }
    }

    /// The policies in force.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// Finished jobs kept queryable and dead jobs held.
    pub fn retained_counts(&self) -> (usize, usize) {
        (self.retained.kept.len(), self.retained.dead.len())
    }

    /// The configuration in force.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Takes the effects produced since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// How many effects wait for [`Core::drain_effects_into`].
    pub fn pending_effects(&self) -> usize {
        self.effects.len()
    }

    /// Moves the effects produced since the last call into `out`. When
    /// `out` is empty the two buffers are swapped (no effect is copied, and
    /// both keep their capacity).
    pub fn drain_effects_into(&mut self, out: &mut Vec<Effect>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.effects);
        } else {
            out.append(&mut self.effects);
        }
    }

    /// The driver's clock moved (an input with no other entry point, such
    /// as a new connection, is about to be given).
    pub fn set_now(&mut self, now: Millis) {
        self.now = self.now.max(now);
    }

    /// A connection opened.
    pub fn connect(&mut self, conn: ConnId, info: ConnInfo) {
        self.conns.open(conn, info, self.now);
    }

    /// Whether connection `conn` is open as far as the core knows.
    pub fn is_connected(&self, conn: ConnId) -> bool {
        self.conns.contains(conn)
    }

    /// Every connection the core knows.
    pub fn connection_ids(&self) -> Vec<ConnId> {
        self.conns.iter().map(|(c, _)| c).collect()
    }

    /// Number of jobs the core holds (queued, scheduled and running).
    pub fn job_count(&self) -> usize {
        self.table.len()
    }

    /// Jobs currently held by workers, over all functions.
    pub fn running_jobs(&self) -> u64 {
        self.table
            .funcs()
            .iter()
            .flatten()
            .map(|f| u64::from(f.running))
            .sum()
    }

    /// One input from a connection.
    #[inline(always)]
    pub fn handle(&mut self, conn: ConnId, input: Input, now: Millis) {
        self.now = self.now.max(now);
        match input {
            // The busiest input, straight to its rule.
            Input::Request(Request::Submit(s)) => {
                let rights = self.heard_from(conn, false, false, false);
                if rights.is_some_and(|r| self.may_submit(conn, r)) {
                    self.submit(conn, s, now);
                }
            }
            input => self.handle_other(conn, input, now),
        }
    }

    /// Every input but a submission: kept out of line, so the driver's
    /// reading loop that [`Core::handle`] is inlined into stays small.
    #[inline(never)]
    fn handle_other(&mut self, conn: ConnId, input: Input, now: Millis) {
        let settles = matches!(input, Input::Request(Request::Grab(_) | Request::PreSleep));
        let fail = matches!(input, Input::Request(Request::WorkFail { .. }));
        let admin = matches!(input, Input::Admin(_));
        let Some(rights) = self.heard_from(conn, settles, fail, admin) else {
            return;
        };
        if !self.permitted(conn, rights, &input) {
            return;
        }
        match input {
            Input::Request(req) => self.request(conn, req, now),
            Input::Invalid(err) => {
                self.send(conn, Response::error(err.code(), err.text()));
            }
            Input::Admin(cmd) => self.admin(conn, *cmd, now),
        }
    }

    /// Bookkeeping for any input from `conn`; its rights, or `None` when
    /// the connection is unknown. Any packet proves a worker is alive: if it still sleeps
    /// (it sent something other than GRAB or PRE_SLEEP, which `settles`
    /// the sleep state itself) it may be woken again. `admin`: a text line
    /// (the connection's role in the overview).
    #[inline(always)]
    fn heard_from(
        &mut self,
        conn: ConnId,
        settles: bool,
        work_fail: bool,
        admin: bool,
    ) -> Option<Rights> {
        let (rights, enlist) = self
            .conns
            .heard_from(conn, self.now, settles, work_fail, admin)?;
        if enlist {
            self.enlist_sleeper(conn);
        }
        Some(rights)
    }

    fn request(&mut self, conn: ConnId, req: Request, now: Millis) {
        match req {
            Request::Echo(data) => self.send(conn, Response::EchoRes(data)),
            Request::Submit(s) => self.submit(conn, s, now),
            Request::SubmitSched(s) => {
                let s = *s;
                self.submit_sched(conn, s.function, s.unique, s.when, s.data)
            }
            Request::CanDo(f) => self.can_do(conn, f, None),
            Request::CanDoTimeout { function, timeout } => {
                let value = gearshift_proto::request::parse_atoi(&timeout);
                let unit = self
                    .policies
                    .lookup(&function)
                    .map_or(TimeoutUnit::Auto, |p| p.timeout_unit);
                self.can_do(conn, function, can_do_timeout_ms(value, unit));
            }
            Request::CantDo(f) => self.cant_do(conn, &f),
            Request::ResetAbilities => self.reset_abilities(conn),
            Request::PreSleep => self.pre_sleep(conn),
            Request::Grab(kind) => self.grab(conn, kind, now),
            Request::WorkStatus(p) => {
                let Progress {
                    handle,
                    numerator,
                    denominator,
                } = *p;
                self.work_status(conn, handle, numerator, denominator)
            }
            Request::WorkData { handle, data } => self.work_data(conn, handle, data, false),
            Request::WorkWarning { handle, data } => self.work_data(conn, handle, data, true),
            Request::WorkComplete { handle, data } => self.work_complete(conn, handle, data),
            Request::WorkFail { handle } => self.work_fail(conn, handle),
            Request::WorkException { handle, data } => self.work_exception(conn, handle, data),
            Request::GetStatus(handle) => self.get_status(conn, handle),
            Request::GetStatusUnique(unique) => self.get_status_unique(conn, unique),
            Request::Option(name) => self.option(conn, name),
            Request::SetClientId(id) => {
                let id = id.slice(..id.len().min(crate::config::MAX_CLIENT_ID));
                self.conns.set_client_id(conn, id);
            }
        }
    }

    /// A connection closed: its held jobs go back to their queues, and
    /// foreground jobs it alone waited on and that have not started are dropped.
    pub fn disconnect(&mut self, conn: ConnId, now: Millis) {
        self.now = self.now.max(now);
        if self.wants(crate::events::Kind::WorkerLeft) {
            if let Some(c) = self.conns.get(conn).filter(|c| !c.abilities().is_empty()) {
                let w = self.worker_ref(conn, c);
                self.push_event(crate::events::EventKind::WorkerLeft(w));
            }
        }
        let Some(c) = self.conns.close(conn) else {
            return;
        };
        self.table.abilities_dropped(&c.abilities, c.epoch_early);
        for job in c.held {
            self.requeue(job, Reason::WorkerLost, "worker disconnected");
        }
        for job in c.waiting {
            self.detach_client(job, conn);
        }
    }

    /// When the core next needs [`Core::on_timeout`], if ever.
    pub fn next_deadline(&self) -> Option<Millis> {
        let timer = self.timers.next();
        match (timer, self.retained.next_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires every timer due at `now`.
    pub fn on_timeout(&mut self, now: Millis) {
        self.now = self.now.max(now);
        self.prune_retained(now);
        while let Some(timer) = self.timers.pop_due(now) {
            match timer {
                Timer::Due(job) => self.epoch_due(job),
                Timer::Timeout(job, assignment) => self.job_timed_out(job, assignment),
                Timer::Fire(id, at) => self.fire(id, at),
            }
        }
    }

    /// Appends the JOB_CREATED packet an [`Effect::Created`] stands for.
    pub fn encode_job_created(&mut self, id: JobId, out: &mut bytes::BytesMut) {
        self.handles.own().encode_created(id, out);
    }

    /// The JOB_CREATED packet an [`Effect::Created`] stands for.
    pub fn job_created(&mut self, id: JobId) -> Response {
        Response::JobCreated(self.handles.own().make(id))
    }

    /// OPTION_REQ: gearmand's `exceptions`, and Gearshift's own
    /// `dead-set` (a client's failed foreground jobs go to the dead set),
    /// `epoch-early` (a worker is handed epoch jobs before they are due) and
    /// `stats cpu=.. rss=..` (what a worker's jobs cost so far).
    fn option(&mut self, conn: ConnId, name: Bytes) {
        match gearshift_proto::worker_stats::WorkerStats::parse(&name) {
            Some(Some(stats)) => {
                self.conns.set_stats(conn, stats);
                return self.send(conn, Response::OptionRes(name));
            }
            Some(None) => {
                let text = "stats takes cpu=SECONDS rss=KIB";
                return self.send(conn, Response::error("INVALID_ARGUMENT", text));
            }
            None => {}
        }
        if name.eq_ignore_ascii_case(b"exceptions") {
            self.conns.set_exceptions(conn);
        } else if name.eq_ignore_ascii_case(b"dead-set") {
            self.conns.set_dead_set(conn);
        } else if name.eq_ignore_ascii_case(b"epoch-early") {
            let funcs = self.conns.set_epoch_early(conn);
            // Asleep, it waits on the other workers' wake lists: it now
            // waits on the early takers' ones.
            let c = self.conns.get(conn).filter(|_| funcs.is_some());
            if c.is_some_and(|c| c.abilities().iter().any(|a| c.wakeable_for(a.func))) {
                self.enlist_sleeper(conn);
            }
            for func in funcs.unwrap_or_default() {
                self.table.early_taker_added(func);
                self.early_taker_joined(func);
            }
        } else {
            self.send(
                conn,
                Response::error("UNKNOWN_OPTION", "Server does not recognize given option"),
            );
            return;
        }
        self.send(conn, Response::OptionRes(name));
    }

    /// Looks a live job up by handle; only the exact `<prefix>:<n>` this
    /// server printed (or a restored job's stored handle) matches.
    pub(crate) fn job_by_handle(&self, handle: &[u8]) -> Option<JobId> {
        let id = self.handles.id_of(handle)?;
        self.table.contains(id).then_some(id)
    }
}

/// Output. A client matches JOB_CREATED (and every other reply) to its
/// requests by order, so when a background submission waits for the store,
/// every packet for that connection produced after it waits too (in the
/// connection's held outbox, [`Conns::hold_output`]) and goes out, in
/// order, once the store has answered.
impl Core {
    /// Sends a packet to a connection, behind any held answer.
    #[inline]
    pub(crate) fn send(&mut self, conn: ConnId, r: Response) {
        self.emit(conn, Effect::Send(conn, r));
    }
    /// Queues a packet or text for a connection, behind any held answer.
    #[inline]
    pub(crate) fn emit(&mut self, conn: ConnId, effect: Effect) {
        if !self.cfg.durable {
            // Only answers waiting for the store are ever held.
            self.effects.push(effect);
            return;
        }
        self.emit_in_order(conn, effect);
    }

    fn emit_in_order(&mut self, conn: ConnId, effect: Effect) {
        if let Some(effect) = self.conns.hold_output(conn, effect) {
            self.effects.push(effect);
        }
    }

    /// Reserves the place of a submission's answer until the store decides.
    pub(crate) fn hold_ack(&mut self, conn: ConnId, job: JobId) {
        self.conns.hold_ack(conn, job);
    }

    /// Fills a held answer and sends everything that is now in order.
    pub(crate) fn resolve_ack(&mut self, conn: ConnId, job: JobId, answer: Response) {
        let answer = Effect::Send(conn, answer);
        self.conns.resolve_ack(conn, job, answer, &mut self.effects);
    }

    /// A packet for a connection, in order behind any held answer (for a
    /// driver that answers on the core's behalf, e.g. while shutting down).
    pub fn reply(&mut self, conn: ConnId, r: Response) {
        self.emit(conn, Effect::Send(conn, r));
    }
}

impl Core {
    /// Whether events of `kind` are wanted (one AND; 0 when none are).
    pub(crate) fn wants(&self, kind: crate::events::Kind) -> bool {
        self.events & kind.bit() != 0
    }
}
