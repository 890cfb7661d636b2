//! Recurring jobs: SUBMIT_JOB_SCHED from clients (minute, hour, day of
//! month, month, day of week with 0 = Monday, as the protocol reference
//! says) and `[[schedule]]` sections of the config file (cron lines, 0 =
//! Sunday). Each firing submits one background job; its unique id, if any,
//! keeps a run that is still queued from being queued twice.
//!
//! A stored schedule keeps its next firing time; the firing's job and the
//! schedule's new next time go to the store in the same batch, so a restart
//! neither loses a firing nor repeats one. A firing missed while the server
//! was down happens once at start, not once per missed time.

use std::io::Write;

use bytes::Bytes;
use gearshift_proto::admin as text;
use gearshift_proto::escape::{self, Sep};
use gearshift_proto::{Priority, Response};

use crate::cron::{Cron, Weekdays};
use gearshift_persist::ScheduleRecord;

use crate::effect::{stored_priority, Effect, StoreOp};
use crate::engine::Core;
use crate::ids::{ConnId, JobId};
use crate::job::{ConnList, Job, JobState, Payload, Persist};
use crate::timefmt::write_rfc3339;
use crate::timers::Timer;
use crate::Millis;

pub use crate::cron::{Schedule, ScheduleSpec, Schedules, MAX_CLIENT_SCHEDULES};

impl Core {
    /// SUBMIT_JOB_SCHED: answered with JOB_CREATED naming the schedule
    /// (once stored, with a durable store), or ERROR for a bad time field.
    pub(crate) fn submit_sched(
        &mut self,
        conn: ConnId,
        function: Bytes,
        unique: Bytes,
        when: [Bytes; 5],
        data: Bytes,
    ) {
        if unique.len() > crate::config::MAX_UNIQUE {
            self.send(
                conn,
                Response::error("ARGUMENT_TOO_LARGE", "Unique value too large"),
            );
            return;
        }
        // Counted only near the cap (config schedules are few).
        let full = self.schedules.len() >= MAX_CLIENT_SCHEDULES
            && self.schedules.values().filter(|s| !s.from_config).count() >= MAX_CLIENT_SCHEDULES;
        if full {
            let text =
                format!("Too many schedules (at most {MAX_CLIENT_SCHEDULES}): drop some first");
            self.send(conn, Response::error("QUEUE_ERROR", Bytes::from(text)));
            return;
        }
        self.table.function_id(&function, &self.policies);
        let fields: Vec<String> = when
            .iter()
            .map(|f| match String::from_utf8_lossy(f).trim() {
                "" => "*".to_owned(),
                t => t.to_owned(),
            })
            .collect();
        let parts = [
            &*fields[0],
            &*fields[1],
            &*fields[2],
            &*fields[3],
            &*fields[4],
        ];
        let cron = match Cron::parse(parts, Weekdays::MondayZero) {
            Ok(c) => c,
            Err(e) => {
                let text = format!("Bad schedule: {e}");
                self.send(conn, Response::error("INVALID_ARGUMENT", Bytes::from(text)));
                return;
            }
        };
        let id = self.new_job_id();
        let s = Schedule {
            id,
            when: fields.join(" "),
            weekdays: Weekdays::MondayZero,
            next: cron.next_after(self.now),
            cron,
            function,
            unique,
            data,
            priority: Priority::Normal,
            from_config: false,
            stored: false,
        };
        tracing::info!(handle = %self.handles.text(id), when = %s.when, "schedule added");
        self.add_schedule(s);
        if self.cfg.durable {
            self.acks.wait(id, conn);
            self.hold_ack(conn, id);
        } else {
            self.emit(conn, Effect::Created(conn, id));
        }
    }

    fn add_schedule(&mut self, s: Schedule) {
        if let Some(at) = s.next {
            self.timers.arm(at, Timer::Fire(s.id, at));
        }
        let id = s.id;
        self.schedules.insert(id, s);
        self.store_schedule(id);
    }

