//! Typed requests: every packet a client or worker sends to a server,
//! parsed from a binary packet and encoded back to one.

use bytes::{Bytes, BytesMut};

use crate::error::RequestError;
use crate::frame::{decimal, encode_parts, Args, Magic, Packet};
use crate::packet_type::PacketType;
use crate::submit::{plain_submit, Submission, Submit};

/// The three Gearman priorities, highest first; the discriminant is the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Runs before everything else.
    High = 0,
    /// The default.
    Normal = 1,
    /// Runs when nothing else is queued.
    Low = 2,
}

impl Priority {
    /// All priorities, highest first.
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// Index 0..3, highest first.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which GRAB_JOB variant a worker sent; it decides the JOB_ASSIGN variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrabKind {
    /// GRAB_JOB → JOB_ASSIGN.
    Plain,
    /// GRAB_JOB_UNIQ → JOB_ASSIGN_UNIQ.
    Uniq,
    /// GRAB_JOB_ALL → JOB_ASSIGN_ALL (or JOB_ASSIGN_UNIQ without reducer).
    All,
}

/// A packet sent to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// CAN_DO function.
    CanDo(Bytes),
    /// CAN_DO_TIMEOUT function, timeout text (milliseconds, parsed like `atoi`).
    CanDoTimeout {
        /// Function name.
        function: Bytes,
        /// Raw decimal timeout.
        timeout: Bytes,
    },
    /// CANT_DO function.
    CantDo(Bytes),
    /// RESET_ABILITIES.
    ResetAbilities,
    /// PRE_SLEEP.
    PreSleep,
    /// Any SUBMIT_* but SCHED; a plain one received by a server is read in
    /// place ([`Request::from_packet`]).
    Submit(Submission),
    /// SUBMIT_JOB_SCHED: a recurring background job (Gearshift; gearmand 1.1
    /// refuses it). Boxed: it is rare, and would double every request's size.
    SubmitSched(Box<Sched>),
    /// GRAB_JOB, GRAB_JOB_UNIQ, GRAB_JOB_ALL.
    Grab(GrabKind),
    /// WORK_STATUS handle, numerator, denominator (raw text). Boxed: its
    /// three buffers would make every request a third larger.
    WorkStatus(Box<Progress>),
    /// WORK_DATA handle, data.
    WorkData {
        /// Job handle.
        handle: Bytes,
        /// Payload.
        data: Bytes,
    },
    /// WORK_WARNING handle, data.
    WorkWarning {
        /// Job handle.
        handle: Bytes,
        /// Payload.
        data: Bytes,
    },
    /// WORK_COMPLETE handle, result.
    WorkComplete {
        /// Job handle.
        handle: Bytes,
        /// Result.
        data: Bytes,
    },
    /// WORK_FAIL handle.
    WorkFail {
        /// Job handle.
        handle: Bytes,
    },
    /// WORK_EXCEPTION handle, exception data.
    WorkException {
        /// Job handle.
        handle: Bytes,
        /// Exception payload.
        data: Bytes,
    },
    /// GET_STATUS handle.
    GetStatus(Bytes),
    /// GET_STATUS_UNIQUE unique.
    GetStatusUnique(Bytes),
    /// ECHO_REQ data.
    Echo(Bytes),
    /// OPTION_REQ name.
    Option(Bytes),
    /// SET_CLIENT_ID id.
    SetClientId(Bytes),
}

/// A WORK_STATUS's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Job handle.
    pub handle: Bytes,
    /// Numerator text.
    pub numerator: Bytes,
    /// Denominator text.
    pub denominator: Bytes,
}

/// A SUBMIT_JOB_SCHED's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sched {
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Minute, hour, day of month, month, day of week (0 = Monday), as text.
    pub when: [Bytes; 5],
    /// Workload of every job it submits.
    pub data: Bytes,
}

impl Request {
    /// Parses a packet received by a server, taking its body: the same
    /// request as [`Request::parse`], but a plain SUBMIT_JOB* (the busiest
    /// packet) is read in place, its arguments never cut into slices.
    #[inline]
    pub fn from_packet(packet: Packet) -> Result<Request, RequestError> {
        match Submission::cut(packet) {
            Ok(s) => Ok(Request::Submit(s)),
            Err(packet) => Request::parse(&packet),
        }
    }

