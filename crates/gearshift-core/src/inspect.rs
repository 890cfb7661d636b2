//! Gearshift's own admin words that look at jobs and workers: `show job H`
//! (a live, kept or dead job with its history), `show dead [F]` and `show
//! workers` (the registry). Every field that can hold client bytes goes
//! through [`escape::push_field`], so a line stays a line.

use std::io::Write;

use gearshift_proto::admin as text;
use gearshift_proto::escape::{self, Sep};
use gearshift_proto::Priority;

use crate::engine::Core;
use crate::history::Step;
use crate::ids::JobId;
use crate::job::JobState;
use crate::kept::Finished;
use crate::timefmt::write_rfc3339;
use crate::view::JobDetail;
use crate::Millis;

fn priority_word(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

impl Core {
    /// `show job H`: the same view as the HTTP API's
    /// ([`Core::job_detail`]), so the two always agree.
    pub(crate) fn show_job(&mut self, handle: &[u8]) -> Vec<u8> {
        match self.job_detail(handle, false) {
            Some(d) => render(&d),
            None => text::ERR_UNKNOWN_JOB_SHOW.to_vec(),
        }
    }

    /// A kept or dead job by its handle.
    pub(crate) fn find_retained(&self, handle: &[u8]) -> Option<&Finished> {
        let r = &self.retained;
        let by_id = |id: JobId| {
            r.kept
                .get(&id)
                .map(|f| &**f)
                .or_else(|| r.dead.get(&id).map(|f| &**f))
                .filter(|f| f.handle[..] == *handle)
        };
        match self.handles.parse_own(handle) {
            Some(id) => by_id(id),
            // A handle written under another prefix (restored jobs).
            None => r
                .kept
                .values()
                .chain(r.dead.values())
                .map(|f| &**f)
                .find(|f| f.handle[..] == *handle),
        }
    }

    /// A live job's state word and runs started, as `show job` and the
    /// HTTP API give them.
    pub(crate) fn live_state(&self, job: &crate::job::Job) -> (&'static str, u32) {
        let track = self.history.get(job.id);
        let running = matches!(job.state, JobState::Running | JobState::Cancelled);
        let state = match job.state {
            JobState::Pending | JobState::Queued => "queued",
            JobState::Scheduled if track.is_some_and(|t| t.retry_at.is_some()) => "retrying",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Cancelled => "cancelled",
        };
        let attempts = match track {
            Some(t) => t.attempts,
            None => job.retries + u32::from(running),
        };
        (state, attempts)
    }

    /// `show dead [F]`: `HANDLE\tFUNCTION\tATTEMPTS\tDIED_AT\tERROR` per job.
    pub(crate) fn show_dead(&self, function: Option<&[u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.retained.dead.values() {
            if function.is_some_and(|name| f.function[..] != *name) {
                continue;
            }
            escape::push_field(&mut out, &f.handle, Sep::Tab);
            out.push(b'\t');
            escape::push_field(&mut out, &f.function, Sep::Tab);
            let _ = write!(out, "\t{}\t", f.attempts);
            write_rfc3339(&mut out, f.finished);
            out.push(b'\t');
            escape::push_field(&mut out, f.error.as_deref().unwrap_or(b""), Sep::Tab);
            out.push(b'\n');
        }
        out.extend_from_slice(text::LIST_END);
        out
    }

    /// `show workers`: every connection that registered a function or holds
    /// a job, as `FD\tADDRESS\tCLIENT_ID\tCONNECTED\tLAST_SEEN\tDONE\tFAILED\tHELD\tFUNCTIONS`;
    /// HELD and FUNCTIONS are space-separated lists (`-` when empty).
    pub(crate) fn show_workers(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for c in self.conns_in_order().filter(|c| c.is_worker()) {
            let _ = write!(out, "{}\t", c.info().fd);
            escape::push_field(&mut out, c.info().ip.as_bytes(), Sep::Tab);
            out.push(b'\t');
            escape::push_field(&mut out, c.client_id(), Sep::Tab);
            out.push(b'\t');
            write_rfc3339(&mut out, c.seen().0);
            out.push(b'\t');
            write_rfc3339(&mut out, c.seen().1);
            let (done, failed) = c.runs();
            let _ = write!(out, "\t{done}\t{failed}\t");
            if c.held().is_empty() {
                out.push(b'-');
            }
            for (i, &job) in c.held().iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                let mut h = Vec::new();
                self.handles.write(&mut h, job);
                escape::push_field(&mut out, &h, Sep::Space);
            }
            out.push(b'\t');
            if c.abilities().is_empty() {
                out.push(b'-');
            }
            for (i, a) in c.abilities().iter().enumerate() {
                if let Some(f) = self.table.func(a.func) {
                    if i > 0 {
                        out.push(b' ');
                    }
                    escape::push_field(&mut out, &f.name, Sep::Space);
                }
            }
            out.push(b'\n');
        }
        out.extend_from_slice(text::LIST_END);
        out
    }
}

fn field(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    escape::push_field(out, value, Sep::Line);
    out.push(b'\n');
}

fn time_field(out: &mut Vec<u8>, key: &str, at: Option<Millis>) {
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    match at {
        Some(t) => write_rfc3339(out, t),
        None => out.push(b'-'),
    }
    out.push(b'\n');
}

fn render(d: &JobDetail) -> Vec<u8> {
    let v = &d.summary;
    let mut out = Vec::new();
    field(&mut out, "handle", &v.handle);
    field(&mut out, "function", &v.function);
    field(&mut out, "unique", &v.unique);
    field(&mut out, "priority", priority_word(v.priority).as_bytes());
    field(&mut out, "state", v.state.as_bytes());
    field(&mut out, "attempts", v.attempts.to_string().as_bytes());
    time_field(&mut out, "created", Some(v.created));
    time_field(&mut out, "started", d.started);
    time_field(&mut out, "finished", d.finished);
    time_field(&mut out, "due", v.due);
    field(
        &mut out,
        "worker",
        d.worker.as_ref().map_or(&b"-"[..], |w| &w[..]),
    );
    field(
        &mut out,
        "error",
        d.error.as_ref().map_or(&b"-"[..], |e| &e[..]),
    );
    field(
        &mut out,
        "result_size",
        d.result_size.to_string().as_bytes(),
    );
    // How it ended apart from its last failure: a job that completed on a
    // later attempt still has one.
    field(
        &mut out,
        "outcome",
        d.outcome.map_or("-", |o| o.word()).as_bytes(),
    );
    out.extend_from_slice(b"last_failure: ");
    match &d.last_failure {
        None => out.push(b'-'),
        Some(f) => {
            match f.attempt {
                Some(n) => {
                    let _ = write!(out, "{n} ");
                }
                None => out.extend_from_slice(b"- "),
            }
            match f.at {
                Some(t) => write_rfc3339(&mut out, t),
                None => out.push(b'-'),
            }
            out.push(b' ');
            escape::push_field(&mut out, f.describe().as_bytes(), Sep::Line);
        }
    }
    out.push(b'\n');
    for e in &d.history {
        out.extend_from_slice(b"history: ");
        write_rfc3339(&mut out, e.at);
        out.push(b' ');
        out.extend_from_slice(e.step.word().as_bytes());
        let mut detail = Vec::new();
        match &e.step {
            Step::Started(w) => detail.extend_from_slice(w),
            Step::Failed(reason, d) => {
                detail.extend_from_slice(reason.word().as_bytes());
                if !d.is_empty() {
                    detail.extend_from_slice(b": ");
                    detail.extend_from_slice(d);
                }
            }
            Step::RetryAt(t) => write_rfc3339(&mut detail, *t),
            Step::Requeued(why) => detail.extend_from_slice(why.as_bytes()),
            Step::Completed(n) => {
                let _ = write!(detail, "{n} bytes");
            }
            Step::Queued | Step::Cancelled | Step::Dead | Step::Revived => {}
        }
        if !detail.is_empty() {
            out.push(b' ');
            escape::push_field(&mut out, &detail, Sep::Line);
        }
        out.push(b'\n');
    }
    out.extend_from_slice(text::LIST_END);
    out
}