    /// Writes a schedule (new, or with a new next time) to the store.
    fn store_schedule(&mut self, id: JobId) {
        if !self.cfg.durable {
            return;
        }
        let handle = self.handles.of(id);
        if let Some(s) = self.schedules.get(&id) {
            let rec = s.stored(handle);
            self.effects.push(Effect::Store(StoreOp::Schedule(rec)));
        }
    }

    /// The store confirmed a schedule: its submitter hears JOB_CREATED.
    pub(crate) fn schedule_persisted(&mut self, id: JobId) -> bool {
        let Some(s) = self.schedules.get_mut(&id) else {
            return false;
        };
        s.stored = true;
        if let Some(acks) = self.acks.take(id) {
            let handle = self.handles.of(id);
            for &c in &acks {
                self.resolve_ack(c, id, Response::JobCreated(handle.clone()));
            }
        }
        true
    }

    /// The store could not record a schedule: it is dropped, and a waiting
    /// submitter gets ERROR QUEUE_ERROR.
    pub(crate) fn schedule_failed(&mut self, id: JobId, reason: &str) -> bool {
        if !self.schedules.contains_key(&id) {
            return false;
        }
        if let Some(acks) = self.acks.take(id) {
            self.schedules.remove(&id);
            self.table.refused_by_store(acks.len());
            let text = format!("Schedule could not be stored: {reason}");
            for &c in &acks {
                let r = Response::error("QUEUE_ERROR", Bytes::from(text.clone()));
                self.resolve_ack(c, id, r);
            }
        }
        true
    }

    /// A schedule's time came: one job, then the next time.
    pub(crate) fn fire(&mut self, id: JobId, at: Millis) {
        let Some(s) = self.schedules.get(&id) else {
            return;
        };
        if s.next != Some(at) {
            return;
        }
        let (function, unique, data, priority) = (
            s.function.clone(),
            s.unique.clone(),
            s.data.clone(),
            s.priority,
        );
        // The next time after this firing, or after now if the server was
        // down or busy past several: a missed run happens once.
        let mut next = s.cron.next_after(at);
        if next.is_some_and(|n| n <= self.now) {
            next = s.cron.next_after(self.now);
        }
        if let Some(s) = self.schedules.get_mut(&id) {
            s.next = next;
        }
        if let Some(n) = next {
            self.timers.arm(n, Timer::Fire(id, n));
        }
        self.store_schedule(id);
        match self.submit_internal(&function, unique, data, priority) {
            Some(job) => {
                tracing::debug!(schedule = %self.handles.text(id), job = %self.handles.text(job), "schedule fired")
            }
            None => {
                tracing::info!(schedule = %self.handles.text(id), "schedule fired, but its last run is still queued or the queue is full")
            }
        }
    }

    /// A background job the server submits itself (a schedule's firing).
    /// `None` when a job with its unique is still there, or the queue is full.
    fn submit_internal(
        &mut self,
        function: &[u8],
        unique: Bytes,
        data: Bytes,
        priority: Priority,
    ) -> Option<JobId> {
        let func = self.table.function_id(function, &self.policies);
        if self.table.coalesces_with(func, &unique, &data).is_some() {
            return None;
        }
        let p = priority.index();
        if self.table.func(func).is_some_and(|f| f.queue_full(p)) {
            return None;
        }
        let id = self.new_job_id();
        let payload = Payload::new(unique, data);
        self.table.insert(
            Job {
                id,
                payload: payload.bytes,
                unique_len: payload.unique_len,
                created: self.now,
                clients: ConnList::Empty,
                extra: None,
                func: func as u32,
                retries: 0,
                priority,
                background: true,
                state: JobState::Pending,
                persist: Persist::No,
            },
            true,
        );
        if self.reports(func, crate::events::Kind::Created) {
            self.record(id, crate::history::Step::Queued);
        }
        if self.cfg.durable {
            // Runnable once stored, like any background job.
            self.store_add(id);
        } else {
            self.release(id, self.now);
        }
        Some(id)
    }

