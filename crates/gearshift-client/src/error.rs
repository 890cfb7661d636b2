//! The crate's error type: one flat [`Error`] for clients, workers and the
//! admin client, with [`AdminErrorKind`] classifying the `ERR …` replies of
//! the admin text protocol.

use bytes::Bytes;
use gearshift_proto::FrameError;

/// A shorthand for results of this crate.
///
/// ```
/// fn parse_port(s: &str) -> gearshift_client::Result<u16> {
///     s.parse().map_err(|_| gearshift_client::Error::InvalidArgument("not a port".into()))
/// }
/// assert_eq!(parse_port("4730").unwrap(), 4730);
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to a Gearman server.
///
/// ```
/// use gearshift_client::Error;
/// let e = Error::Timeout;
/// assert_eq!(e.to_string(), "timed out");
/// assert!(e.is_transient());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The builder was given no server.
    #[error("no server configured")]
    NoServers,
    /// A builder or call argument is unusable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A TCP connection could not be opened.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The server address as configured.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TLS settings are unusable: a file that cannot be read, bad PEM, no
    /// certificate in a file, a key that does not fit its certificate.
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    /// The TLS handshake with a server failed: an untrusted or misnamed
    /// certificate, a server that wants a client certificate, a server that
    /// does not speak TLS on that port. Nothing was sent in plain text.
    #[error("TLS handshake with {addr} failed: {source}")]
    TlsHandshake {
        /// The server address as configured.
        addr: String,
        /// Why (a rustls error inside an `io::Error`, or a timeout).
        source: std::io::Error,
    },
    /// A plain-TCP connection was answered with a TLS record (a TLS alert):
    /// that port serves TLS, so the request was never taken as one.
    #[error("{addr} serves TLS (it answered plain TCP with a TLS alert)")]
    TlsPort {
        /// The server address as configured.
        addr: String,
    },
    /// Every configured server is down or was refused; nothing was sent.
    #[error("no server reachable (last error: {last})")]
    NoServerAvailable {
        /// The last failure seen.
        last: String,
    },
    /// The connection closed before the request was written (safe to retry).
    #[error("not connected")]
    NotConnected,
    /// The connection closed after the request was written: its outcome is unknown.
    #[error("connection lost")]
    ConnectionLost,
    /// A socket read or write failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The call did not finish within its timeout; its listener was detached.
    #[error("timed out")]
    Timeout,
    /// The server sent bytes that cannot be framed.
    #[error("bad frame from server: {0}")]
    Frame(#[from] FrameError),
    /// The server sent a well-framed packet this library cannot use here.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server answered with an ERROR packet.
    #[error("server error {code}: {text}")]
    Server {
        /// Machine-readable code, e.g. `JOB_NOT_FOUND` or `QUEUE_ERROR`.
        code: String,
        /// Human-readable text.
        text: String,
    },
    /// The job ended with WORK_FAIL.
    #[error("job {handle} failed")]
    JobFailed {
        /// The job handle.
        handle: String,
    },
    /// The job ended with WORK_EXCEPTION.
    #[error("job {handle} raised an exception: {}", String::from_utf8_lossy(.data))]
    JobException {
        /// The job handle.
        handle: String,
        /// The exception payload sent by the worker.
        data: Bytes,
    },
    /// An admin command was answered with `ERR …`.
    #[error("admin command refused ({kind:?}): {message}")]
    Admin {
        /// What kind of refusal.
        kind: AdminErrorKind,
        /// The reply after `ERR `, as sent.
        message: String,
    },
}

impl Error {
    /// True for failures that may go away by retrying later (timeouts,
    /// connection trouble), false for answers the server gave on purpose.
    ///
    /// ```
    /// use gearshift_client::Error;
    /// assert!(Error::ConnectionLost.is_transient());
    /// assert!(!Error::JobFailed { handle: "H:x:1".into() }.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        if let Error::TlsHandshake { source, .. } = self {
            // Certificate trouble (a rustls error) stays; a reset or a timeout may not.
            return source.kind() != std::io::ErrorKind::InvalidData;
        }
        matches!(
            self,
            Error::Connect { .. }
                | Error::NoServerAvailable { .. }
                | Error::NotConnected
                | Error::ConnectionLost
                | Error::Io(_)
                | Error::Timeout
        )
    }

    /// For [`Error::Admin`], the server's message for people: `ERR` lines
    /// spell spaces as `+` (and other bytes as `%XX`), which this decodes;
    /// `None` for other errors. The raw reply stays in `message`.
    ///
    /// ```
    /// use gearshift_client::{AdminErrorKind, Error};
    /// let e = Error::Admin {
    ///     kind: AdminErrorKind::UnknownJob,
    ///     message: "UNKNOWN_JOB job+not+found+or+expired".into(),
    /// };
    /// assert_eq!(e.admin_message().as_deref(), Some("UNKNOWN_JOB job not found or expired"));
    /// ```
    pub fn admin_message(&self) -> Option<String> {
        match self {
            Error::Admin { message, .. } => Some(decode_admin_text(message)),
            _ => None,
        }
    }

    pub(crate) fn protocol(what: impl Into<String>) -> Error {
        Error::Protocol(what.into())
    }
}

