//! One client connection: a task that owns the socket, and a cheap handle
//! that sends it commands.
//!
//! Replies that answer a request (JOB_CREATED, STATUS_RES, STATUS_RES_UNIQUE,
//! ECHO_RES, OPTION_RES, ERROR) come back in request order, so the task
//! keeps a FIFO of pending reply slots. WORK_* packets are routed by job
//! handle to the listeners attached on this connection. When several
//! submissions coalesced onto one handle on this connection, the server
//! sends every packet once per attachment, back to back: copies of a
//! progress packet go round-robin (one to each listener), the first copy of
//! a terminal packet goes to every listener and removes them, and later
//! copies are ignored.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use gearshift_proto::request::parse_atoi;
use gearshift_proto::{Request, Response};
use tokio::sync::{mpsc, oneshot};

use crate::addr::ServerAddr;
use crate::client::job::JobEvent;
use crate::error::{Error, Result};
use crate::wire::Wire;

/// Which reply a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// JOB_CREATED, for SUBMIT_JOB*.
    Created,
    /// STATUS_RES, for GET_STATUS.
    Status,
    /// STATUS_RES_UNIQUE, for GET_STATUS_UNIQUE.
    StatusUnique,
    /// ECHO_RES, for ECHO_REQ.
    Echo,
    /// OPTION_RES, for OPTION_REQ.
    Option,
}

impl Expect {
    fn of(resp: &Response) -> Option<Expect> {
        Some(match resp {
            Response::JobCreated(_) => Expect::Created,
            Response::StatusRes { .. } => Expect::Status,
            Response::StatusResUnique { .. } => Expect::StatusUnique,
            Response::EchoRes(_) => Expect::Echo,
            Response::OptionRes(_) => Expect::Option,
            _ => return None,
        })
    }
}

/// Where the events of a foreground job go.
pub(crate) type EventSender = mpsc::UnboundedSender<JobEvent>;

/// A request for the connection task.
struct Command {
    request: Request,
    expect: Expect,
    reply: oneshot::Sender<Result<Response>>,
    events: Option<EventSender>,
}

/// A request written to the socket, waiting for its reply.
struct Pending {
    expect: Expect,
    reply: oneshot::Sender<Result<Response>>,
    events: Option<EventSender>,
}

/// The listeners of one job handle on this connection.
#[derive(Default)]
struct Listeners {
    senders: Vec<EventSender>,
    cursor: usize,
}

/// A handle on a running connection task.
#[derive(Clone)]
pub(crate) struct ConnHandle {
    tx: mpsc::UnboundedSender<Command>,
}

impl ConnHandle {
    /// Starts the task that owns `wire`.
    pub(crate) fn spawn(wire: Wire, addr: ServerAddr) -> ConnHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(wire, rx, addr));
        ConnHandle { tx }
    }

    /// The task has ended (the connection is gone).
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Both handles talk to the same task.
    pub(crate) fn same(&self, other: &ConnHandle) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Sends a request and waits for its reply. [`Error::NotConnected`] means
    /// the request never reached the socket, so it is safe to send elsewhere.
    pub(crate) async fn call(
        &self,
        request: Request,
        expect: Expect,
        events: Option<EventSender>,
    ) -> Result<Response> {
        let (reply, rx) = oneshot::channel();
        let cmd = Command {
            request,
            expect,
            reply,
            events,
        };
        if self.tx.send(cmd).is_err() {
            return Err(Error::NotConnected);
        }
        rx.await.unwrap_or(Err(Error::ConnectionLost))
    }
}

/// The connection task: until the socket fails, or every handle is gone and
/// nothing is pending.
async fn run(mut wire: Wire, mut rx: mpsc::UnboundedReceiver<Command>, addr: ServerAddr) {
    let mut conn = Conn {
        pending: VecDeque::new(),
        listeners: HashMap::new(),
    };
    let mut accepting = true;
    let outcome: Result<()> = loop {
        if !accepting && conn.idle() {
            wire.close().await;
            break Ok(());
        }
        tokio::select! {
            r = wire.recv() => match r {
                Ok(Some(resp)) => {
                    if let Err(e) = conn.on_response(resp) {
                        break Err(e);
                    }
                }
                Ok(None) => break Err(Error::ConnectionLost),
                Err(e) => break Err(e),
            },
            cmd = rx.recv(), if accepting => match cmd {
                Some(cmd) => match wire.peer_closed() {
                    Ok(false) => {
                        wire.queue(&cmd.request);
                        conn.pending.push_back(Pending {
                            expect: cmd.expect,
                            reply: cmd.reply,
                            events: cmd.events,
                        });
                    }
                    closed => {
                        // Not written: the caller may safely try elsewhere. Frames
                        // already read are still delivered before the task ends.
                        let _ = cmd.reply.send(Err(Error::NotConnected));
                        accepting = false;
                        if let Err(e) = closed {
                            break Err(e);
                        }
                    }
                },
                None => accepting = false,
            },
        }
    };
    match &outcome {
        Ok(()) => tracing::debug!(%addr, "client connection closed"),
        Err(e) => tracing::info!(%addr, error = %e, "client connection ended"),
    }
    rx.close();
    while let Ok(cmd) = rx.try_recv() {
        let _ = cmd.reply.send(Err(Error::NotConnected));
    }
    for p in conn.pending.drain(..) {
        let lost = match &outcome {
            // Said of every request: the server took none of them.
            Err(Error::TlsPort { addr }) => Error::TlsPort { addr: addr.clone() },
            _ => Error::ConnectionLost,
        };
        let _ = p.reply.send(Err(lost));
    }
    // Dropping the listeners ends their jobs' event streams.
}