    /// A WORK_STATUS request.
    pub fn work_status(handle: Bytes, numerator: Bytes, denominator: Bytes) -> Request {
        Request::WorkStatus(Box::new(Progress {
            handle,
            numerator,
            denominator,
        }))
    }

    /// A SUBMIT_* request for `s` (as a client builds one to send).
    pub fn submit(s: impl Into<Submission>) -> Request {
        Request::Submit(s.into())
    }

    /// Parses a packet received by a server.
    pub fn parse(packet: &Packet) -> Result<Request, RequestError> {
        use PacketType::*;
        let kind = packet.kind;
        if packet.magic == Magic::Res {
            return Err(RequestError::ResponseMagic);
        }
        match kind {
            Unused | Noop | JobCreated | NoJob | JobAssign | EchoRes | Error | StatusRes
            | AllYours | OptionRes | JobAssignUniq | JobAssignAll | StatusResUnique => {
                return Err(RequestError::NotExpected(kind))
            }
            _ => {}
        }
        let mut args =
            Args::split(kind, &packet.body).ok_or(RequestError::MissingArguments(kind))?;
        let mut next = || args.next_arg();
        if let Some((priority, background)) = plain_submit(kind) {
            if let Ok(s) = Submission::cut(packet.clone()) {
                return Ok(Request::Submit(s));
            }
            return Ok(Request::submit(Submit {
                function: next(),
                unique: next(),
                data: next(),
                priority,
                background,
                epoch: None,
                reducer: None,
            }));
        }
        Ok(match kind {
            CanDo => Request::CanDo(next()),
            CantDo => Request::CantDo(next()),
            CanDoTimeout => Request::CanDoTimeout {
                function: next(),
                timeout: next(),
            },
            ResetAbilities => Request::ResetAbilities,
            PreSleep => Request::PreSleep,
            SubmitJobSched => {
                let function = next();
                let unique = next();
                let when = [next(), next(), next(), next(), next()];
                Request::SubmitSched(Box::new(Sched {
                    function,
                    unique,
                    when,
                    data: next(),
                }))
            }
            GrabJob => Request::Grab(GrabKind::Plain),
            GrabJobUniq => Request::Grab(GrabKind::Uniq),
            GrabJobAll => Request::Grab(GrabKind::All),
            SubmitJobEpoch => {
                let function = next();
                let unique = next();
                let epoch = parse_atoi(&next());
                Request::submit(Submit {
                    function,
                    unique,
                    data: next(),
                    priority: Priority::Normal,
                    background: true,
                    epoch: Some(epoch),
                    reducer: None,
                })
            }
            SubmitReduceJob | SubmitReduceJobBackground => {
                let function = next();
                let unique = next();
                let reducer = next();
                let _aggregator = next();
                Request::submit(Submit {
                    function,
                    unique,
                    data: next(),
                    priority: Priority::Normal,
                    background: kind == SubmitReduceJobBackground,
                    epoch: None,
                    reducer: Some(reducer),
                })
            }
            WorkStatus => {
                let handle = next();
                let numerator = next();
                Request::work_status(handle, numerator, next())
            }
            WorkData => Request::WorkData {
                handle: next(),
                data: next(),
            },
            WorkWarning => Request::WorkWarning {
                handle: next(),
                data: next(),
            },
            WorkComplete => Request::WorkComplete {
                handle: next(),
                data: next(),
            },
            WorkFail => Request::WorkFail { handle: next() },
            WorkException => Request::WorkException {
                handle: next(),
                data: next(),
            },
            GetStatus => Request::GetStatus(next()),
            GetStatusUnique => Request::GetStatusUnique(next()),
            EchoReq => Request::Echo(next()),
            OptionReq => Request::Option(next()),
            SetClientId => Request::SetClientId(next()),
            _ => return Err(RequestError::NotExpected(kind)),
        })
    }