    /// Puts the config file's schedules in force: kept ones keep their next
    /// time, new ones start, ones no longer declared stop.
    pub fn set_config_schedules(&mut self, specs: Vec<ScheduleSpec>) -> Result<(), String> {
        let mut parsed = Vec::with_capacity(specs.len());
        for spec in specs {
            let cron = Cron::parse_line(&spec.cron)?;
            parsed.push((spec, cron));
        }
        let mut keep = Vec::new();
        for (spec, cron) in parsed {
            if let Some(s) = self.schedules.values().find(|s| s.same_spec(&spec)) {
                keep.push(s.id);
                continue;
            }
            let id = self.new_job_id();
            keep.push(id);
            let s = Schedule {
                id,
                when: spec.cron.clone(),
                weekdays: Weekdays::SundayZero,
                next: cron.next_after(self.now),
                cron,
                function: spec.function,
                unique: spec.unique,
                data: spec.data,
                priority: spec.priority,
                from_config: true,
                stored: false,
            };
            self.add_schedule(s);
        }
        let gone: Vec<JobId> = self
            .schedules
            .values()
            .filter(|s| s.from_config && !keep.contains(&s.id))
            .map(|s| s.id)
            .collect();
        for id in gone {
            self.remove_schedule(id);
        }
        Ok(())
    }

    fn remove_schedule(&mut self, id: JobId) {
        if self.schedules.remove(&id).is_some() && self.cfg.durable {
            self.effects.push(Effect::Store(StoreOp::Unschedule(id)));
        }
    }

    /// Rebuilds stored schedules after a restart; a firing missed while the
    /// server was down happens at once (once).
    pub fn restore_schedules(&mut self, stored: Vec<ScheduleRecord>) {
        self.seen_ids(stored.iter().map(|r| r.id));
        self.adopt_schedules(stored);
    }

    /// Arms stored schedules under their stored handles (the counter does
    /// not move).
    pub(crate) fn adopt_schedules(&mut self, stored: Vec<ScheduleRecord>) {
        for r in stored {
            let weekdays = if r.monday_zero {
                Weekdays::MondayZero
            } else {
                Weekdays::SundayZero
            };
            let when = String::from_utf8_lossy(&r.when).into_owned();
            let fields: Vec<&str> = when.split_whitespace().collect();
            let Ok(fields) = <[&str; 5]>::try_from(fields) else {
                tracing::warn!(id = r.id, "stored schedule has no valid time; dropped");
                continue;
            };
            let Ok(cron) = Cron::parse(fields, weekdays) else {
                tracing::warn!(id = r.id, "stored schedule has no valid time; dropped");
                continue;
            };
            self.handles.restored(r.id, &r.handle);
            let next = r.next_ms.map(|n| n.max(self.now));
            let s = Schedule {
                id: r.id,
                when,
                weekdays,
                cron,
                function: r.function,
                unique: r.unique,
                data: r.data,
                priority: stored_priority(r.priority),
                next,
                from_config: r.from_config,
                stored: true,
            };
            if let Some(at) = next {
                self.timers.arm(at, Timer::Fire(s.id, at));
            }
            self.schedules.insert(s.id, s);
        }
    }

    /// `show schedules`: `HANDLE\tFUNCTION\tWHEN\tNEXT\tSOURCE\tUNIQUE` per
    /// schedule, then per epoch job waiting for its time (WHEN `once`,
    /// SOURCE `client`, soonest first); SOURCE is `client` (days of week
    /// from 0 = Monday) or `config` (cron: 0 = Sunday); NEXT is `-` if it
    /// never fires again.
    pub(crate) fn show_schedules(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for s in self.schedules_view(usize::MAX).schedules {
            escape::push_field(&mut out, &s.handle, Sep::Tab);
            out.push(b'\t');
            escape::push_field(&mut out, &s.function, Sep::Tab);
            out.push(b'\t');
            escape::push_field(&mut out, s.when.as_bytes(), Sep::Tab);
            out.push(b'\t');
            match s.next {
                Some(t) => write_rfc3339(&mut out, t),
                None => out.push(b'-'),
            }
            let source = if s.from_config { "config" } else { "client" };
            let _ = write!(out, "\t{source}\t");
            escape::push_field(&mut out, &s.unique, Sep::Tab);
            out.push(b'\n');
        }
        out.extend_from_slice(text::LIST_END);
        out
    }

