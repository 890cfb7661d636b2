//! The worker side: abilities (CAN_DO, CANT_DO, RESET_ABILITIES, with the
//! held jobs a dropped function takes back), sleeping (PRE_SLEEP) and waking
//! sleepers when work arrives. Taking and running jobs is [`crate::run`].

use bytes::Bytes;
use gearshift_proto::Response;

use crate::conn::Ability;
use crate::engine::Core;
use crate::ids::{ConnId, FuncId, JobId};
use crate::policy::Reason;

impl Core {
    pub(crate) fn can_do(&mut self, conn: ConnId, name: Bytes, timeout_ms: Option<u64>) {
        let func = self.table.function_id(&name, &self.policies);
        let Some(added) = self.conns.add_ability(conn, Ability { func, timeout_ms }) else {
            return;
        };
        if added.first && self.wants(crate::events::Kind::WorkerJoined) {
            self.worker_joined(conn);
        }
        if added.new {
            let early = self.conns.get(conn).is_some_and(|c| c.epoch_early());
            self.table.ability_added(func, early);
            if let Some(f) = self.table.func_mut(func).filter(|_| added.asleep) {
                f.sleepers_of(early).push_back(conn);
            }
            if early {
                self.early_taker_joined(func);
            }
        }
    }

    pub(crate) fn cant_do(&mut self, conn: ConnId, name: &Bytes) {
        let Some(func) = self.table.func_named(name) else {
            return;
        };
        self.drop_abilities(conn, |f| f == func);
    }

    pub(crate) fn reset_abilities(&mut self, conn: ConnId) {
        self.drop_abilities(conn, |_| true);
    }

    pub(crate) fn drop_abilities(&mut self, conn: ConnId, which: impl Fn(FuncId) -> bool) {
        let left = match self.conns.get(conn) {
            Some(c) if self.wants(crate::events::Kind::WorkerLeft) && !c.abilities().is_empty() => {
                Some(self.worker_ref(conn, c))
            }
            _ => None,
        };
        let Some(c) = self.conns.get(conn) else {
            return;
        };
        let held: Vec<JobId> = c.held().to_vec();
        let early = c.epoch_early();
        let dropped = self.conns.drop_abilities(conn, which);
        let none_left = self
            .conns
            .get(conn)
            .is_some_and(|c| c.abilities().is_empty());
        if let Some(w) = left.filter(|_| none_left) {
            // It dropped its last function: no longer a worker.
            self.push_event(crate::events::EventKind::WorkerLeft(w));
        }
        self.table.abilities_dropped(&dropped, early);
        for job in held {
            if self
                .table
                .get(job)
                .is_some_and(|j| dropped.iter().any(|a| a.func == j.func()))
            {
                self.requeue(job, Reason::WorkerLost, "worker gave up the function");
            }
        }
    }

    pub(crate) fn pre_sleep(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(conn) else {
            return;
        };
        let early = c.epoch_early();
        let ready = c.abilities().iter().any(|a| {
            self.table.func(a.func).is_some_and(|f| match early {
                true => f.has_early_work(),
                false => f.has_work(),
            })
        });
        self.conns.sleep(conn, ready);
        if ready {
            self.send(conn, Response::Noop);
        } else {
            self.enlist_sleeper(conn);
        }
    }
}

/// Waking sleepers.
impl Core {
    /// NOOPs up to `--worker-wakeup` sleeping workers of `func` (0 = all).
    pub(crate) fn wake_sleepers(&mut self, func: FuncId) {
        let limit = match self.cfg.worker_wakeup {
            0 => usize::MAX,
            n => n as usize,
        };
        let mut woken = 0;
        while woken < limit {
            let Some(w) = self
                .table
                .func_mut(func)
                .and_then(|f| f.sleepers.pop_front())
            else {
                break;
            };
            if !self.conns.noop(w, func, false) {
                continue;
            }
            woken += 1;
            self.send(w, gearshift_proto::Response::Noop);
        }
    }

    /// Puts a sleeping worker on the wake lists of all its functions.
    pub(crate) fn enlist_sleeper(&mut self, conn: ConnId) {
        let Core { conns, table, .. } = self;
        let Some(c) = conns.get(conn) else {
            return;
        };
        let early = c.epoch_early();
        for a in c.abilities() {
            let func = a.func;
            let Some(f) = table.func_mut(func) else {
                continue;
            };
            let list = f.sleepers_of(early);
            list.push_back(conn);
            // Stale entries pile up when a worker sleeps again and again on a
            // function that never gets jobs; compact once they outnumber
            // the function's workers.
            if list.len() > 2 * f.workers as usize + 16 {
                let list = f.sleepers_of(early);
                let mut seen = crate::ids::IdSet::default();
                list.retain(|c| seen.insert(c.0));
                list.retain(|&c| conns.wakeable_for(c, func));
            }
        }
    }
}
