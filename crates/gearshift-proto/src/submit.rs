//! Job submissions as a server takes them: [`Submission`] is what a
//! SUBMIT_* request carries, either read in place from its packet (the six
//! plain kinds, the busiest packets there are) or parsed into a [`Submit`]
//! (the epoch and reduce kinds, and what clients build to send).

use bytes::{Buf, Bytes};

use crate::frame::{Magic, Packet};
use crate::packet_type::PacketType;
use crate::request::Priority;

/// A job submission, whichever of the nine SUBMIT_* packets carried it.
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

/// A plain SUBMIT_JOB* packet (the six kinds that carry only function,
/// unique and workload), read in place: the function name and unique id
/// are read from the packet's body where they lie, and the workload is the
/// rest of that body, so a server takes a submission without cutting a
/// shared slice per argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitInPlace {
    /// The packet's body.
    body: Bytes,
    /// Where the function name's NUL is.
    function_end: usize,
    /// Where the unique id's NUL is.
    unique_end: usize,
    /// Queue priority.
    pub priority: Priority,
    /// Detached from the client.
    pub background: bool,
}

impl SubmitInPlace {
    /// Reads `packet` in place when it is a well-formed plain submission
    /// sent to a server; anything else (other types, `\0RES` magic, too few
    /// arguments) comes back untouched, for [`Request::parse`] to handle.
    pub fn cut(packet: Packet) -> Result<SubmitInPlace, Packet> {
        let plain = plain_submit(packet.kind).filter(|_| packet.magic == Magic::Req);
        let Some((priority, background)) = plain else {
            return Err(packet);
        };
        let body = &packet.body;
        let Some(function_end) = body.iter().position(|&b| b == 0) else {
            return Err(packet);
        };
        let Some(unique_len) = body[function_end + 1..].iter().position(|&b| b == 0) else {
            return Err(packet);
        };
        Ok(SubmitInPlace {
            unique_end: function_end + 1 + unique_len,
            function_end,
            body: packet.body,
            priority,
            background,
        })
    }

    /// Function name.
    pub fn function(&self) -> &[u8] {
        &self.body[..self.function_end]
    }

    /// Client-chosen unique id (may be empty).
    pub fn unique(&self) -> &[u8] {
        &self.body[self.function_end + 1..self.unique_end]
    }

    /// Workload.
    pub fn data(&self) -> &[u8] {
        &self.body[self.unique_end + 1..]
    }

    /// The unique id is empty.
    pub fn unique_is_empty(&self) -> bool {
        self.unique_end == self.function_end + 1
    }

    /// The workload as a shared buffer: the body itself, stepped past the
    /// function and unique (an empty one holds no buffer, like a slice).
    pub fn into_data(self) -> Bytes {
        let mut body = self.body;
        if self.unique_end + 1 == body.len() {
            return Bytes::new();
        }
        body.advance(self.unique_end + 1);
        body
    }

    /// The packet type that carried it.
    pub fn packet_type(&self) -> PacketType {
        plain_kind(self.priority, self.background)
    }

    /// The same submission as a [`Submit`].
    pub fn into_submit(self) -> Submit {
        let function = self.body.slice(..self.function_end);
        let unique = self.body.slice(self.function_end + 1..self.unique_end);
        let (priority, background) = (self.priority, self.background);
        Submit {
            function,
            unique,
            data: self.into_data(),
            priority,
            background,
            epoch: None,
            reducer: None,
        }
    }
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

/// What a SUBMIT_* request carries. Read the fields through the accessors:
/// which form it has is the codec's business.
#[derive(Debug, Clone)]
pub enum Submission {
    /// A plain submission, read in place from its packet.
    InPlace(SubmitInPlace),
    /// Any submission, parsed or built. Boxed: it is the larger form.
    Parsed(Box<Submit>),
}

impl Submission {
    /// Function name.
    #[inline]
    pub fn function(&self) -> &[u8] {
        match self {
            Submission::InPlace(s) => s.function(),
            Submission::Parsed(s) => &s.function,
        }
    }

    /// Client-chosen unique id (may be empty).
    #[inline]
    pub fn unique(&self) -> &[u8] {
        match self {
            Submission::InPlace(s) => s.unique(),
            Submission::Parsed(s) => &s.unique,
        }
    }

    /// Workload.
    #[inline]
    pub fn data(&self) -> &[u8] {
        match self {
            Submission::InPlace(s) => s.data(),
            Submission::Parsed(s) => &s.data,
        }
    }

    /// Queue priority.
    #[inline]
    pub fn priority(&self) -> Priority {
        match self {
            Submission::InPlace(s) => s.priority,
            Submission::Parsed(s) => s.priority,
        }
    }

    /// Detached from the client.
    #[inline]
    pub fn background(&self) -> bool {
        match self {
            Submission::InPlace(s) => s.background,
            Submission::Parsed(s) => s.background,
        }
    }

    /// SUBMIT_JOB_EPOCH's Unix time (seconds) to run at.
    #[inline]
    pub fn epoch(&self) -> Option<i64> {
        match self {
            Submission::InPlace(_) => None,
            Submission::Parsed(s) => s.epoch,
        }
    }

    /// SUBMIT_REDUCE_JOB*'s reducer function name.
    pub fn reducer(&self) -> Option<&Bytes> {
        match self {
            Submission::InPlace(_) => None,
            Submission::Parsed(s) => s.reducer.as_ref(),
        }
    }

    /// The packet type that carries this submission.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Submission::InPlace(s) => s.packet_type(),
            Submission::Parsed(s) => s.packet_type(),
        }
    }

    /// The same submission as a [`Submit`].
    pub fn into_submit(self) -> Submit {
        match self {
            Submission::InPlace(s) => s.into_submit(),
            Submission::Parsed(s) => *s,
        }
    }
}

/// Equal when they say the same, whichever form each has.
impl PartialEq for Submission {
    fn eq(&self, other: &Self) -> bool {
        self.function() == other.function()
            && self.unique() == other.unique()
            && self.data() == other.data()
            && self.priority() == other.priority()
            && self.background() == other.background()
            && self.epoch() == other.epoch()
            && self.reducer() == other.reducer()
    }
}

impl Eq for Submission {}

impl From<Submit> for Submission {
    fn from(s: Submit) -> Self {
        Submission::Parsed(Box::new(s))
    }
}

impl From<Box<Submit>> for Submission {
    fn from(s: Box<Submit>) -> Self {
        Submission::Parsed(s)
    }
}

impl From<SubmitInPlace> for Submission {
    fn from(s: SubmitInPlace) -> Self {
        Submission::InPlace(s)
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
        assert!(matches!(s, Submission::InPlace(_)));
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
        assert!(matches!(s, Submission::Parsed(_)));
        assert_eq!(s.epoch(), Some(100));
        let p = plain(PacketType::SubmitReduceJob, b"f\0u\0r\0\0d");
        let Ok(Request::Submit(s)) = Request::from_packet(p) else {
            panic!("parses")
        };
        assert_eq!(s.reducer().map(|r| &r[..]), Some(&b"r"[..]));
        assert_eq!(s.data(), b"d");
    }

    #[test]
    fn forms_compare_by_content() {
        let p = plain(PacketType::SubmitJob, b"f\0\0");
        let Ok(inplace) = SubmitInPlace::cut(p) else {
            panic!("cuts")
        };
        let a = Submission::from(inplace.clone());
        let mut other = inplace.into_submit();
        assert_eq!(a, Submission::from(other.clone()));
        other.data = Bytes::from_static(b"x");
        assert_ne!(a, Submission::from(other));
    }
}
