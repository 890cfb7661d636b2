//! What the core asks its driver to do: send, close, shut down.

use bytes::Bytes;
use gearshift_proto::{AdminCommand, Request, RequestError, Response};

use crate::ids::ConnId;

/// One input from a connection.
#[derive(Debug, Clone)]
pub enum Input {
    /// A parsed binary request.
    Request(Request),
    /// A well-framed packet the protocol layer refused; answered with ERROR.
    Invalid(RequestError),
    /// An admin text line.
    Admin(AdminCommand),
}

/// One thing the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send a binary packet to a connection.
    Send(ConnId, Response),
    /// Send admin text to a connection.
    Text(ConnId, Bytes),
    /// Flush what was sent to the connection, then close it.
    Close(ConnId),
    /// An admin asked the server to stop.
    Shutdown {
        /// Stop accepting, let connections finish.
        graceful: bool,
    },
}
