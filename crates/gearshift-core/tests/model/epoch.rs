//! The model's rules for epoch jobs, early takers (OPTION_REQ epoch-early),
//! the clock, and OPTION_REQ `stats`.

use gearshift_proto::{Request, Response};

use crate::common::b;
use crate::ops::{FUNCS, STATS};
use crate::state::Model;

impl Model {
    /// Workers of `func` that take epoch jobs early.
    pub(crate) fn early_takers(&self, func: usize) -> usize {
        let early = |c: &&crate::state::MConn| c.early && c.can(func);
        self.conns.values().filter(early).count()
    }

    /// NOOPs the early takers of `func` asleep and not yet NOOPed.
    pub(crate) fn wake_early(&mut self, func: usize) {
        let woken: Vec<u64> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| c.sleeping && !c.noop_sent && c.can(func) && c.early)
            .map(|(&id, c)| {
                c.noop_sent = true;
                id
            })
            .collect();
        for c in woken {
            self.send(c, Response::Noop);
        }
    }

    /// A new job's place: queued (waking plain sleepers), or, due in the
    /// future, waiting for its time and offered to early takers.
    pub(crate) fn place(&mut self, id: u64, due: Option<u64>) {
        let job = self.jobs.get_mut(&id).expect("job");
        job.due = due;
        let (func, prio) = (job.func, job.prio);
        if due.is_some() {
            job.scheduled = true;
            self.offer_early(id);
        } else {
            self.queues[func][prio].push_back(id);
            self.wake(func);
        }
    }

    /// Offers a waiting epoch job to its function's early takers, if any.
    pub(crate) fn offer_early(&mut self, id: u64) {
        let func = self.jobs[&id].func;
        if self.early_takers(func) > 0 {
            self.offered[func].push_back(id);
            self.wake_early(func);
        }
    }

    /// A function with no early taker left drops its offers: the jobs
    /// simply wait for their time.
    pub(crate) fn prune_offers(&mut self) {
        for f in 0..FUNCS.len() {
            if self.early_takers(f) == 0 {
                self.offered[f].clear();
            }
        }
    }

    /// The first early taker of `func` is offered the epoch jobs already
    /// waiting, soonest first.
    pub(crate) fn early_taker_joined(&mut self, func: usize) {
        if self.early_takers(func) != 1 {
            return;
        }
        let mut waiting: Vec<(u64, u64)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.scheduled && j.func == func)
            .map(|(&id, j)| (j.due.expect("scheduled job has a due time"), id))
            .collect();
        if waiting.is_empty() {
            return;
        }
        waiting.sort_unstable();
        self.offered[func].extend(waiting.into_iter().map(|w| w.1));
        self.wake_early(func);
    }

    /// A job a worker lost: waits for its time again (offered early) if
    /// that is still ahead, else back in its queue where its number puts
    /// it (ahead of every later job), waking plain sleepers.
    pub(crate) fn back_in_line(&mut self, id: u64) {
        let now = self.w.now;
        let job = self.jobs.get_mut(&id).expect("job");
        if job.due.is_some_and(|d| d > now) {
            job.scheduled = true;
            return self.offer_early(id);
        }
        let (func, prio) = (job.func, job.prio);
        let q = &mut self.queues[func][prio];
        let at = q.iter().position(|&j| j > id).unwrap_or(q.len());
        q.insert(at, id);
        self.wake(func);
    }

    /// The job an early taker's GRAB gets: along its functions, newest
    /// first, the first offer still waiting for its time (stale ones are
    /// skipped and dropped on the way).
    pub(crate) fn take_offer(&mut self, c: u64) -> Option<u64> {
        let funcs: Vec<usize> = self.conns[&c].abilities.iter().map(|a| a.0).collect();
        for f in funcs {
            while let Some(id) = self.offered[f].pop_front() {
                if self
                    .jobs
                    .get(&id)
                    .is_some_and(|j| j.scheduled && j.func == f)
                {
                    return Some(id);
                }
            }
        }
        None
    }

    /// The clock moves: timers fire in the core's order (by time, a due
    /// time before a run time limit, then by job), each seeing the new time.
    pub(crate) fn advance(&mut self, ms: u64) {
        let now = self.w.now + ms;
        let mut fired: Vec<(u64, u8, u64)> = Vec::new();
        for (&id, j) in &self.jobs {
            if let Some(d) = j.due.filter(|&d| j.scheduled && d <= now) {
                fired.push((d, 0, id));
            }
            if let Some(d) = j.deadline.filter(|&d| !j.cancelled && d <= now) {
                fired.push((d, 1, id));
            }
        }
        fired.sort_unstable();
        self.w.now = now;
        for (_, kind, id) in fired {
            if kind == 1 {
                self.requeue(id);
                continue;
            }
            // Due: queued behind the jobs already waiting.
            let job = self.jobs.get_mut(&id).expect("job");
            job.scheduled = false;
            let (func, prio) = (job.func, job.prio);
            self.queues[func][prio].push_back(id);
            self.wake(func);
        }
        self.w.advance_to(now);
    }

    /// OPTION_REQ epoch-early: from now on the worker takes only epoch jobs
    /// not yet due; asking twice counts once.
    pub(crate) fn epoch_early(&mut self, slot: usize) {
        let c = self.slots[slot];
        self.touch(c);
        let conn = self.conns.get_mut(&c).expect("conn");
        if !conn.early {
            conn.early = true;
            let funcs: Vec<usize> = conn.abilities.iter().map(|a| a.0).collect();
            for f in funcs {
                self.early_taker_joined(f);
            }
        }
        self.send(c, Response::OptionRes(b("epoch-early")));
        self.w.req(c, Request::Option(b("epoch-early")));
    }

    /// OPTION_REQ `stats`: kept and answered when valid, else refused with
    /// the figures left as they were.
    pub(crate) fn stats(&mut self, slot: usize, pick: usize) {
        let c = self.slots[slot];
        self.touch(c);
        let (text, figures) = STATS[pick];
        match figures {
            Some(f) => {
                self.conns.get_mut(&c).expect("conn").stats = Some(f);
                self.send(c, Response::OptionRes(b(text)));
            }
            None => self.send(
                c,
                Response::error("INVALID_ARGUMENT", "stats takes cpu=SECONDS rss=KIB"),
            ),
        }
        self.w.req(c, Request::Option(b(text)));
    }
}