/// Decodes the text of an admin `ERR` reply for people: `+` is a space and
/// `%XX` the byte XX (gearmand's encoding); a `%` not followed by two hex
/// digits stays as it is, and bytes that are not UTF-8 are replaced.
///
/// ```
/// use gearshift_client::error::decode_admin_text;
/// assert_eq!(decode_admin_text("PERMISSION_DENIED changes+are+only+accepted"),
///            "PERMISSION_DENIED changes are only accepted");
/// assert_eq!(decode_admin_text("a%2Bb+100%"), "a+b 100%");
/// ```
pub fn decode_admin_text(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                // Two hex digits exactly (from_str_radix alone would take "+d").
                let hex = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(b) = hex {
                    out.push(b);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The kinds of `ERR …` reply the admin text protocol has (gearmand 1.1 and
/// Gearshift spell them the same).
///
/// ```
/// use gearshift_client::AdminErrorKind;
/// assert_eq!(AdminErrorKind::classify("function not found"), AdminErrorKind::FunctionNotFound);
/// assert_eq!(AdminErrorKind::classify("UNKNOWN_JOB"), AdminErrorKind::UnknownJob);
/// assert_eq!(
///     AdminErrorKind::classify("SCHEDULE_IN_CONFIG remove+it+from+the+config+file+and+reload"),
///     AdminErrorKind::ScheduleInConfig
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdminErrorKind {
    /// `ERR UNKNOWN_COMMAND …`: the server does not know the command.
    UnknownCommand,
    /// `ERR INVALID_ARGUMENTS …`: wrong number of words.
    InvalidArguments,
    /// `ERR UNKNOWN_SHOW_ARGUMENTS`.
    UnknownShowArguments,
    /// `ERR UNKNOWN_JOB`: `cancel job` with an unknown handle.
    UnknownJob,
    /// `ERR function not found`: `drop function` of an unknown function.
    FunctionNotFound,
    /// `ERR there are still …`: `drop function` of a busy function.
    FunctionBusy,
    /// `ERR PERMISSION_DENIED …`: e.g. `shutdown` from a remote peer.
    PermissionDenied,
    /// `ERR UNKNOWN_SCHEDULE …` (Gearshift): `drop schedule` with a handle
    /// that names no schedule.
    UnknownSchedule,
    /// `ERR SCHEDULE_IN_CONFIG …` (Gearshift): `drop schedule` of a
    /// `[[schedule]]` from the config file (remove it there and reload).
    ScheduleInConfig,
    /// Any other `ERR` reply (`UNKNOWN_ERROR`, …).
    Other,
}

impl AdminErrorKind {
    /// Classifies the text after `ERR `.
    ///
    /// ```
    /// use gearshift_client::AdminErrorKind;
    /// let k = AdminErrorKind::classify("UNKNOWN_COMMAND Unknown+server+commandfoo");
    /// assert_eq!(k, AdminErrorKind::UnknownCommand);
    /// ```
    pub fn classify(message: &str) -> AdminErrorKind {
        let word = message.split(' ').next().unwrap_or_default();
        match word {
            "UNKNOWN_COMMAND" => AdminErrorKind::UnknownCommand,
            "INVALID_ARGUMENTS" => AdminErrorKind::InvalidArguments,
            "UNKNOWN_SHOW_ARGUMENTS" => AdminErrorKind::UnknownShowArguments,
            "UNKNOWN_JOB" => AdminErrorKind::UnknownJob,
            "PERMISSION_DENIED" => AdminErrorKind::PermissionDenied,
            "UNKNOWN_SCHEDULE" => AdminErrorKind::UnknownSchedule,
            "SCHEDULE_IN_CONFIG" => AdminErrorKind::ScheduleInConfig,
            _ if message.starts_with("function not found") => AdminErrorKind::FunctionNotFound,
            _ if message.starts_with("there are still") => AdminErrorKind::FunctionBusy,
            _ => AdminErrorKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_text_is_decoded() {
        assert_eq!(
            decode_admin_text("UNKNOWN_JOB job+not+found+or+expired"),
            "UNKNOWN_JOB job not found or expired"
        );
        assert_eq!(decode_admin_text("x%20y%2b%41"), "x y+A");
        // Incomplete or non-hex escapes stay as written.
        assert_eq!(decode_admin_text("50%+done%4"), "50% done%4");
        assert_eq!(decode_admin_text("%zz"), "%zz");
        // A multi-byte character escaped byte by byte.
        assert_eq!(decode_admin_text("caf%C3%A9"), "café");
        assert_eq!(decode_admin_text("%FF"), "\u{fffd}");
        assert_eq!(decode_admin_text(""), "");
    }
}
