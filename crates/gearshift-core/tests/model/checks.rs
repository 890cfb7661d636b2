//! What the model checks rather than predicts: grabs (against the
//! scheduling rules), work results, terminal-packet tallies, the admin
//! listings after every step, and the final drain.

use bytes::Bytes;
use gearshift_proto::{GrabKind, Request, Response};

use crate::common::{b, table, Out};
use crate::ops::{Op, Work, FUNCS, SLOTS};
use crate::state::{id_of, MJob, Model};

impl Model {
    /// A plain worker's grab is checked, not predicted: the job handed out
    /// must head the queue of one of its functions at the best priority
    /// queued for any of them. An early taker's is predicted exactly.
    pub(crate) fn grab(&mut self, slot: usize, kind: usize) {
        let c = self.slots[slot];
        self.touch(c);
        let kind = [GrabKind::Plain, GrabKind::Uniq, GrabKind::All][kind];
        self.w.req(c, Request::Grab(kind));
        let actual = self.w.take_all();
        let conn = self.conns.get_mut(&c).expect("conn");
        conn.sleeping = false;
        let offer = match self.conns[&c].early {
            true => Some(self.take_offer(c)),
            false => None,
        };
        // The head of each queue it can take from, with its priority.
        let mut candidates: Vec<(usize, u64)> = Vec::new();
        for &(f, _) in self.conns[&c].abilities.iter().filter(|_| offer.is_none()) {
            for (p, q) in self.queues[f].iter().enumerate() {
                candidates.extend(q.front().map(|&id| (p, id)));
            }
        }
        assert_eq!(actual.len(), 1, "grab answered with {actual:?}");
        assert_eq!(actual[0].0, c);
        let Out::Packet(r) = &actual[0].1 else {
            panic!("grab answered with {actual:?}");
        };
        let handle = match (r, kind) {
            (Response::NoJob, _) => {
                assert!(candidates.is_empty(), "NO_JOB with {candidates:?} queued");
                assert!(
                    !matches!(offer, Some(Some(_))),
                    "NO_JOB with {offer:?} offered"
                );
                return;
            }
            (
                Response::JobAssign {
                    handle,
                    function,
                    data,
                },
                GrabKind::Plain,
            ) => {
                let j = &self.jobs[&id_of(handle)];
                assert_eq!((function, data), (&b(FUNCS[j.func]), &j.data));
                handle.clone()
            }
            (
                Response::JobAssignUniq {
                    handle,
                    function,
                    unique,
                    data,
                },
                GrabKind::Uniq | GrabKind::All,
            ) => {
                let j = &self.jobs[&id_of(handle)];
                assert_eq!(
                    (function, unique, data),
                    (&b(FUNCS[j.func]), &b(j.unique), &j.data)
                );
                handle.clone()
            }
            other => panic!("grab {kind:?} answered with {other:?}"),
        };
        let id = id_of(&handle);
        let job = &self.jobs[&id];
        assert!(job.holder.is_none(), "job {id} assigned twice");
        if let Some(offer) = offer {
            assert_eq!(Some(id), offer, "early taker's grab");
        } else {
            assert!(!job.scheduled, "job {id} ran before it was due");
            assert!(
                candidates.contains(&(job.prio, id)),
                "job {id} heads no queue: {:?}",
                self.queues
            );
            let best = candidates.iter().map(|c| c.0).min();
            assert_eq!(Some(job.prio), best, "priority is global");
            self.queues[job.func][job.prio].pop_front();
        }
        let conn = &self.conns[&c];
        let timeout = conn
            .abilities
            .iter()
            .find(|a| a.0 == job.func)
            .and_then(|a| a.1);
        let now = self.w.now;
        let job = self.jobs.get_mut(&id).expect("job");
        job.holder = Some(c);
        job.scheduled = false;
        job.deadline = timeout.map(|t| now + t);
        self.conns.get_mut(&c).expect("conn").held.push(id);
    }

