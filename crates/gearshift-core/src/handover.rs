//! Functions moving between the nodes of a partitioned cluster while the
//! core runs: [`Core::hand_over`] forgets every trace of the functions whose
//! partitions another node now owns (its store has their rows, so nothing
//! goes to this store), and [`Core::take_over`] takes on the stored state of
//! partitions arriving, as a restart would restore it. The server stops
//! submissions to the functions leaving and waits for
//! [`Core::hand_over_pending`] to come to nothing before handing them over.

use bytes::Bytes;
use gearshift_persist::{DeadMark, FunctionRecord, JobRecord, KeptRecord, ScheduleRecord};
use gearshift_proto::Response;

use crate::engine::Core;
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::{JobState, Persist};
use crate::timers::Timer;
use crate::Millis;

/// Stored state of partitions a running core takes on (what a store
/// replays for them).
#[derive(Debug, Default)]
pub struct TakenOver {
    /// Live jobs, in id order.
    pub jobs: Vec<JobRecord>,
    /// The dead set.
    pub dead: Vec<(JobRecord, DeadMark)>,
    /// Recurring jobs.
    pub schedules: Vec<ScheduleRecord>,
    /// Finished jobs kept queryable.
    pub kept: Vec<KeptRecord>,
    /// Function settings (paused, queue limits).
    pub functions: Vec<FunctionRecord>,
    /// Runs cut off on their last owner (counted as lost with their worker).
    pub running: Vec<JobId>,
}

/// What still holds up a hand-over of some functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandOverPending {
    /// Jobs a worker holds (also ones cancelled while running).
    pub running: usize,
    /// Jobs not running that a client waits on (foreground).
    pub foreground: usize,
    /// Jobs and client schedules whose write the store has not confirmed.
    pub unacked: usize,
}

impl HandOverPending {
    /// Nothing holds the hand-over up.
    pub fn is_clear(&self) -> bool {
        *self == HandOverPending::default()
    }
}

impl Core {
    /// For the functions `gone` names: jobs running, foreground jobs waiting
    /// (not running, with a client waiting), and submissions still waiting
    /// for the store's confirmation. Costs a pass over every job while the
    /// functions have any ([`Core::running_in`] is the cheap first test).
    pub fn hand_over_pending(&self, gone: &dyn Fn(&[u8]) -> bool) -> HandOverPending {
        let funcs = self.gone_functions(gone);
        let mut p = HandOverPending::default();
        let jobs: u32 = (self.table.funcs().iter().zip(&funcs))
            .filter_map(|(f, &g)| f.as_ref().filter(|_| g))
            .map(|f| f.total)
            .sum();
        if jobs > 0 {
            for job in self.table.iter().filter(|j| funcs[j.func()]) {
                let held = matches!(job.state, JobState::Running | JobState::Cancelled);
                p.running += usize::from(held);
                p.foreground += usize::from(!held && !job.clients.is_empty());
                p.unacked += usize::from(job.persist == Persist::Pending);
            }
        }
        p.unacked += self
            .schedules
            .values()
            .filter(|s| gone(&s.function) && self.acks.waits(s.id))
            .count();
        p
    }

    /// Jobs that workers hold in the functions `gone` names, from the
    /// functions' counts (no pass over the jobs).
    pub fn running_in(&self, gone: &dyn Fn(&[u8]) -> bool) -> usize {
        (self.table.funcs().iter().flatten())
            .filter(|f| gone(&f.name))
            .map(|f| f.running as usize)
            .sum()
    }

    /// Forgets function `name` when nothing of it is left here: no job,
    /// worker, early taker or schedule. A partitioned node that no longer
    /// serves a function is left such an entry when a worker's CAN_DO
    /// raced the move and its CANT_DO followed; kept, it would be listed
    /// beside the owner's. Whether it was forgotten.
    pub fn forget_if_empty(&mut self, name: &[u8]) -> bool {
        let Some(id) = self.table.func_named(name) else {
            return false;
        };
        let empty = (self.table.func(id))
            .is_some_and(|f| f.total == 0 && f.workers == 0 && f.early_takers == 0);
        if !empty || self.schedules.values().any(|s| s.function == name) {
            return false;
        }
        self.table.drop_function(id);
        true
    }

    /// The functions `which` names that connection `conn` can do: those a
    /// partitioned node may forget once the connection gives them up.
    pub fn abilities_named(&self, conn: ConnId, which: &dyn Fn(&[u8]) -> bool) -> Vec<Bytes> {
        let Some(c) = self.conns.get(conn) else {
            return Vec::new();
        };
        (c.abilities().iter())
            .filter_map(|a| self.table.func(a.func))
            .filter(|f| which(&f.name))
            .map(|f| f.name.clone())
            .collect()
    }

