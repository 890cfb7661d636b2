//! The admin text commands run against the core's state, formatted byte
//! for byte as gearmand 1.1.20 prints them. Every client-chosen field goes
//! through [`escape::push_field`], so no listing line can be split or forged.

use std::io::Write;

use bytes::Bytes;
use gearshift_proto::admin::{self as text, AdminCommand};
use gearshift_proto::escape::{self, Sep};

use crate::control::ControlError;
use crate::effect::Effect;
use crate::engine::Core;
use crate::function::FunctionError;
use crate::ids::ConnId;
use crate::job::JobState;
use crate::listing::{JobRow, Listing};
use crate::Millis;

impl Core {
    pub(crate) fn admin(&mut self, conn: ConnId, cmd: AdminCommand, _now: Millis) {
        let reply: Vec<u8> = match cmd {
            AdminCommand::Status => self.status_text(),
            AdminCommand::PriorityStatus => self.priority_status_text(),
            AdminCommand::Workers => self.workers_text(),
            AdminCommand::ShowJobs => {
                let listing = self.show_jobs_rows();
                self.emit(conn, Effect::Listing(conn, Box::new(listing)));
                return;
            }
            AdminCommand::ShowUniqueJobs => {
                let listing = self.show_unique_rows();
                self.emit(conn, Effect::Listing(conn, Box::new(listing)));
                return;
            }
            AdminCommand::CancelJob(handle) => match self.cancel_job(&handle) {
                // A second cancel is OK too, as gearmand says; recorded once.
                Ok(()) | Err(ControlError::CancelRequested) => text::OK_CRLF.to_vec(),
                Err(
                    ControlError::UnknownJob
                    | ControlError::Finished
                    | ControlError::UnknownFunction,
                ) => text::ERR_UNKNOWN_JOB.to_vec(),
            },
            AdminCommand::CreateFunction(name) => {
                self.table.function_id(&name, &self.policies);
                text::OK_CRLF.to_vec()
            }
            AdminCommand::DropFunction(name) => self.drop_function_word(&name).to_vec(),
            AdminCommand::MaxQueue { function, limits } => {
                // gearmand says OK for a function it does not know.
                let _ = self.set_max_queue(&function, limits);
                text::OK_CRLF.to_vec()
            }
            AdminCommand::GetPid => format!("OK {}\n", self.cfg.pid).into_bytes(),
            AdminCommand::Verbose => ok_line(&self.cfg.verbose),
            AdminCommand::Version => ok_line(&self.cfg.version),
            AdminCommand::Shutdown { graceful } => {
                self.emit(conn, Effect::Text(conn, Bytes::from_static(text::OK_CRLF)));
                self.effects.push(Effect::Shutdown { graceful });
                return;
            }
            AdminCommand::ShowJob(handle) => self.show_job(&handle),
            AdminCommand::ShowDead(function) => self.show_dead(function.as_deref()),
            AdminCommand::ShowWorkers => self.show_workers(),
            AdminCommand::RetryDead(target, function) => {
                let n = self.retry_dead(&target, function.as_deref());
                format!("OK {n}\r\n").into_bytes()
            }
            AdminCommand::DropDead(target, function) => {
                let n = self.drop_dead(&target, function.as_deref());
                format!("OK {n}\r\n").into_bytes()
            }
            AdminCommand::ShowSchedules => self.show_schedules(),
            AdminCommand::DropSchedule(handle) => self.drop_schedule(&handle).to_vec(),
            AdminCommand::Pause(name) => self.pause_word(&name, true),
            AdminCommand::Resume(name) => self.pause_word(&name, false),
            AdminCommand::Reply(bytes) => {
                self.emit(conn, Effect::Text(conn, bytes));
                return;
            }
            AdminCommand::TooManyWords => {
                // At once, not held: nothing this connection sends after
                // the line may run (its held answers are lost with it; the
                // jobs behind them are stored all the same).
                self.effects.push(Effect::Close(conn));
                return;
            }
        };
        self.emit(conn, Effect::Text(conn, reply.into()));
    }

    fn live_funcs(&self) -> impl Iterator<Item = &crate::function::Function> {
        self.table.funcs().iter().flatten()
    }

