//! A worker's side of the model: grabbing jobs and reporting on them.

use super::*;

impl Model {
    pub(super) fn grab(&mut self, s: usize, kind: u8) -> Vec<Effect> {
        let conn = self.slots[s].id;
        self.slots[s].after_exception = None;
        let kind = [GrabKind::Plain, GrabKind::Uniq, GrabKind::All][usize::from(kind) % 3];
        let effects = self.send(conn, Request::Grab(kind));
        assert_eq!(effects.len(), 1, "grab: {effects:?}");
        let Effect::Send(to, r) = &effects[0] else {
            panic!("grab: {effects:?}");
        };
        assert_eq!(to.0, conn);
        if self.slots[s].early {
            return self.early_grab(s, kind, effects);
        }
        // The highest priority any of its functions has queued.
        let abilities = self.slots[s].abilities.clone();
        let best = (0..3).find(|&p| {
            abilities
                .iter()
                .any(|&(f, _)| !self.queues[f][p].is_empty())
        });
        let (h, function, unique, data) = match (kind, r) {
            (_, Response::NoJob) => {
                assert!(best.is_none(), "NO_JOB with work queued: {:?}", self.queues);
                return effects;
            }
            (
                GrabKind::Plain,
                Response::JobAssign {
                    handle,
                    function,
                    data,
                },
            ) => (handle, function, None, data),
            (
                GrabKind::Uniq | GrabKind::All,
                Response::JobAssignUniq {
                    handle,
                    function,
                    unique,
                    data,
                },
            ) => (handle, function, Some(unique), data),
            other => panic!("grab: {other:?}"),
        };
        let id = id_of(h);
        let job = self
            .jobs
            .get(&id)
            .unwrap_or_else(|| panic!("assigned unknown {id}"));
        assert_eq!(job.state, St::Queued, "assigned job {id} was not queued");
        assert_eq!(function, FUNCS[job.func].as_bytes());
        assert_eq!(data, &job.data);
        if let Some(u) = unique {
            assert_eq!(u, job.unique.map_or("", |u| UNIQUES[u]).as_bytes());
        }
        let ability = abilities.iter().find(|a| a.0 == job.func);
        let Some(&(_, timeout)) = ability else {
            panic!(
                "job {id} of {} given to a worker that cannot do it",
                FUNCS[job.func]
            );
        };
        assert_eq!(Some(job.prio), best, "job {id} skipped a higher priority");
        let head = self.queues[job.func][job.prio].pop_front();
        assert_eq!(head, Some(id), "job {id} was not the head of its queue");
        let deadline = timeout.map(|t| self.now + t);
        if let Some(job) = self.jobs.get_mut(&id) {
            job.state = St::Running {
                worker: conn,
                deadline,
            };
        }
        effects
    }

    /// A job for a WORK_* or GET_STATUS: a held one, or any ever made.
    pub(super) fn pick_any(&self, pick: u8) -> u64 {
        let n = self.jobs.len() as u64;
        if n == 0 {
            return 1;
        }
        // One past the last handle names a job that never existed.
        let i = u64::from(pick) % (n + 1);
        self.jobs
            .keys()
            .nth(i as usize)
            .copied()
            .unwrap_or(n + 1000)
    }

    pub(super) fn work(&mut self, s: usize, what: Work, pick: u8, own: bool) -> Vec<Effect> {
        let conn = self.slots[s].id;
        let held = self.held_by(conn);
        let id = if own && !held.is_empty() {
            held[usize::from(pick) % held.len()]
        } else {
            self.pick_any(pick)
        };
        let h = handle(id);
        let holds = held.contains(&id);
        let after = self.slots[s].after_exception.take();
        let data = Bytes::from_static(b"r");
        let req = match what {
            Work::Complete => Request::WorkComplete {
                handle: h.clone(),
                data: data.clone(),
            },
            Work::Fail => Request::WorkFail { handle: h.clone() },
            Work::Exception => Request::WorkException {
                handle: h.clone(),
                data: data.clone(),
            },
            Work::Data => Request::WorkData {
                handle: h.clone(),
                data: data.clone(),
            },
            Work::Warning => Request::WorkWarning {
                handle: h.clone(),
                data: data.clone(),
            },
            Work::Status => Request::work_status(
                h.clone(),
                Bytes::from_static(b"1"),
                Bytes::from_static(b"2"),
            ),
        };
        // A WORK_FAIL right after the WORK_EXCEPTION of the same job is
        // its second half: no answer, nothing changes.
        if matches!(what, Work::Fail) && after == Some(id) && !holds {
            let effects = self.send(conn, req);
            assert!(effects.is_empty(), "{effects:?}");
            return effects;
        }
        let clients = self
            .jobs
            .get(&id)
            .map(|j| j.clients.clone())
            .unwrap_or_default();
        let effects = self.send(conn, req);
        if !holds {
            assert_eq!(effects.len(), 1, "{effects:?}");
            assert!(
                matches!(&effects[0], Effect::Send(c, Response::Error { code, .. })
                    if c.0 == conn && code[..] == b"JOB_NOT_FOUND"[..]),
                "work on a job {id} not held: {effects:?}"
            );
            return effects;
        }
        match what {
            Work::Complete | Work::Fail => self.finish_told(id),
            Work::Exception => {
                self.slots[s].after_exception = Some(id);
                // Clients that asked for exceptions get WORK_EXCEPTION, the
                // rest WORK_FAIL (checked in check_terminals).
                self.finish_told(id);
            }
            Work::Data | Work::Warning | Work::Status => {
                // Forwarded once per attached client, nothing else.
                let mut to: Vec<u64> = effects
                    .iter()
                    .map(|e| match e {
                        Effect::Send(c, r) if forwarded(r, &h) => c.0,
                        other => panic!("work update: unexpected {other:?}"),
                    })
                    .collect();
                let mut want = clients;
                to.sort_unstable();
                want.sort_unstable();
                assert_eq!(to, want, "work update recipients");
            }
        }
        effects
    }
}