    pub(crate) fn work(&mut self, slot: usize, what: Work, pick: usize, own: bool) {
        let c = self.slots[slot];
        let after_exception = self
            .conns
            .get_mut(&c)
            .and_then(|conn| conn.after_exception.take());
        self.touch(c);
        let held = &self.conns[&c].held;
        let h = if own && !held.is_empty() {
            self.jobs[&held[pick % held.len()]].handle.clone()
        } else {
            self.pick(pick)
        };
        let id = id_of(&h);
        let mine = self
            .jobs
            .get(&id)
            .is_some_and(|j| j.holder == Some(c) && j.handle == h);
        let req = match what {
            Work::Status => {
                Request::work_status(h.clone(), Bytes::from((pick % 7).to_string()), b("7"))
            }
            Work::Data => Request::WorkData {
                handle: h.clone(),
                data: b("data"),
            },
            Work::Warning => Request::WorkWarning {
                handle: h.clone(),
                data: b("warn"),
            },
            Work::Complete => Request::WorkComplete {
                handle: h.clone(),
                data: b("done"),
            },
            Work::Fail => Request::WorkFail { handle: h.clone() },
            Work::Exception => Request::WorkException {
                handle: h.clone(),
                data: b("exc"),
            },
        };
        if !mine && matches!(what, Work::Fail) && after_exception.as_ref() == Some(&h) {
            // Perl's WORK_EXCEPTION + WORK_FAIL pair: one failure.
            return self.w.req(c, req);
        }
        if matches!(what, Work::Exception) && mine {
            if let Some(conn) = self.conns.get_mut(&c) {
                conn.after_exception = Some(h.clone());
            }
        }
        if !mine {
            let text = match what {
                Work::Data | Work::Warning => "Job does not exist on server",
                Work::Exception => "An exception was received for a job that does not exist",
                _ => "Job given in work result not found",
            };
            self.send(c, Response::error("JOB_NOT_FOUND", text));
            return self.w.req(c, req);
        }
        let clients = self.jobs[&id].clients.clone();
        for client in clients {
            let wants = self.exceptions_all || self.conns[&client].exceptions;
            let r = match (&req, what) {
                (Request::WorkStatus(p), _) => Response::WorkStatus {
                    handle: h.clone(),
                    numerator: p.numerator.clone(),
                    denominator: b("7"),
                },
                (_, Work::Data) => Response::WorkData {
                    handle: h.clone(),
                    data: b("data"),
                },
                (_, Work::Warning) => Response::WorkWarning {
                    handle: h.clone(),
                    data: b("warn"),
                },
                (_, Work::Complete) => Response::WorkComplete {
                    handle: h.clone(),
                    data: b("done"),
                },
                (_, Work::Exception) if wants => Response::WorkException {
                    handle: h.clone(),
                    data: b("exc"),
                },
                _ => Response::WorkFail(h.clone()),
            };
            self.send(client, r);
        }
        match what {
            Work::Status => {
                let job = self.jobs.get_mut(&id).expect("job");
                job.num = (pick % 7) as u32;
                job.den = 7;
            }
            Work::Data | Work::Warning => {}
            _ => {
                self.remove(id);
            }
        }
        self.w.req(c, req);
    }

    pub(crate) fn tally(&mut self, effects: &[(u64, Out)]) {
        for (c, o) in effects {
            let h = match o {
                Out::Packet(Response::WorkComplete { handle, .. })
                | Out::Packet(Response::WorkException { handle, .. })
                | Out::Packet(Response::WorkFail(handle)) => handle,
                _ => continue,
            };
            let key = (*c, h.clone());
            *self.terms.entry(key.clone()).or_default() += 1;
            let subs = self.subs.get(&key).copied().unwrap_or(0);
            assert!(
                self.terms[&key] <= subs,
                "conn {c}: extra terminal for {h:?}"
            );
        }
    }