    /// Hands out no job of the functions `gone` names from now on, ahead of
    /// their hand-over, so their running jobs can only come to an end.
    pub fn hold_for_hand_over(&mut self, gone: &dyn Fn(&[u8]) -> bool) {
        let funcs = self.gone_functions(gone);
        for (f, _) in funcs.iter().enumerate().filter(|(_, &g)| g) {
            if let Some(f) = self.table.func_mut(f) {
                f.moving = true;
            }
        }
    }

    /// Forgets everything of the functions `gone` names (their partitions
    /// now belong to another node, whose store has their rows): no store op
    /// at all. A client waiting on a job that has not run hears it moved
    /// (`ERROR JOB_MOVED`, the handle: its node's splitter submits it again
    /// to the new owner); one waiting on a running job gets WORK_FAIL; a
    /// worker running one loses it silently (its WORK_* then names an
    /// unknown handle); a submitter owed JOB_CREATED gets QUEUE_ERROR.
    /// Returns the jobs forgotten.
    pub fn hand_over(&mut self, gone: &dyn Fn(&[u8]) -> bool, now: Millis) -> usize {
        self.now = self.now.max(now);
        let funcs = self.gone_functions(gone);
        let ids: Vec<JobId> = match funcs.contains(&true) {
            true => self
                .table
                .iter()
                .filter(|j| funcs[j.func()])
                .map(|j| j.id)
                .collect(),
            false => Vec::new(),
        };
        for &id in &ids {
            let handle = self.handles.of(id);
            let ran = self
                .table
                .get(id)
                .is_some_and(|j| matches!(j.state, JobState::Running | JobState::Cancelled));
            for &c in &self.table.take_clients(id) {
                self.conns.stop_waiting(c, id);
                let answer = match ran {
                    true => Response::WorkFail(handle.clone()),
                    false => Response::error(crate::split::JOB_MOVED, handle.clone()),
                };
                self.send(c, answer);
            }
            self.forget_job(id, true);
        }
        self.forget_schedules(gone);
        self.retained.forget_functions(gone);
        let (table, schedules) = (&self.table, &self.schedules);
        self.timers.retain(|t| match t {
            Timer::Due(id) | Timer::Timeout(id, _) => table.contains(id),
            Timer::Fire(id, _) => schedules.contains_key(&id),
        });
        // Workers give the functions up as CANT_DO would, then they go.
        let is_gone = |f: FuncId| funcs.get(f).copied().unwrap_or(false);
        let workers: Vec<_> = self
            .conns
            .iter()
            .filter(|(_, c)| c.abilities().iter().any(|a| is_gone(a.func)))
            .map(|(c, _)| c)
            .collect();
        for c in workers {
            self.drop_abilities(c, is_gone);
        }
        for (f, _) in funcs.iter().enumerate().filter(|(_, &g)| g) {
            self.table.drop_function(f);
        }
        tracing::info!(jobs = ids.len(), "functions handed over to another node");
        ids.len()
    }

    /// Takes on stored state of partitions while running, as a restart
    /// would restore it, without moving the handle counter (the ids come
    /// from other nodes' blocks). Functions may exist already (a worker's
    /// CAN_DO came first): their sleeping workers are woken for the jobs.
    pub fn take_over(&mut self, t: TakenOver, now: Millis) {
        self.now = self.now.max(now);
        // Settings first: a paused function's jobs wake nobody.
        self.restore_functions(t.functions);
        // A job still live here is this node's already (ids are unique).
        let jobs = t.jobs.into_iter().filter(|j| !self.table.contains(j.id));
        self.adopt_jobs(jobs.collect(), now);
        self.adopt_dead(t.dead);
        // Config-file schedules are not applied again here: the ones the
        // store holds come back as they were; a reload puts the file's in force.
        self.adopt_schedules(t.schedules);
        self.adopt_kept(t.kept);
        self.restore_cut_off_runs(&t.running, now);
    }

    /// Which function ids `gone` names (indexed by id).
    fn gone_functions(&self, gone: &dyn Fn(&[u8]) -> bool) -> Vec<bool> {
        let funcs = self.table.funcs().iter();
        funcs
            .map(|f| f.as_ref().is_some_and(|f| gone(&f.name)))
            .collect()
    }

    /// Forgets the schedules of the functions `gone` names; a submitter
    /// still owed JOB_CREATED for one hears it moved.
    fn forget_schedules(&mut self, gone: &dyn Fn(&[u8]) -> bool) {
        let ids: Vec<JobId> = (self.schedules.values())
            .filter(|s| gone(&s.function))
            .map(|s| s.id)
            .collect();
        for id in ids {
            self.schedules.remove(&id);
            for &c in &self.acks.take(id).unwrap_or_default() {
                self.resolve_ack(c, id, crate::acks::moved());
            }
            self.handles.forget(id);
        }
    }
}
