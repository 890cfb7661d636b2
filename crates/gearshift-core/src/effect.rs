//! What the core asks its driver to do: send, close, shut down.

use bytes::Bytes;
use gearshift_proto::{
    parse_admin, AdminCommand, Frame, Request, RequestError, Response, Submission,
};

use crate::ids::{ConnId, JobId};

/// One input from a connection.
#[derive(Debug, Clone)]
pub enum Input {
    /// A parsed binary request.
    Request(Request),
    /// A well-framed packet the protocol layer refused; answered with ERROR.
    Invalid(RequestError),
    /// An admin text line. Boxed: rare, and larger than any request, so
    /// inline it would make every input larger (inputs are moved on the
    /// way to the core).
    Admin(Box<AdminCommand>),
}

impl Input {
    /// Gives `feed` the input a decoded frame stands for: a packet parsed
    /// into a request (or refused), a text line parsed as an admin command.
    /// A plain submission (the busiest packet) is read in place and handed
    /// over from its own call, so where `feed` is inlined the compiler knows
    /// its kind and passes it on without assembling or copying a whole
    /// `Input`.
    #[inline(always)]
    pub fn feed<R>(frame: Frame, feed: impl FnOnce(Input) -> R) -> R {
        let other = match frame {
            Frame::Packet(p) => match Submission::cut(p) {
                Ok(s) => return feed(Input::Request(Request::Submit(s))),
                Err(p) => match Request::parse(&p) {
                    Ok(r) => Input::Request(r),
                    Err(e) => Input::Invalid(e),
                },
            },
            Frame::Text(line) => Input::Admin(Box::new(parse_admin(&line))),
        };
        feed(other)
    }
}

impl From<Frame> for Input {
    /// A decoded frame as the core takes it ([`Input::feed`]).
    #[inline]
    fn from(frame: Frame) -> Self {
        Input::feed(frame, |input| input)
    }
}

/// One thing the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send a binary packet to a connection.
    Send(ConnId, Response),
    /// Send JOB_CREATED for a new job, whose handle is this server's own
    /// `<prefix>:<id>`: [`crate::Core::encode_job_created`] writes the
    /// packet (without building a handle buffer for it) and
    /// [`crate::Core::job_created`] gives it as a [`Response`].
    Created(ConnId, JobId),
    /// Send admin text to a connection.
    Text(ConnId, Bytes),
    /// Send a per-job admin listing, rendered by the driver
    /// ([`crate::listing::Listing::render`]) off the core's thread.
    Listing(ConnId, Box<crate::listing::Listing>),
    /// Flush what was sent to the connection, then close it.
    Close(ConnId),
    /// An admin asked the server to stop.
    Shutdown {
        /// Stop accepting, let connections finish.
        graceful: bool,
    },
    /// A change the durable store must record, in order.
    Store(StoreOp),
    /// A job changed state, reported progress, or a worker came or went
    /// ([`crate::Core::set_lifecycle_events`]).
    Event(Box<crate::events::LiveEvent>),
}

/// One change for the durable store: the stores' own [`gearshift_persist::Op`],
/// so an op goes from the core to the backend without a conversion.
pub use gearshift_persist::Op as StoreOp;

/// A priority as a store keeps it: its index.
pub(crate) fn priority_byte(p: gearshift_proto::Priority) -> u8 {
    p.index() as u8
}

/// A stored priority back (an unknown one reads as normal).
pub(crate) fn stored_priority(p: u8) -> gearshift_proto::Priority {
    match p {
        0 => gearshift_proto::Priority::High,
        2 => gearshift_proto::Priority::Low,
        _ => gearshift_proto::Priority::Normal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_stays_small() {
        // Every request travels as one from the reading loop to the core's
        // rule: its largest form holds two buffers.
        assert!(std::mem::size_of::<Input>() <= 72);
    }
}
