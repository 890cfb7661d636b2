//! Job submissions: [`Submission`] is what a SUBMIT_* request carries. A
//! server reads a plain one (the six SUBMIT_JOB* kinds, the busiest packets
//! there are) in place from its packet's body; [`Submit`] is the same
//! submission with its arguments apart, as a client builds one to send.

use bytes::{Buf, Bytes};

use crate::frame::{Magic, Packet};
use crate::packet_type::PacketType;
use crate::request::Priority;

/// A job submission with its arguments apart, whichever of the nine
/// SUBMIT_* packets carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submit {
    /// Function name.
    pub function: Bytes,
    /// Client-chosen unique id (may be empty).
    pub unique: Bytes,
    /// Workload.
    pub data: Bytes,
    /// Queue priority.
    pub priority: Priority,
    /// Detached from the client (no WORK_* forwarded).
    pub background: bool,
    /// SUBMIT_JOB_EPOCH: the Unix time (seconds) to run at.
    pub epoch: Option<i64>,
    /// SUBMIT_REDUCE_JOB*: the reducer function name.
    pub reducer: Option<Bytes>,
}

/// Priority and background flag of the six plain SUBMIT_JOB* types.
pub(crate) fn plain_submit(kind: PacketType) -> Option<(Priority, bool)> {
    use PacketType::*;
    Some(match kind {
        SubmitJob => (Priority::Normal, false),
        SubmitJobBg => (Priority::Normal, true),
        SubmitJobHigh => (Priority::High, false),
        SubmitJobHighBg => (Priority::High, true),
        SubmitJobLow => (Priority::Low, false),
        SubmitJobLowBg => (Priority::Low, true),
        _ => return None,
    })
}

/// The plain SUBMIT_JOB* type for a priority and background flag.
fn plain_kind(priority: Priority, background: bool) -> PacketType {
    use PacketType::*;
    match (priority, background) {
        (Priority::High, false) => SubmitJobHigh,
        (Priority::High, true) => SubmitJobHighBg,
        (Priority::Normal, false) => SubmitJob,
        (Priority::Normal, true) => SubmitJobBg,
        (Priority::Low, false) => SubmitJobLow,
        (Priority::Low, true) => SubmitJobLowBg,
    }
}

impl Submit {
    /// The packet type that carries this submission.
    pub fn packet_type(&self) -> PacketType {
        use PacketType::*;
        if self.reducer.is_some() {
            return if self.background {
                SubmitReduceJobBackground
            } else {
                SubmitReduceJob
            };
        }
        if self.epoch.is_some() {
            return SubmitJobEpoch;
        }
        plain_kind(self.priority, self.background)
    }
}

/// What a SUBMIT_* request carries: one buffer holding the function name,
/// a NUL, the unique id, a NUL and the workload (a plain packet's body as
/// it arrived), read where they lie, so a server takes a submission without
/// cutting a shared slice per argument. The rare epoch and reducer ride
/// beside it.
#[derive(Clone, PartialEq, Eq)]
pub struct Submission {
    body: Bytes,
    /// Where the function name's NUL is.
    function_end: u32,
    /// Where the unique id's NUL is.
    unique_end: u32,
    priority: Priority,
    background: bool,
    extra: Option<Box<Extra>>,
}

/// The arguments only SUBMIT_JOB_EPOCH and SUBMIT_REDUCE_JOB* carry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Extra {
    epoch: Option<i64>,
    reducer: Option<Bytes>,
}

impl Submission {
    /// Reads `packet` in place when it is a well-formed plain submission
    /// sent to a server; anything else (other types, `\0RES` magic, too few
    /// arguments, a body past 4 GiB) comes back untouched.
    #[inline]
    pub fn cut(packet: Packet) -> Result<Submission, Packet> {
        let plain = plain_submit(packet.kind).filter(|_| packet.magic == Magic::Req);
        let Some((priority, background)) = plain else {
            return Err(packet);
        };
        let body = &packet.body;
        if u32::try_from(body.len()).is_err() {
            return Err(packet);
        }
        let Some(function_end) = body.iter().position(|&b| b == 0) else {
            return Err(packet);
        };
        let Some(unique_len) = body[function_end + 1..].iter().position(|&b| b == 0) else {
            return Err(packet);
        };
        Ok(Submission {
            unique_end: (function_end + 1 + unique_len) as u32,
            function_end: function_end as u32,
            body: packet.body,
            priority,
            background,
            extra: None,
        })
    }

    /// Function name.
    #[inline]
    pub fn function(&self) -> &[u8] {
        &self.body[..self.function_end as usize]
    }

    /// Client-chosen unique id (may be empty).
    #[inline]
    pub fn unique(&self) -> &[u8] {
        &self.body[self.function_end as usize + 1..self.unique_end as usize]
    }

