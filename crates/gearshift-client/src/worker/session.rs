//! One worker connection per server: register, then the GRAB / NO_JOB /
//! PRE_SLEEP / NOOP loop, running handlers up to the worker's shared
//! concurrency limit; reconnect with backoff when the connection drops.
//!
//! The loop holds at most one GRAB in flight, and sends it only once it
//! holds a concurrency permit, which then travels with the assigned job and
//! is released when the handler ends. NO_JOB is answered with PRE_SLEEP
//! and the session waits for NOOP (gearmand answers PRE_SLEEP with an
//! immediate NOOP when a job is already waiting, so no wake-up is lost).
//!
//! On stop the session grabs nothing more (a stop and a free slot ready at
//! once: the stop wins; holding a permit, the session yields so that
//! `Worker::run` polls its shutdown future, then checks the flag again right
//! before the GRAB), waits for its running handlers,
//! sends their results and closes. When the connection drops instead, its
//! running handlers are aborted: the server requeues their jobs, and their
//! results could not be reported on another connection anyway.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::{GrabKind, Request, Response};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};
use tokio::task::{Id, JoinSet};

use crate::addr::ServerAddr;
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::wire::Wire;
use crate::worker::handler::WorkError;
use crate::worker::job::WorkerJob;
use crate::worker::Shared;

/// Progress packets queued by handlers before the session writes them.
const OUT_QUEUE: usize = 256;
/// Past this many unwritten bytes, handlers' progress waits (backpressure).
const HIGH_WATER: usize = 1 << 20;

/// Serves `addr` until `stop` turns true, reconnecting as needed.
pub(crate) async fn session(
    shared: Arc<Shared>,
    addr: ServerAddr,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(shared.backoff_min, shared.backoff_max);
    loop {
        if *stop.borrow() {
            return;
        }
        let connected = tokio::select! {
            r = Wire::connect(&addr, shared.connect_timeout, shared.tls.as_ref()) => r,
            _ = stopped(&mut stop) => return,
        };
        match connected {
            Ok(wire) => {
                tracing::info!(server = %addr, "worker connected");
                match serve(&shared, wire, &mut stop).await {
                    Ok(()) => {
                        tracing::info!(server = %addr, "worker session stopped");
                        return;
                    }
                    Err(e) => {
                        // A TLS port answers every attempt the same way: keep backing off.
                        if !matches!(e, Error::TlsPort { .. }) {
                            backoff.reset();
                        }
                        tracing::warn!(server = %addr, error = %e, "worker connection lost")
                    }
                }
            }
            Err(e) => tracing::warn!(server = %addr, error = %e, "worker cannot connect"),
        }
        let delay = backoff.next_delay();
        tracing::debug!(server = %addr, ?delay, "worker reconnecting after delay");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut stop) => return,
        }
    }
}

/// Resolves once a stop is requested (or the worker is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The state of one connection's grab loop.
struct Session<'a> {
    shared: &'a Shared,
    wire: Wire,
    out_tx: mpsc::Sender<Request>,
    tasks: JoinSet<Result<Bytes, WorkError>>,
    running: HashMap<Id, Bytes>,
    /// The permit held for the GRAB in flight.
    reserved: Option<OwnedSemaphorePermit>,
    /// A GRAB is in flight.
    grabbing: bool,
    /// The server may have a job for us (start, NOOP, or a job just came).
    want: bool,
    stopping: bool,
    /// `stats` options sent and not yet answered.
    stats_pending: usize,
    /// The server refused the `stats` option: no more of it here.
    stats_refused: bool,
}

/// Runs one connection: `Ok` after a graceful stop, `Err` when it dropped.
async fn serve(shared: &Shared, wire: Wire, stop: &mut watch::Receiver<bool>) -> Result<()> {
    let (out_tx, mut out_rx) = mpsc::channel(OUT_QUEUE);
    let mut s = Session {
        shared,
        wire,
        out_tx,
        tasks: JoinSet::new(),
        running: HashMap::new(),
        reserved: None,
        grabbing: false,
        want: true,
        stopping: false,
        stats_pending: 0,
        stats_refused: false,
    };
    s.register();
    loop {
        if s.stopping && !s.grabbing && s.tasks.is_empty() {
            while let Ok(req) = out_rx.try_recv() {
                s.wire.queue(&req);
            }
            s.wire.close().await;
            return Ok(());
        }
        let may_grab = s.want && !s.grabbing && !s.stopping && s.reserved.is_none();
        let may_queue = s.wire.queued() < HIGH_WATER;
        let permits = s.shared.permits.clone();
        tokio::select! {
            // A stop ready together with a free slot must win: stop first.
            biased;
            _ = stopped(stop), if !s.stopping => {
                tracing::debug!(running = s.tasks.len(), "worker session draining");
                s.stopping = true;
            }
            Some(req) = out_rx.recv(), if may_queue => s.wire.queue(&req),
            Some(joined) = s.tasks.join_next_with_id(), if !s.tasks.is_empty() => {
                // Progress a handler sent before it returned goes out first.
                while let Ok(req) = out_rx.try_recv() {
                    s.wire.queue(&req);
                }
                s.finished(joined);
            }
            permit = permits.acquire_owned(), if may_grab => {
                let Ok(permit) = permit else {
                    return Err(Error::protocol("concurrency semaphore closed"));
                };
                // The stop may have been requested while the permit was
                // awaited, even by the handler that freed it, on another
                // thread. Yield once: `Worker::run` polls its shutdown future
                // before this session resumes, so such a stop is seen here.
                tokio::task::yield_now().await;
                if *stop.borrow() {
                    drop(permit);
                    s.stopping = true;
                } else {
                    s.reserved = Some(permit);
                    s.wire.queue(&Request::Grab(GrabKind::Uniq));
                    s.grabbing = true;
                }
            }
            r = s.wire.recv() => match r? {
                Some(resp) => s.on_response(resp),
                None => return Err(Error::ConnectionLost),
            },
        }
    }
}