    /// Appends this request as a `\0REQ` packet.
    pub fn encode(&self, out: &mut BytesMut) {
        use PacketType::*;
        let m = Magic::Req;
        match self {
            Request::CanDo(f) => encode_parts(m, CanDo, &[f], out),
            Request::CanDoTimeout { function, timeout } => {
                encode_parts(m, CanDoTimeout, &[function, timeout], out)
            }
            Request::CantDo(f) => encode_parts(m, CantDo, &[f], out),
            Request::ResetAbilities => encode_parts(m, ResetAbilities, &[], out),
            Request::PreSleep => encode_parts(m, PreSleep, &[], out),
            Request::Submit(s) => {
                let kind = s.packet_type();
                let (function, unique, data) = (s.function(), s.unique(), s.data());
                if let Some(reducer) = s.reducer() {
                    encode_parts(m, kind, &[function, unique, reducer, b"", data], out)
                } else if let Some(epoch) = s.epoch() {
                    let mut when = [0; 20];
                    let epoch = decimal(epoch, &mut when);
                    encode_parts(m, kind, &[function, unique, epoch, data], out)
                } else {
                    encode_parts(m, kind, &[function, unique, data], out)
                }
            }
            Request::SubmitSched(s) => encode_parts(
                m,
                SubmitJobSched,
                &[
                    &s.function,
                    &s.unique,
                    &s.when[0],
                    &s.when[1],
                    &s.when[2],
                    &s.when[3],
                    &s.when[4],
                    &s.data,
                ],
                out,
            ),
            Request::Grab(GrabKind::Plain) => encode_parts(m, GrabJob, &[], out),
            Request::Grab(GrabKind::Uniq) => encode_parts(m, GrabJobUniq, &[], out),
            Request::Grab(GrabKind::All) => encode_parts(m, GrabJobAll, &[], out),
            Request::WorkStatus(p) => encode_parts(
                m,
                WorkStatus,
                &[&p.handle, &p.numerator, &p.denominator],
                out,
            ),
            Request::WorkData { handle, data } => encode_parts(m, WorkData, &[handle, data], out),
            Request::WorkWarning { handle, data } => {
                encode_parts(m, WorkWarning, &[handle, data], out)
            }
            Request::WorkComplete { handle, data } => {
                encode_parts(m, WorkComplete, &[handle, data], out)
            }
            Request::WorkFail { handle } => encode_parts(m, WorkFail, &[handle], out),
            Request::WorkException { handle, data } => {
                encode_parts(m, WorkException, &[handle, data], out)
            }
            Request::GetStatus(h) => encode_parts(m, GetStatus, &[h], out),
            Request::GetStatusUnique(u) => encode_parts(m, GetStatusUnique, &[u], out),
            Request::Echo(d) => encode_parts(m, EchoReq, &[d], out),
            Request::Option(o) => encode_parts(m, OptionReq, &[o], out),
            Request::SetClientId(id) => encode_parts(m, SetClientId, &[id], out),
        }
    }
}

/// Parses a decimal like C's `atoi`/`strtoll`: optional spaces and sign, then
/// leading digits; anything else ends the number; no digits give 0.
/// Saturates instead of overflowing.
pub fn parse_atoi(text: &[u8]) -> i64 {
    let mut i = 0;
    while i < text.len() && matches!(text[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut negative = false;
    if i < text.len() && (text[i] == b'-' || text[i] == b'+') {
        negative = text[i] == b'-';
        i += 1;
    }
    let mut value: i64 = 0;
    while i < text.len() && text[i].is_ascii_digit() {
        let d = i64::from(text[i] - b'0');
        value = value.saturating_mul(10);
        value = if negative {
            value.saturating_sub(d)
        } else {
            value.saturating_add(d)
        };
        i += 1;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_like_c() {
        assert_eq!(parse_atoi(b"42"), 42);
        assert_eq!(parse_atoi(b"  -7x"), -7);
        assert_eq!(parse_atoi(b"abc"), 0);
        assert_eq!(parse_atoi(b""), 0);
        assert_eq!(parse_atoi(b"99999999999999999999999"), i64::MAX);
    }

    #[test]
    fn a_request_stays_small() {
        // Every packet a connection sends travels as one of these (to the
        // shared hub, in batches), and is moved on the way: the large
        // variants are boxed, so the largest left holds two buffers.
        assert!(std::mem::size_of::<Request>() <= 72);
    }
}