    /// Workload.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.body[self.unique_end as usize + 1..]
    }

    /// The unique id is empty.
    #[inline]
    pub fn unique_is_empty(&self) -> bool {
        self.unique_end == self.function_end + 1
    }

    /// Queue priority.
    #[inline]
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Detached from the client.
    #[inline]
    pub fn background(&self) -> bool {
        self.background
    }

    /// SUBMIT_JOB_EPOCH's Unix time (seconds) to run at.
    #[inline]
    pub fn epoch(&self) -> Option<i64> {
        self.extra.as_ref().and_then(|e| e.epoch)
    }

    /// SUBMIT_REDUCE_JOB*'s reducer function name.
    #[inline]
    pub fn reducer(&self) -> Option<&Bytes> {
        self.extra.as_ref().and_then(|e| e.reducer.as_ref())
    }

    /// Gives up the reducer, if any.
    pub fn take_reducer(&mut self) -> Option<Bytes> {
        self.extra.as_mut().and_then(|e| e.reducer.take())
    }

    /// The workload as a shared buffer: the body itself, stepped past the
    /// function and unique (an empty one holds no buffer, like a slice).
    pub fn into_data(self) -> Bytes {
        let start = self.unique_end as usize + 1;
        let mut body = self.body;
        if start == body.len() {
            return Bytes::new();
        }
        body.advance(start);
        body
    }

    /// The packet type that carries this submission.
    pub fn packet_type(&self) -> PacketType {
        use PacketType::*;
        match &self.extra {
            Some(e) if e.reducer.is_some() => {
                if self.background {
                    SubmitReduceJobBackground
                } else {
                    SubmitReduceJob
                }
            }
            Some(e) if e.epoch.is_some() => SubmitJobEpoch,
            _ => plain_kind(self.priority, self.background),
        }
    }

    /// The same submission with its arguments apart.
    pub fn into_submit(mut self) -> Submit {
        let function = self.body.slice(..self.function_end as usize);
        let unique = self
            .body
            .slice(self.function_end as usize + 1..self.unique_end as usize);
        let (priority, background, epoch) = (self.priority, self.background, self.epoch());
        let reducer = self.take_reducer();
        Submit {
            function,
            unique,
            data: self.into_data(),
            priority,
            background,
            epoch,
            reducer,
        }
    }
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("function", &Bytes::copy_from_slice(self.function()))
            .field("unique", &Bytes::copy_from_slice(self.unique()))
            .field("data_len", &self.data().len())
            .field("priority", &self.priority)
            .field("background", &self.background)
            .field("extra", &self.extra)
            .finish()
    }
}

/// One buffer of the function, unique and workload: a client's submission
/// (or a server's epoch or reduce one) copied together once.
impl From<Submit> for Submission {
    fn from(s: Submit) -> Self {
        let fit = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut body = Vec::with_capacity(s.function.len() + s.unique.len() + s.data.len() + 2);
        body.extend_from_slice(&s.function);
        body.push(0);
        body.extend_from_slice(&s.unique);
        body.push(0);
        body.extend_from_slice(&s.data);
        let extra = (s.epoch.is_some() || s.reducer.is_some()).then(|| {
            Box::new(Extra {
                epoch: s.epoch,
                reducer: s.reducer,
            })
        });
        Submission {
            function_end: fit(s.function.len()),
            unique_end: fit(s.function.len() + 1 + s.unique.len()),
            body: Bytes::from(body),
            priority: s.priority,
            background: s.background,
            extra,
        }
    }
}

impl From<Box<Submit>> for Submission {
    fn from(s: Box<Submit>) -> Self {
        Submission::from(*s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;
    use bytes::BytesMut;

    fn plain(kind: PacketType, body: &'static [u8]) -> Packet {
        Packet {
            magic: Magic::Req,
            kind,
            body: Bytes::from_static(body),
        }
    }

    #[test]
    fn a_server_reads_plain_submissions_in_place() {
        let p = plain(PacketType::SubmitJobHighBg, b"resize\0u1\0the data");
        let Ok(Request::Submit(s)) = Request::from_packet(p.clone()) else {
            panic!("parses")
        };

        assert_eq!(s.function(), b"resize");
        assert_eq!(s.unique(), b"u1");
        assert_eq!(s.data(), b"the data");
        assert_eq!((s.priority(), s.background()), (Priority::High, true));
        // The same request as the borrowing parse gives, and the same bytes
        // when encoded again.
        let parsed = Request::parse(&p).expect("parses");
        assert_eq!(Request::Submit(s.clone()), parsed);
        let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
        Request::Submit(s).encode(&mut a);
        parsed.encode(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn other_submissions_are_parsed() {
        let p = plain(PacketType::SubmitJobEpoch, b"f\0u\x00100\0d");
        let Ok(Request::Submit(s)) = Request::from_packet(p) else {
            panic!("parses")
        };

        assert_eq!(s.epoch(), Some(100));
        let p = plain(PacketType::SubmitReduceJob, b"f\0u\0r\0\0d");
        let Ok(Request::Submit(s)) = Request::from_packet(p) else {
            panic!("parses")
        };
        assert_eq!(s.reducer().map(|r| &r[..]), Some(&b"r"[..]));
        assert_eq!(s.data(), b"d");
    }

    #[test]
    fn a_built_submission_equals_a_read_one() {
        let p = plain(PacketType::SubmitJob, b"f\0\0");
        let Ok(a) = Submission::cut(p) else {
            panic!("cuts")
        };
        let mut other = a.clone().into_submit();
        assert_eq!(a, Submission::from(other.clone()));
        other.data = Bytes::from_static(b"x");
        assert_ne!(a, Submission::from(other));
    }
}