    /// `status`, `prioritystatus`, `show jobs` and the counters agree with the model.
    pub(crate) fn check(&mut self) {
        let workers = |m: &Model, f: usize| m.conns.values().filter(|c| c.can(f)).count();
        let mut status = Vec::new();
        let mut prio = Vec::new();
        for &f in &self.funcs_seen {
            let jobs: Vec<&MJob> = self.jobs.values().filter(|j| j.func == f).collect();
            let running = jobs.iter().filter(|j| j.holder.is_some()).count();
            let queued = |p| {
                jobs.iter()
                    .filter(|j| j.holder.is_none() && j.prio == p)
                    .count()
            };
            let name = FUNCS[f];
            let nw = workers(self, f);
            status.push(format!("{name}\t{}\t{running}\t{nw}", jobs.len()));
            prio.push(format!(
                "{name}\t{}\t{}\t{}\t{nw}",
                queued(0),
                queued(1),
                queued(2)
            ));
        }
        let lines = |text: String| -> Vec<String> {
            table(&text).into_iter().map(|r| r.join("\t")).collect()
        };
        assert_eq!(lines(self.w.probe("status")), status, "status");
        assert_eq!(
            lines(self.w.probe("prioritystatus")),
            prio,
            "prioritystatus"
        );
        let jobs: Vec<String> = self
            .jobs
            .values()
            .map(|j| {
                let h = String::from_utf8_lossy(&j.handle);
                let queued = u8::from(j.bg && !j.cancelled);
                // IGNORE_JOB: the result goes nowhere (cancelled, or a
                // foreground job whose clients all left while it runs).
                let ignored = j.cancelled || (!j.bg && j.clients.is_empty());
                format!("{h}\t{}\t{}\t{queued}", j.retries, u8::from(ignored))
            })
            .collect();
        assert_eq!(lines(self.w.probe("show jobs")), jobs, "show jobs");
        assert_eq!(self.w.core.job_count(), self.jobs.len());
        let held: usize = self.conns.values().map(|c| c.held.len()).sum();
        assert_eq!(self.w.core.running_jobs(), held as u64);
        self.check_views();
        self.w.take_all();
    }

    /// The function and worker views: queued and scheduled jobs per
    /// function; each worker's functions and last `stats` figures.
    fn check_views(&self) {
        for v in self.w.core.functions_view() {
            let f = FUNCS.iter().position(|n| v.name[..] == *n.as_bytes());
            let f = f.expect("a model function");
            let queued = self.queues[f].each_ref().map(|q| q.len() as u32);
            let jobs = self.jobs.values();
            let scheduled = jobs.filter(|j| j.func == f && j.scheduled).count() as u32;
            assert_eq!((v.queued, v.scheduled), (queued, scheduled), "{}", FUNCS[f]);
        }
        let views = self.w.core.workers_view();
        for v in &views {
            let c = &self.conns[&v.id];
            let funcs: Vec<Bytes> = c.abilities.iter().map(|a| b(FUNCS[a.0])).collect();
            assert_eq!(v.functions, funcs, "worker {}'s functions", v.id);
            let stats = v.stats.map(|s| (s.cpu_ms, s.max_rss_kib));
            assert_eq!(stats, c.stats, "worker {}'s stats", v.id);
        }
        for (id, c) in &self.conns {
            let listed = views.iter().any(|v| v.id == *id);
            assert_eq!(listed, !c.abilities.is_empty(), "worker {id} listed");
        }
    }

    /// Completes everything still held, then drains every queue with one
    /// worker; afterwards no job is left and every connected client got
    /// exactly one terminal packet per foreground submission.
    pub(crate) fn finish(&mut self) {
        for slot in 0..SLOTS {
            let c = self.slots[slot];
            for _ in 0..self.conns[&c].held.len() {
                self.step(&Op::Work {
                    slot,
                    what: Work::Complete,
                    pick: 0,
                    own: true,
                });
            }
        }
        // Every epoch job due (at most 4 s ahead), then drained by a plain
        // worker; if every slot takes epoch jobs early, slot 0 reconnects.
        self.step(&Op::Advance { ms: 5_000 });
        let plain = (0..SLOTS).find(|&s| !self.conns[&self.slots[s]].early);
        let slot = plain.unwrap_or_else(|| {
            self.step(&Op::Disconnect { slot: 0 });
            0
        });
        for func in 0..FUNCS.len() {
            self.step(&Op::CanDo {
                slot,
                func,
                timeout: None,
            });
        }
        for _ in 0..=self.jobs.len() {
            self.step(&Op::Grab { slot, kind: 0 });
            if self.conns[&self.slots[slot]].held.is_empty() {
                break;
            }
            self.step(&Op::Work {
                slot,
                what: Work::Complete,
                pick: 0,
                own: true,
            });
        }
        assert!(self.jobs.is_empty(), "left over: {:?}", self.jobs);
        self.check();
        for ((c, h), &n) in &self.subs {
            if self.conns.contains_key(c) {
                let got = self.terms.get(&(*c, h.clone())).copied().unwrap_or(0);
                assert_eq!(got, n, "conn {c}, job {h:?}: terminal packets");
            }
        }
    }
}

pub(crate) fn norm(effects: &[(u64, Out)]) -> Vec<String> {
    let mut v: Vec<String> = effects.iter().map(|(c, o)| format!("{c} {o:?}")).collect();
    v.sort();
    v
}
