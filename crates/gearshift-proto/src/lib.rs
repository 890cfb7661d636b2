//! Gearman wire protocol for Gearshift, with no I/O.
//!
//! Bytes become [`Frame`]s ([`frame`]), binary frames become typed
//! [`Request`]s (what clients and workers send, [`request`]) or
//! [`Response`]s (what servers send, [`response`]), and text frames become
//! [`AdminCommand`]s ([`admin`]). Every type both parses and encodes, so a
//! server and a client library built on this crate cannot drift apart.
//!
//! - [`packet_type`]: the 42 numbered packet types and their body layouts.
//! - [`frame`]: cutting a stream into frames; headers; argument splitting.
//! - [`error`]: framing errors (fatal) and request errors (answered with ERROR).
//! - [`submit`]: what a SUBMIT_* request carries, read in place when plain.
//! - [`escape`]: client-chosen bytes in admin listings, and which names are refused.
//! - [`timefmt`]: the RFC 3339 times admin listings print, and reading them back.
//! - [`worker_stats`]: Gearshift's `stats` option (a worker's CPU and memory).
//! - [`link`]: the frames that carry many connections between cluster nodes.

pub mod admin;
pub mod error;
pub mod escape;
pub mod frame;
pub mod link;
pub mod packet_type;
pub mod request;
pub mod response;
pub mod submit;
pub mod timefmt;
pub mod worker_stats;

pub use admin::{parse_admin, AdminCommand};
pub use error::{FrameError, RequestError};
pub use frame::{decode_frame, Frame, Magic, Packet};
pub use packet_type::PacketType;
pub use request::{GrabKind, Priority, Progress, Request, Sched};
pub use response::Response;
pub use submit::{Submission, Submit};