    fn status_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.live_funcs() {
            escape::push_field(&mut out, &f.name, Sep::Tab);
            let _ = writeln!(out, "\t{}\t{}\t{}", f.total, f.running, f.workers);
        }
        out.extend_from_slice(text::LIST_END);
        out
    }

    fn priority_status_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.live_funcs() {
            escape::push_field(&mut out, &f.name, Sep::Tab);
            let normal = f.queued[1] + f.scheduled;
            let _ = writeln!(
                out,
                "\t{}\t{}\t{}\t{}",
                f.queued[0], normal, f.queued[2], f.workers
            );
        }
        out.extend_from_slice(text::LIST_END);
        out
    }

    /// Every connection, oldest first.
    pub(crate) fn conns_in_order(&self) -> impl Iterator<Item = &crate::conn::Conn> {
        self.conns.in_order().map(|(_, c)| c)
    }

    fn workers_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for c in self.conns_in_order() {
            let _ = write!(out, "{} ", c.info().fd);
            escape::push_field(&mut out, c.info().ip.as_bytes(), Sep::Space);
            out.push(b' ');
            // A TLS client certificate names a worker that set no id.
            match &c.info().identity {
                Some(who) if c.client_id()[..] == b"-"[..] => {
                    escape::push_field(&mut out, who.as_bytes(), Sep::Space)
                }
                _ => escape::push_field(&mut out, c.client_id(), Sep::Space),
            }
            out.extend_from_slice(b" :");
            for a in c.abilities() {
                if let Some(f) = self.table.func(a.func) {
                    out.push(b' ');
                    escape::push_field(&mut out, &f.name, Sep::Space);
                }
            }
            out.push(b'\n');
        }
        out.extend_from_slice(text::LIST_END);
        out
    }

    /// `show jobs` as rows; the driver renders them ([`Listing::render`]).
    fn show_jobs_rows(&self) -> Listing {
        let rows = self
            .table
            .iter()
            .map(|job| {
                let cancelled = job.state == JobState::Cancelled;
                JobRow {
                    id: job.id,
                    // A restored job may carry a handle from another prefix.
                    foreign: self.handles.foreign(job.id).cloned(),
                    retries: job.retries,
                    // gearmand's IGNORE_JOB: the result goes nowhere (cancelled,
                    // or a running foreground job whose clients all left).
                    ignored: cancelled || (!job.background && job.clients.is_empty()),
                    background: job.background && !cancelled,
                }
            })
            .collect();
        Listing::Jobs {
            prefix: Bytes::copy_from_slice(self.handles.prefix()),
            rows,
        }
    }

    /// `show unique jobs` as rows.
    fn show_unique_rows(&self) -> Listing {
        Listing::Uniques(
            self.table
                .iter()
                .map(|job| (job.id, job.unique_bytes()))
                .collect(),
        )
    }

    /// `pause F` / `resume F` ([`Core::set_paused`]), with the admin
    /// protocol's refusals.
    fn pause_word(&mut self, name: &[u8], paused: bool) -> Vec<u8> {
        match self.set_paused(name, paused) {
            Ok(()) => text::OK_CRLF.to_vec(),
            Err(_) => text::ERR_FUNCTION_NOT_FOUND.to_vec(),
        }
    }

    /// `drop function F` ([`Core::drop_function_named`]) in gearmand's words.
    fn drop_function_word(&mut self, name: &[u8]) -> &'static [u8] {
        match self.drop_function_named(name) {
            Ok(()) => text::OK_CRLF,
            Err(FunctionError::NotFound | FunctionError::BadName) => text::ERR_FUNCTION_NOT_FOUND,
            Err(FunctionError::Busy) => text::ERR_DROP_BUSY,
            Err(FunctionError::Queued) => text::ERR_DROP_QUEUED,
        }
    }
}

/// `OK <value>\n` for a configured value (version, log level).
fn ok_line(value: &str) -> Vec<u8> {
    let mut out = b"OK ".to_vec();
    escape::push_field(&mut out, value.as_bytes(), Sep::Line);
    out.push(b'\n');
    out
}