/// The routing state of one connection.
struct Conn {
    pending: VecDeque<Pending>,
    listeners: HashMap<Bytes, Listeners>,
}

impl Conn {
    /// Nothing is pending and nobody listens any more.
    fn idle(&self) -> bool {
        self.pending.is_empty()
            && self
                .listeners
                .values()
                .all(|l| l.senders.iter().all(|s| s.is_closed()))
    }

    fn on_response(&mut self, resp: Response) -> Result<()> {
        if let Some(expect) = Expect::of(&resp) {
            return self.on_reply(expect, resp);
        }
        match resp {
            Response::Error { code, text } => {
                let code = String::from_utf8_lossy(&code).into_owned();
                let text = String::from_utf8_lossy(&text).into_owned();
                match self.pending.pop_front() {
                    Some(p) => {
                        let _ = p.reply.send(Err(Error::Server { code, text }));
                    }
                    None => {
                        tracing::warn!(%code, %text, "ERROR from server with no request pending")
                    }
                }
            }
            Response::WorkData { handle, data } => self.route(&handle, JobEvent::Data(data)),
            Response::WorkWarning { handle, data } => self.route(&handle, JobEvent::Warning(data)),
            Response::WorkStatus {
                handle,
                numerator,
                denominator,
            } => {
                let num = |b: &Bytes| parse_atoi(b).clamp(0, i64::from(u32::MAX)) as u32;
                let ev = JobEvent::Status {
                    numerator: num(&numerator),
                    denominator: num(&denominator),
                };
                self.route(&handle, ev)
            }
            Response::WorkComplete { handle, data } => {
                self.route(&handle, JobEvent::Complete(data))
            }
            Response::WorkException { handle, data } => {
                self.route(&handle, JobEvent::Exception(data))
            }
            Response::WorkFail(handle) => {
                // gearmand's EXCEPTION→FAIL downgrade sends the handle with a trailing NUL.
                let handle = match handle.strip_suffix(b"\0") {
                    Some(h) => handle.slice_ref(h),
                    None => handle,
                };
                self.route(&handle, JobEvent::Fail)
            }
            other => {
                tracing::debug!(packet = ?other, "ignoring worker packet on a client connection")
            }
        }
        Ok(())
    }

    /// A reply: it must answer the oldest pending request.
    fn on_reply(&mut self, got: Expect, resp: Response) -> Result<()> {
        let Some(p) = self.pending.pop_front() else {
            return Err(Error::protocol(format!("unsolicited {got:?} reply")));
        };
        if p.expect != got {
            let e = format!("{got:?} reply while waiting for {:?}", p.expect);
            let _ = p.reply.send(Err(Error::protocol(e.clone())));
            return Err(Error::protocol(e));
        }
        if let (Response::JobCreated(handle), Some(events)) = (&resp, p.events) {
            // Registered even when the caller is gone: the count of listeners
            // must match the server's count of attachments.
            let l = self.listeners.entry(handle.clone()).or_default();
            l.senders.push(events);
            l.cursor = 0;
        }
        let _ = p.reply.send(Ok(resp));
        Ok(())
    }

    fn route(&mut self, handle: &Bytes, ev: JobEvent) {
        if ev.is_terminal() {
            match self.listeners.remove(handle) {
                Some(l) => {
                    for s in l.senders {
                        let _ = s.send(ev.clone());
                    }
                }
                None => tracing::trace!(?handle, "terminal packet for a finished or unknown job"),
            }
            return;
        }
        match self.listeners.get_mut(handle) {
            Some(l) if !l.senders.is_empty() => {
                let i = l.cursor % l.senders.len();
                l.cursor = (i + 1) % l.senders.len();
                let _ = l.senders[i].send(ev);
            }
            _ => tracing::debug!(?handle, "work packet for an unknown job"),
        }
    }
}
