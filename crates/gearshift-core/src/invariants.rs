//! The core's invariants, checked from scratch: every counter matches a
//! recount of the jobs (or of the connections' abilities), every running job has exactly one holder that lists
//! it, every waiting client is attached to its job, and side tables name
//! only live jobs. Tests run it after every step (the model test, the
//! lifecycle scenarios); it costs a pass over every job.

use crate::engine::Core;
use crate::job::{JobState, Persist};

impl Core {
    /// Checks every invariant; the first broken one is described.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut counts = vec![([0u32; 3], 0u32, 0u32, 0u32); self.table.funcs().len()];
        let mut bytes = 0u64;
        for job in self.table.iter() {
            bytes += job.held_bytes();
            let f = job.func();
            let Some(c) = counts.get_mut(f).filter(|_| self.table.func(f).is_some()) else {
                return Err(format!("job {} names missing function {f}", job.id));
            };
            c.3 += 1;
            match job.state {
                JobState::Queued => c.0[job.priority.index()] += 1,
                JobState::Scheduled => c.1 += 1,
                JobState::Running | JobState::Cancelled => c.2 += 1,
                JobState::Pending => {}
            }
            let held = matches!(job.state, JobState::Running | JobState::Cancelled);
            match (held, self.table.run(job.id)) {
                (true, Some(run)) => {
                    // A held job's worker may be gone only if it is being reaped.
                    if let Some(w) = self.conns.get(run.worker) {
                        if w.held().iter().filter(|&&j| j == job.id).count() != 1 {
                            return Err(format!("job {} not listed once by its worker", job.id));
                        }
                    }
                }
                (true, None) => return Err(format!("running job {} has no run", job.id)),
                (false, Some(_)) => return Err(format!("idle job {} has a run", job.id)),
                (false, None) => {}
            }
            for client in &job.clients {
                let waits = self.conns.get(*client).is_some_and(|c| c.waits_on(job.id));
                if !waits {
                    return Err(format!(
                        "job {} lists client {} that does not wait on it",
                        job.id, client.0
                    ));
                }
            }
            if job.state == JobState::Pending && job.persist != Persist::Pending {
                return Err(format!(
                    "pending job {} is not waiting for the store",
                    job.id
                ));
            }
        }
        if bytes != self.table.bytes() {
            return Err(format!(
                "job_bytes is {} but the jobs hold {bytes}",
                self.table.bytes()
            ));
        }
        let mut workers = vec![(0u32, 0u32); self.table.funcs().len()];
        for (cid, c) in self.conns.iter() {
            for a in c.abilities() {
                match workers
                    .get_mut(a.func)
                    .filter(|_| self.table.func(a.func).is_some())
                {
                    Some(n) => {
                        n.0 += 1;
                        n.1 += u32::from(c.epoch_early());
                    }
                    None => {
                        return Err(format!("conn {} can do missing function {}", cid.0, a.func))
                    }
                }
            }
        }
        for (i, f) in self.table.funcs().iter().enumerate() {
            let Some(f) = f else { continue };
            if (f.workers, f.early_takers) != workers[i] {
                return Err(format!(
                    "function {:?}: ({} workers, {} early takers) counted but connections say {:?}",
                    String::from_utf8_lossy(&f.name),
                    f.workers,
                    f.early_takers,
                    workers[i]
                ));
            }
            if f.early_takers == 0 && !f.early.is_empty() {
                return Err(format!(
                    "function {:?}: epoch jobs offered early with no early taker",
                    String::from_utf8_lossy(&f.name)
                ));
            }
            let (queued, scheduled, running, total) = counts[i];
            if (f.queued, f.scheduled, f.running, f.total) != (queued, scheduled, running, total) {
                return Err(format!(
                    "function {:?}: counters (queued {:?}, scheduled {}, running {}, total {}) but jobs say ({queued:?}, {scheduled}, {running}, {total})",
                    String::from_utf8_lossy(&f.name),
                    f.queued,
                    f.scheduled,
                    f.running,
                    f.total
                ));
            }
        }
        for (id, run) in self.table.runs() {
            if !self.table.contains(id) {
                return Err(format!(
                    "run of job {id} (worker {}) outlived the job",
                    run.worker.0
                ));
            }
        }
        for (cid, c) in self.conns.iter() {
            let cid = cid.0;
            for id in c.waiting() {
                let attached = self
                    .table
                    .get(id)
                    .is_some_and(|j| j.clients.as_slice().iter().any(|x| x.0 == cid));
                if !attached {
                    return Err(format!(
                        "conn {cid} waits on job {id}, which does not list it"
                    ));
                }
            }
            for &id in c.held() {
                if self.table.run(id).is_none_or(|r| r.worker.0 != cid) {
                    return Err(format!("conn {cid} holds job {id} it does not run"));
                }
            }
        }
        for id in self.history.ids() {
            if !self.table.contains(id) {
                return Err(format!("history of job {id} outlived the job"));
            }
        }
        for &id in self.retained.dead.keys() {
            if self.table.contains(id) {
                return Err(format!("job {id} is both live and dead"));
            }
        }
        Ok(())
    }
}
