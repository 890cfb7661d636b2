//! A partitioned node's job server serves the functions of its own
//! partitions only: input about another one (it raced a move) is refused
//! in its place, to be sent again to the function's owner, and an entry of
//! another's that a raced CAN_DO left is forgotten once it is given up.

use std::sync::Arc;

use bytes::Bytes;
use gearshift_core::split::{ADMIN_NOT_OWNER, NOT_OWNER};
use gearshift_core::{ConnId, Input, Millis};
use gearshift_proto::admin::AdminCommand;
use gearshift_proto::{Request, Response};

use super::Hub;

/// Whether a function is served here.
pub type Owns = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// How input about a function not served here is answered.
pub(super) enum Refusal {
    /// A submission: QUEUE_ERROR (its node parks it and sends it again).
    Reply(Response),
    /// An admin line: ERR NOT_OWNER, in its place among the replies.
    Admin(Input),
}

/// The refusal of `input` when it names a function `owns` refuses.
pub(super) fn refusal(input: &Input, owns: &dyn Fn(&[u8]) -> bool) -> Option<Refusal> {
    let f = named_function(input)?;
    if owns(f) {
        return None;
    }
    Some(match input {
        Input::Admin(_) => {
            let text = Bytes::from_static(ADMIN_NOT_OWNER);
            Refusal::Admin(Input::Admin(Box::new(AdminCommand::Reply(text))))
        }
        _ => Refusal::Reply(Response::error("QUEUE_ERROR", NOT_OWNER)),
    })
}

impl Hub {
    /// Forgets connection `id`; on a partitioned node, with the entries of
    /// functions served elsewhere that it leaves empty.
    pub(super) fn disconnect(&mut self, id: ConnId, now: Millis) {
        let given_up = self.given_up(id, None);
        self.core.disconnect(id, now);
        self.forget_empty(given_up);
    }

    /// The functions served elsewhere that connection `id` gives up with
    /// `input` (CANT_DO, RESET_ABILITIES; `None`: it closes). A worker's
    /// CAN_DO that raced a move away leaves such an entry here; kept, it
    /// would be listed beside the owner's.
    pub(super) fn given_up(&self, id: ConnId, input: Option<&Input>) -> Vec<Bytes> {
        let Some(owns) = &self.owns else {
            return Vec::new();
        };
        match input {
            Some(Input::Request(Request::CantDo(f))) if !owns(f) => vec![f.clone()],
            Some(Input::Request(Request::ResetAbilities)) | None => {
                self.core.abilities_named(id, &|f| !owns(f))
            }
            _ => Vec::new(),
        }
    }

    /// Forgets each of `names` that nothing is left of.
    pub(super) fn forget_empty(&mut self, names: Vec<Bytes>) {
        for f in names {
            self.core.forget_if_empty(&f);
        }
    }
}

/// The function a submission or an admin line about one function names.
fn named_function(input: &Input) -> Option<&[u8]> {
    use AdminCommand::*;
    match input {
        Input::Request(Request::Submit(s)) => Some(s.function()),
        Input::Request(Request::SubmitSched(s)) => Some(&s.function[..]),
        Input::Admin(cmd) => match &**cmd {
            Pause(f) | Resume(f) | CreateFunction(f) | DropFunction(f) => Some(f),
            MaxQueue { function, .. } => Some(function),
            ShowDead(Some(f)) | RetryDead(_, Some(f)) | DropDead(_, Some(f)) => Some(f),
            _ => None,
        },
        _ => None,
    }
}
