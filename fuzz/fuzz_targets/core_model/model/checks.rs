//! What the core and the model must agree on after every step.

use gearshift_core::Effect;
use gearshift_proto::{Request, Response};

use super::{handle, id_of, Model, St, OBSERVER};

impl Model {
    /// Terminal packets (WORK_COMPLETE, WORK_FAIL, WORK_EXCEPTION) went
    /// exactly to the clients of the jobs that ended, once per submission.
    pub(super) fn check_terminals(&self, effects: &[Effect]) {
        let mut got: Vec<(u64, u64)> = Vec::new();
        for e in effects {
            let Effect::Send(c, r) = e else { continue };
            let (h, exception) = match r {
                Response::WorkComplete { handle, .. } | Response::WorkFail(handle) => {
                    (handle, false)
                }
                Response::WorkException { handle, .. } => (handle, true),
                _ => continue,
            };
            let id = id_of(h);
            if exception {
                assert!(
                    self.wants_exception(c.0),
                    "WORK_EXCEPTION to {} unasked",
                    c.0
                );
            }
            got.push((c.0, id));
        }
        let mut want = self.expect_terminal.clone();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "terminal packets in {effects:?}");
        // No step may touch the store: this core has none.
        assert!(!effects.iter().any(|e| matches!(e, Effect::Store(_))));
    }

    pub(super) fn check_status(&self, e: &Effect, id: u64) {
        let Effect::Send(_, Response::StatusRes { known, running, .. }) = e else {
            panic!("status: {e:?}");
        };
        let (k, r) = match self.jobs.get(&id).map(|j| j.state) {
            None | Some(St::Done) => (false, false),
            Some(St::Running { .. }) => (true, true),
            Some(_) => (true, false),
        };
        assert_eq!(
            (*known, *running),
            (k, r),
            "status of job {id}: {:?}",
            self.jobs.get(&id)
        );
    }

    /// The core's own invariants, then the model's view of every job.
    pub(super) fn check_core(&mut self) {
        if let Err(e) = self.core.check_invariants() {
            panic!("core invariant broken: {e}");
        }
        let live = self.jobs.values().filter(|j| j.state != St::Done).count();
        let running = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, St::Running { .. }))
            .count();
        assert_eq!(self.core.job_count(), live, "job count");
        assert_eq!(self.core.running_jobs(), running as u64, "running jobs");
        for v in self.core.workers_view() {
            let stats = self
                .slots
                .iter()
                .find(|c| c.id == v.id)
                .and_then(|c| c.stats);
            let shown = v.stats.map(|s| (s.cpu_ms, s.max_rss_kib));
            assert_eq!(shown, stats, "stats of worker {}", v.id);
        }
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        for id in ids {
            let job = &self.jobs[&id];
            if let St::Running { worker, .. } = job.state {
                let conn = self.slots.iter().find(|c| c.id == worker);
                let can = conn.is_some_and(|c| c.abilities.iter().any(|a| a.0 == job.func));
                assert!(can, "job {id} runs on {worker}, which cannot do it");
            }
            let queued = self.queues[job.func][job.prio]
                .iter()
                .filter(|&&j| j == id)
                .count();
            assert_eq!(
                queued,
                usize::from(job.state == St::Queued),
                "job {id} in queue"
            );
            let effects = self.send(OBSERVER, Request::GetStatus(handle(id)));
            assert_eq!(effects.len(), 1, "{effects:?}");
            self.check_status(&effects[0], id);
        }
    }
}
