//! Access control: what each connection's [`Rights`] let it send. A refused
//! binary request gets `ERROR PERMISSION_DENIED`, a refused admin command
//! gearmand's `ERR PERMISSION_DENIED ...` line; both are logged, and the
//! connection stays open.

use bytes::Bytes;
use gearshift_proto::admin::{self as text, AdminCommand};
use gearshift_proto::{Request, Response};

use crate::effect::{Effect, Input};
use crate::engine::Core;
use crate::ids::ConnId;
use crate::rights::Rights;

/// The right a request needs, if it needs one.
fn needs(input: &Input) -> Option<Need> {
    match input {
        Input::Request(r) => match r {
            Request::Submit(_)
            | Request::SubmitSched(_)
            | Request::GetStatus(_)
            | Request::GetStatusUnique(_) => Some(Need::Submit),
            Request::CanDo(_)
            | Request::CanDoTimeout { .. }
            | Request::PreSleep
            | Request::Grab(_) => Some(Need::Work),
            _ => None,
        },
        Input::Admin(cmd) => match **cmd {
            ref c if c.changes() => Some(Need::Change),
            AdminCommand::Reply(_) | AdminCommand::TooManyWords => None,
            _ => Some(Need::Read),
        },
        Input::Invalid(_) => None,
    }
}

#[derive(Debug, Clone, Copy)]
enum Need {
    Submit,
    Work,
    Read,
    Change,
}

impl Need {
    fn granted(self, r: Rights) -> bool {
        match self {
            Need::Submit => r.submit,
            Need::Work => r.work,
            Need::Read => r.read,
            Need::Change => r.change,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn what(self) -> &'static str {
        match self {
            Need::Submit => "submitting jobs",
            Need::Work => "working on jobs",
            Need::Read => "admin commands",
            Need::Change => "admin changes",
        }
    }
}

impl Core {
    /// Whether `conn`, holding `rights`, may send `input`; when not,
    /// answers it with a refusal.
    pub(crate) fn permitted(&mut self, conn: ConnId, rights: Rights, input: &Input) -> bool {
        let Some(need) = needs(input) else {
            return true;
        };
        if need.granted(rights) {
            return true;
        }
        let cmd = match input {
            Input::Admin(cmd) => Some(&**cmd),
            _ => None,
        };
        self.refuse(conn, need, cmd);
        false
    }

    /// [`Core::permitted`] for a submission (the busiest request, which
    /// needs no look at its kind).
    pub(crate) fn may_submit(&mut self, conn: ConnId, rights: Rights) -> bool {
        if Need::Submit.granted(rights) {
            return true;
        }
        self.refuse(conn, Need::Submit, None);
        false
    }

    fn refuse(&mut self, conn: ConnId, need: Need, cmd: Option<&AdminCommand>) {
        let Some(c) = self.conns.get(conn) else {
            return;
        };
        self.denied[need.index()] += 1;
        let who = c.info().identity.as_deref().unwrap_or("-");
        tracing::warn!(peer = %c.info().ip, identity = who, refused = need.what(), command = ?cmd, "request refused by the access rules");
        match cmd {
            Some(AdminCommand::Shutdown { .. }) => self.emit(
                conn,
                Effect::Text(conn, Bytes::from_static(text::ERR_SHUTDOWN_DENIED)),
            ),
            Some(_) if matches!(need, Need::Change) => self.emit(
                conn,
                Effect::Text(conn, Bytes::from_static(text::ERR_CHANGE_DENIED)),
            ),
            Some(_) => self.emit(
                conn,
                Effect::Text(conn, Bytes::from_static(text::ERR_READ_DENIED)),
            ),
            None => {
                let why = format!("{} is not allowed for this peer", need.what());
                self.send(conn, Response::error("PERMISSION_DENIED", why));
            }
        }
    }
}
