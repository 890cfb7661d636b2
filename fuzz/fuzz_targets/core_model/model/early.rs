//! Early takers (OPTION_REQ epoch-early): the epoch jobs offered to them,
//! their grabs; and OPTION_REQ stats.

use super::*;

impl Model {
    /// Workers of `func` that take epoch jobs early.
    fn early_takers(&self, func: usize) -> usize {
        let takes = |c: &&MConn| c.early && c.abilities.iter().any(|a| a.0 == func);
        self.slots.iter().filter(takes).count()
    }

    /// Offers an epoch job waiting for its time to its function's early
    /// takers, if it has any.
    pub(super) fn offer_early(&mut self, id: u64) {
        let func = self.jobs[&id].func;
        if self.early_takers(func) > 0 {
            self.offered[func].push_back(id);
        }
    }

    /// A function with no early taker left drops its offers.
    pub(super) fn prune_offers(&mut self) {
        for f in 0..FUNCS.len() {
            if self.early_takers(f) == 0 {
                self.offered[f].clear();
            }
        }
    }

    /// The first early taker of `func` is offered the epoch jobs already
    /// waiting for their time, soonest first.
    pub(super) fn early_taker_joined(&mut self, func: usize) {
        if self.early_takers(func) != 1 {
            return;
        }
        let mut waiting: Vec<(u64, u64)> = Vec::new();
        for (&id, j) in &self.jobs {
            if let St::Scheduled(t) = j.state {
                if j.func == func {
                    waiting.push((t, id));
                }
            }
        }
        waiting.sort_unstable();
        self.offered[func].extend(waiting.into_iter().map(|w| w.1));
    }

    /// An early taker's GRAB: along its functions, newest first, the first
    /// offer still waiting for its time (stale ones are dropped on the way).
    pub(super) fn early_grab(
        &mut self,
        s: usize,
        kind: GrabKind,
        effects: Vec<Effect>,
    ) -> Vec<Effect> {
        let abilities = self.slots[s].abilities.clone();
        let mut offer = None;
        'funcs: for &(f, timeout) in &abilities {
            while let Some(id) = self.offered[f].pop_front() {
                if matches!(self.jobs[&id].state, St::Scheduled(_)) && self.jobs[&id].func == f {
                    offer = Some((id, timeout));
                    break 'funcs;
                }
            }
        }
        let Effect::Send(_, r) = &effects[0] else {
            panic!("grab: {effects:?}");
        };
        let got = match (kind, r) {
            (_, Response::NoJob) => None,
            (GrabKind::Plain, Response::JobAssign { handle, .. }) => Some(id_of(handle)),
            (GrabKind::Uniq | GrabKind::All, Response::JobAssignUniq { handle, .. }) => {
                Some(id_of(handle))
            }
            other => panic!("early grab: {other:?}"),
        };
        assert_eq!(got, offer.map(|o| o.0), "early taker's grab: {effects:?}");
        if let Some((id, timeout)) = offer {
            let worker = self.slots[s].id;
            let deadline = timeout.map(|t| self.now + t);
            let job = self.jobs.get_mut(&id).expect("job");
            job.state = St::Running { worker, deadline };
        }
        effects
    }

    /// OPTION_REQ epoch-early: answered, and (asked the first time) the
    /// epoch jobs waiting for functions it is the first early taker of are
    /// offered; the rest can only wake sleepers.
    pub(super) fn epoch_early(&mut self, s: usize) -> Vec<Effect> {
        let conn = &mut self.slots[s];
        conn.after_exception = None;
        let id = conn.id;
        if !conn.early {
            conn.early = true;
            let funcs: Vec<usize> = conn.abilities.iter().map(|a| a.0).collect();
            for f in funcs {
                self.early_taker_joined(f);
            }
        }
        let name = Bytes::from_static(b"epoch-early");
        let effects = self.send(id, Request::Option(name.clone()));
        let answer = Effect::Send(ConnId(id), Response::OptionRes(name));
        assert_eq!(
            effects.iter().filter(|e| **e == answer).count(),
            1,
            "{effects:?}"
        );
        for e in effects.iter().filter(|e| **e != answer) {
            assert!(matches!(e, Effect::Send(_, Response::Noop)), "{effects:?}");
        }
        effects
    }

    /// OPTION_REQ stats: valid figures are kept and answered, malformed
    /// ones refused with the last figures left as they were.
    pub(super) fn stats(
        &mut self,
        s: usize,
        cpu_ms: u16,
        rss: u16,
        malformed: bool,
    ) -> Vec<Effect> {
        let conn = &mut self.slots[s];
        conn.after_exception = None;
        let id = conn.id;
        let (cpu, rss) = (u64::from(cpu_ms), u64::from(rss));
        let text = match malformed {
            false => format!("stats cpu={}.{:03} rss={rss}", cpu / 1000, cpu % 1000),
            true => format!("stats cpu={cpu} rss=-{rss}"),
        };
        let text = Bytes::from(text);
        let want = match malformed {
            false => {
                conn.stats = Some((cpu, rss));
                Response::OptionRes(text.clone())
            }
            true => Response::error("INVALID_ARGUMENT", "stats takes cpu=SECONDS rss=KIB"),
        };
        let effects = self.send(id, Request::Option(text));
        assert_eq!(effects, [Effect::Send(ConnId(id), want)]);
        effects
    }
}
