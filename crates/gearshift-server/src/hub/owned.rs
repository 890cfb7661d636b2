//! A partitioned node's job server serves the functions of its own
//! partitions only: input about another one (it raced a move) is refused
//! in its place, to be sent again to the function's owner.

use std::sync::Arc;

use bytes::Bytes;
use gearshift_core::split::{ADMIN_NOT_OWNER, NOT_OWNER};
use gearshift_core::Input;
use gearshift_proto::admin::AdminCommand;
use gearshift_proto::{Request, Response};

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

/// The function a CANT_DO gives up when another node serves it: its entry
/// here is forgotten if that leaves it empty.
pub(super) fn given_up_elsewhere(input: &Input, owns: &dyn Fn(&[u8]) -> bool) -> Option<Bytes> {
    match input {
        Input::Request(Request::CantDo(f)) if !owns(f) => Some(f.clone()),
        _ => None,
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