impl Session<'_> {
    /// SET_CLIENT_ID, OPTION_REQ epoch-early if asked, then CAN_DO /
    /// CAN_DO_TIMEOUT per function.
    fn register(&mut self) {
        if let Some(id) = &self.shared.client_id {
            self.wire.queue(&Request::SetClientId(id.clone()));
        }
        if self.shared.epoch_early {
            self.wire
                .queue(&Request::Option(Bytes::from_static(b"epoch-early")));
        }
        for f in &self.shared.functions {
            let req = match f.timeout {
                Some(t) => Request::CanDoTimeout {
                    function: f.name.clone(),
                    timeout: t.as_millis().to_string().into(),
                },
                None => Request::CanDo(f.name.clone()),
            };
            self.wire.queue(&req);
        }
    }

    fn on_response(&mut self, resp: Response) {
        match resp {
            Response::JobAssignUniq {
                handle,
                function,
                unique,
                data,
            }
            | Response::JobAssignAll {
                handle,
                function,
                unique,
                data,
                ..
            } => self.start(handle, function, unique, data),
            Response::JobAssign {
                handle,
                function,
                data,
            } => self.start(handle, function, Bytes::new(), data),
            Response::NoJob => {
                self.grabbing = false;
                self.reserved = None;
                self.want = false;
                if !self.stopping {
                    self.wire.queue(&Request::PreSleep);
                }
            }
            Response::Noop => self.want = true,
            Response::OptionRes(_) if self.stats_pending > 0 => self.stats_pending -= 1,
            // Answers come in order: an ERROR while a `stats` waits is its refusal.
            Response::Error { code, .. } if self.stats_pending > 0 => {
                tracing::debug!(code = %String::from_utf8_lossy(&code), "server refuses the stats option; not sending it again");
                self.stats_pending -= 1;
                self.stats_refused = true;
            }
            Response::OptionRes(name) => {
                tracing::debug!(option = %String::from_utf8_lossy(&name), "server took option");
            }
            Response::Error { code, text } => tracing::warn!(
                code = %String::from_utf8_lossy(&code),
                text = %String::from_utf8_lossy(&text),
                "server error on worker connection"
            ),
            other => tracing::debug!(packet = ?other, "ignoring packet on worker connection"),
        }
    }

    /// Runs the handler of an assigned job.
    fn start(&mut self, handle: Bytes, function: Bytes, unique: Bytes, data: Bytes) {
        self.grabbing = false;
        self.want = true;
        let permit = self.reserved.take();
        let Some(handler) = self.shared.handler(&function) else {
            tracing::warn!(function = ?String::from_utf8_lossy(&function), "job for an unregistered function; failing it");
            self.wire.queue(&Request::WorkFail { handle });
            return;
        };
        tracing::debug!(handle = %String::from_utf8_lossy(&handle), "job assigned");
        let job = WorkerJob::new(handle.clone(), function, unique, data, self.out_tx.clone());
        let fut = handler(job);
        let task = self.tasks.spawn(async move {
            let _permit = permit;
            fut.await
        });
        self.running.insert(task.id(), handle);
    }

    /// Reports a finished handler.
    fn finished(
        &mut self,
        joined: std::result::Result<(Id, Result<Bytes, WorkError>), tokio::task::JoinError>,
    ) {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(e) => {
                tracing::error!(error = %e, "job handler panicked");
                (e.id(), Err(WorkError::exception("handler panicked")))
            }
        };
        let Some(handle) = self.running.remove(&id) else {
            return;
        };
        let req = match outcome {
            Ok(data) => Request::WorkComplete { handle, data },
            Err(WorkError::Exception(data)) if self.shared.exceptions => {
                Request::WorkException { handle, data }
            }
            Err(_) => Request::WorkFail { handle },
        };
        self.wire.queue(&req);
        self.report_stats();
    }

    /// Gearshift's `stats` option after a job, unless this server refused it.
    fn report_stats(&mut self) {
        let Some(source) = self.shared.stats.as_ref().filter(|_| !self.stats_refused) else {
            return;
        };
        if let Some(stats) = source() {
            self.wire
                .queue(&Request::Option(Bytes::from(stats.option_text())));
            self.stats_pending += 1;
        }
    }
}
