//! Typed responses: every packet a server sends to a client or worker,
//! encoded to a `\0RES` packet and parsed back (for client libraries and tests).

use bytes::{Bytes, BytesMut};

use crate::error::RequestError;
use crate::frame::{decimal, encode_parts, Args, Magic, Packet};
use crate::packet_type::PacketType;
use crate::request::parse_atoi;

/// A packet sent by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// NOOP: wake up.
    Noop,
    /// NO_JOB: nothing to grab.
    NoJob,
    /// JOB_CREATED handle.
    JobCreated(Bytes),
    /// JOB_ASSIGN handle, function, data.
    JobAssign {
        /// Job handle.
        handle: Bytes,
        /// Function name.
        function: Bytes,
        /// Workload.
        data: Bytes,
    },
    /// JOB_ASSIGN_UNIQ handle, function, unique, data.
    JobAssignUniq {
        /// Job handle.
        handle: Bytes,
        /// Function name.
        function: Bytes,
        /// Unique id.
        unique: Bytes,
        /// Workload.
        data: Bytes,
    },
    /// JOB_ASSIGN_ALL handle, function, unique, reducer, data.
    JobAssignAll {
        /// Job handle.
        handle: Bytes,
        /// Function name.
        function: Bytes,
        /// Unique id.
        unique: Bytes,
        /// Reducer function name.
        reducer: Bytes,
        /// Workload.
        data: Bytes,
    },
    /// WORK_STATUS forwarded to a client.
    WorkStatus {
        /// Job handle.
        handle: Bytes,
        /// Numerator text.
        numerator: Bytes,
        /// Denominator text.
        denominator: Bytes,
    },
    /// WORK_DATA forwarded to a client.
    WorkData {
        /// Job handle.
        handle: Bytes,
        /// Payload.
        data: Bytes,
    },
    /// WORK_WARNING forwarded to a client.
    WorkWarning {
        /// Job handle.
        handle: Bytes,
        /// Payload.
        data: Bytes,
    },
    /// WORK_COMPLETE forwarded to a client.
    WorkComplete {
        /// Job handle.
        handle: Bytes,
        /// Result.
        data: Bytes,
    },
    /// WORK_FAIL: just the handle (no trailing NUL, unlike gearmand's downgrade).
    WorkFail(Bytes),
    /// WORK_EXCEPTION forwarded to a client that asked for exceptions.
    WorkException {
        /// Job handle.
        handle: Bytes,
        /// Exception payload.
        data: Bytes,
    },
    /// STATUS_RES.
    StatusRes {
        /// Job handle as asked.
        handle: Bytes,
        /// The server knows the job.
        known: bool,
        /// A worker holds the job.
        running: bool,
        /// Last WORK_STATUS numerator.
        numerator: u32,
        /// Last WORK_STATUS denominator.
        denominator: u32,
    },
    /// STATUS_RES_UNIQUE.
    StatusResUnique {
        /// Unique id as asked.
        unique: Bytes,
        /// The server knows the job.
        known: bool,
        /// A worker holds the job.
        running: bool,
        /// Last WORK_STATUS numerator.
        numerator: u32,
        /// Last WORK_STATUS denominator.
        denominator: u32,
        /// Foreground clients waiting on the job.
        waiting: u32,
    },
    /// ECHO_RES data.
    EchoRes(Bytes),
    /// ERROR code, text.
    Error {
        /// Machine-readable code, e.g. `JOB_NOT_FOUND`.
        code: Bytes,
        /// Human-readable text.
        text: Bytes,
    },
    /// OPTION_RES name.
    OptionRes(Bytes),
}

fn flag(b: bool) -> &'static [u8] {
    if b {
        b"1"
    } else {
        b"0"
    }
}

impl Response {
    /// An ERROR packet from static strings.
    pub fn error(code: &'static str, text: impl Into<Bytes>) -> Response {
        Response::Error {
            code: Bytes::from_static(code.as_bytes()),
            text: text.into(),
        }
    }