    /// Epoch jobs waiting for their time (not jobs waiting out a retry
    /// delay), as `(due, id)`: how many there are, and the `max` due
    /// soonest in due order. Found through the timers, not by walking
    /// every job.
    pub(crate) fn epoch_jobs(&self, max: usize) -> (usize, Vec<(Millis, JobId)>) {
        let scheduled: u64 = self
            .table
            .funcs()
            .iter()
            .flatten()
            .map(|f| u64::from(f.scheduled))
            .sum();
        if scheduled == 0 {
            return (0, Vec::new());
        }
        let mut all: Vec<(Millis, JobId)> = self
            .timers
            .iter()
            .filter_map(|(t, timer)| match timer {
                Timer::Due(id) => Some((t, id)),
                _ => None,
            })
            .filter(|&(t, id)| self.waits_for_epoch(id) == Some(t))
            .collect();
        all.sort_unstable();
        all.dedup();
        let total = all.len();
        all.truncate(max);
        (total, all)
    }

    /// The due time of an epoch job that waits for it (`None` for any
    /// other job, or one waiting out a retry delay).
    fn waits_for_epoch(&self, id: JobId) -> Option<Millis> {
        let job = self.table.get(id)?;
        let retrying = self.history.retrying(id);
        if job.state != JobState::Scheduled || retrying {
            return None;
        }
        job.due()
    }

    /// `drop schedule H` as a typed call (also the HTTP API's): a client's
    /// schedule is removed; an epoch job waiting for its time is cancelled,
    /// as `cancel job H` would; a config schedule is refused.
    pub fn drop_schedule_handle(&mut self, handle: &[u8]) -> Result<Dropped, DropScheduleError> {
        let id = self.handles.id_of(handle);
        match id.and_then(|id| self.schedules.get(&id)) {
            Some(s) if s.from_config => Err(DropScheduleError::InConfig),
            Some(s) => {
                let id = s.id;
                tracing::info!(handle = %String::from_utf8_lossy(handle), "schedule dropped by admin");
                self.remove_schedule(id);
                Ok(Dropped::Schedule)
            }
            None => match self.job_by_handle(handle) {
                Some(id) if self.waits_for_epoch(id).is_some() => {
                    self.cancel_live(id);
                    Ok(Dropped::EpochJob)
                }
                _ => Err(DropScheduleError::Unknown),
            },
        }
    }

    /// `drop schedule H`.
    pub(crate) fn drop_schedule(&mut self, handle: &[u8]) -> &'static [u8] {
        match self.drop_schedule_handle(handle) {
            Ok(_) => text::OK_CRLF,
            Err(DropScheduleError::Unknown) => text::ERR_UNKNOWN_SCHEDULE,
            Err(DropScheduleError::InConfig) => text::ERR_SCHEDULE_IN_CONFIG,
        }
    }
}

/// What [`Core::drop_schedule_handle`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// A client's recurring schedule (jobs it already submitted stay).
    Schedule,
    /// An epoch job waiting for its time: cancelled.
    EpochJob,
}

/// Why [`Core::drop_schedule_handle`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropScheduleError {
    /// No schedule or waiting epoch job has that handle.
    #[error("no schedule or epoch job waiting for its time has that handle")]
    Unknown,
    /// It is declared in the config file.
    #[error("the schedule is declared in the config file: remove it there and reload")]
    InConfig,
}
