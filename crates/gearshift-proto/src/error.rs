//! Errors of the protocol layer: framing errors (fatal to a connection) and
//! request errors (answered with an ERROR packet, connection kept).

use thiserror::Error;

use crate::packet_type::PacketType;

/// A byte stream that cannot be cut into frames. The connection must close.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The first four bytes are neither `\0REQ` nor `\0RES`.
    #[error("bad packet magic {0:?}")]
    BadMagic([u8; 4]),
    /// Type 0 or a type above 42.
    #[error("unknown packet type {0}")]
    UnknownType(u32),
    /// The header announces a body over the configured maximum.
    #[error("packet body of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Announced body size.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
    /// An admin text line longer than 8 KiB.
    #[error("admin text line longer than 8192 bytes")]
    TextLineTooLong,
}

/// A well-framed packet the server refuses; answered with ERROR, connection kept.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequestError {
    /// A `\0RES` packet sent to the server.
    #[error("Request magic expected")]
    ResponseMagic,
    /// A type only a server may send, or one no server implements.
    #[error("Command not expected: {}", .0.name())]
    NotExpected(PacketType),
    /// The body holds fewer NUL separators than the type's layout needs.
    #[error("{} needs more arguments", .0.name())]
    MissingArguments(PacketType),
    /// A response packet received by a client with an unexpected body.
    #[error("malformed {} packet", .0.name())]
    Malformed(PacketType),
}

impl RequestError {
    /// The ERROR packet's code, as gearmand spells it.
    pub fn code(&self) -> &'static str {
        match self {
            RequestError::ResponseMagic => "INVALID_MAGIC",
            RequestError::NotExpected(_) => "INVALID_COMMAND",
            RequestError::MissingArguments(_) | RequestError::Malformed(_) => "INVALID_PACKET",
        }
    }

    /// The ERROR packet's text, as gearmand spells it where it has one.
    pub fn text(&self) -> String {
        match self {
            RequestError::ResponseMagic => "Request magic expected".to_owned(),
            RequestError::NotExpected(_) => "Command not expected".to_owned(),
            other => other.to_string(),
        }
    }
}