    /// Appends this response as a `\0RES` packet.
    pub fn encode(&self, out: &mut BytesMut) {
        use PacketType as T;
        let m = Magic::Res;
        match self {
            Response::Noop => encode_parts(m, T::Noop, &[], out),
            Response::NoJob => encode_parts(m, T::NoJob, &[], out),
            Response::JobCreated(h) => encode_parts(m, T::JobCreated, &[h], out),
            Response::JobAssign {
                handle,
                function,
                data,
            } => encode_parts(m, T::JobAssign, &[handle, function, data], out),
            Response::JobAssignUniq {
                handle,
                function,
                unique,
                data,
            } => encode_parts(m, T::JobAssignUniq, &[handle, function, unique, data], out),
            Response::JobAssignAll {
                handle,
                function,
                unique,
                reducer,
                data,
            } => encode_parts(
                m,
                T::JobAssignAll,
                &[handle, function, unique, reducer, data],
                out,
            ),
            Response::WorkStatus {
                handle,
                numerator,
                denominator,
            } => encode_parts(m, T::WorkStatus, &[handle, numerator, denominator], out),
            Response::WorkData { handle, data } => {
                encode_parts(m, T::WorkData, &[handle, data], out)
            }
            Response::WorkWarning { handle, data } => {
                encode_parts(m, T::WorkWarning, &[handle, data], out)
            }
            Response::WorkComplete { handle, data } => {
                encode_parts(m, T::WorkComplete, &[handle, data], out)
            }
            Response::WorkFail(h) => encode_parts(m, T::WorkFail, &[h], out),
            Response::WorkException { handle, data } => {
                encode_parts(m, T::WorkException, &[handle, data], out)
            }
            Response::StatusRes {
                handle,
                known,
                running,
                numerator,
                denominator,
            } => {
                let (mut n, mut d) = ([0; 20], [0; 20]);
                encode_parts(
                    m,
                    T::StatusRes,
                    &[
                        handle,
                        flag(*known),
                        flag(*running),
                        decimal(i64::from(*numerator), &mut n),
                        decimal(i64::from(*denominator), &mut d),
                    ],
                    out,
                )
            }
            Response::StatusResUnique {
                unique,
                known,
                running,
                numerator,
                denominator,
                waiting,
            } => {
                let (mut n, mut d, mut w) = ([0; 20], [0; 20], [0; 20]);
                encode_parts(
                    m,
                    T::StatusResUnique,
                    &[
                        unique,
                        flag(*known),
                        flag(*running),
                        decimal(i64::from(*numerator), &mut n),
                        decimal(i64::from(*denominator), &mut d),
                        decimal(i64::from(*waiting), &mut w),
                    ],
                    out,
                )
            }
            Response::EchoRes(d) => encode_parts(m, T::EchoRes, &[d], out),
            Response::Error { code, text } => encode_parts(m, T::Error, &[code, text], out),
            Response::OptionRes(o) => encode_parts(m, T::OptionRes, &[o], out),
        }
    }

    /// Parses a packet received by a client or worker.
    pub fn parse(packet: &Packet) -> Result<Response, RequestError> {
        use PacketType as T;
        let kind = packet.kind;
        if packet.magic != Magic::Res {
            return Err(RequestError::Malformed(kind));
        }
        let mut args = Args::split(kind, &packet.body).ok_or(RequestError::Malformed(kind))?;
        let mut next = || args.next_arg();
        let num = |b: Bytes| parse_atoi(&b).clamp(0, i64::from(u32::MAX)) as u32;
        Ok(match kind {
            T::Noop => Response::Noop,
            T::NoJob => Response::NoJob,
            T::JobCreated => Response::JobCreated(next()),
            T::JobAssign => Response::JobAssign {
                handle: next(),
                function: next(),
                data: next(),
            },
            T::JobAssignUniq => Response::JobAssignUniq {
                handle: next(),
                function: next(),
                unique: next(),
                data: next(),
            },
            T::JobAssignAll => Response::JobAssignAll {
                handle: next(),
                function: next(),
                unique: next(),
                reducer: next(),
                data: next(),
            },
            T::WorkStatus => Response::WorkStatus {
                handle: next(),
                numerator: next(),
                denominator: next(),
            },
            T::WorkData => Response::WorkData {
                handle: next(),
                data: next(),
            },
            T::WorkWarning => Response::WorkWarning {
                handle: next(),
                data: next(),
            },
            T::WorkComplete => Response::WorkComplete {
                handle: next(),
                data: next(),
            },
            T::WorkFail => Response::WorkFail(next()),
            T::WorkException => Response::WorkException {
                handle: next(),
                data: next(),
            },
            T::StatusRes => Response::StatusRes {
                handle: next(),
                known: next().as_ref() == b"1",
                running: next().as_ref() == b"1",
                numerator: num(next()),
                denominator: num(next()),
            },
            T::StatusResUnique => Response::StatusResUnique {
                unique: next(),
                known: next().as_ref() == b"1",
                running: next().as_ref() == b"1",
                numerator: num(next()),
                denominator: num(next()),
                waiting: num(next()),
            },
            T::EchoRes => Response::EchoRes(next()),
            T::Error => Response::Error {
                code: next(),
                text: next(),
            },
            T::OptionRes => Response::OptionRes(next()),
            other => return Err(RequestError::Malformed(other)),
        })
    }
}
