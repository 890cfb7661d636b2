//! Identifiers the core hands out or receives, a cheap hasher for maps
//! keyed by them, and job handles, `<prefix>:<n>`: the job number counter
//! (never reused, and kept behind the store's reservation), handles printed
//! from the id when a packet needs one instead of stored with every job,
//! and read back by parsing.
//!
//! Printing does not allocate per handle: handles are written one after
//! another into a shared 4 KiB buffer and handed out as slices of it (a
//! reference count each). The buffer is reused once every handle cut from
//! it has been dropped, which happens as soon as the packets carrying them
//! are written, so in steady state no allocation happens at all.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{decimal_u64 as decimal, encode_one};
use gearshift_proto::{Magic, PacketType};

/// A connection, numbered by the server (never reused while the core runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A job: the number at the end of its handle. Never reused.
pub type JobId = u64;

/// Index of a function in the core's function table.
pub type FuncId = usize;

/// Hashes one integer key with a multiply; ids are dense counters, so this
/// spreads them well and costs far less than SipHash on the hot path.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by numbers (jobs, connections, owners) or by handles this
/// server made; never by a client's bytes, as the hash has no key.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// A set of such keys.
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Handle numbers reserved in the store ahead of use. A restart skips at
/// most this many numbers.
pub const RESERVE_AHEAD: JobId = 100_000;

/// Size of each handle buffer.
const CHUNK: usize = 4096;

/// Prints and parses this server's handles.
#[derive(Debug)]
pub struct Handles {
    prefix: Box<[u8]>,
    /// `<prefix>:`.
    head: Box<[u8]>,
    buf: BytesMut,
    /// The last handle made and its id: ids are handed out one after
    /// another, so the next handle is usually this one with its number
    /// counted up in place, without printing the number again.
    last: Vec<u8>,
    last_id: Option<JobId>,
}

impl Handles {
    /// Handles with this prefix.
    pub fn new(prefix: &str) -> Self {
        Handles {
            prefix: prefix.as_bytes().into(),
            head: [prefix.as_bytes(), b":"].concat().into(),
            buf: BytesMut::new(),
            last: Vec::new(),
            last_id: None,
        }
    }

    /// The prefix (handles are `<prefix>:<n>`).
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The handle of job `id`.
    pub fn make(&mut self, id: JobId) -> Bytes {
        let len = self.print(id).len();
        if self.buf.capacity() < len {
            self.buf.reserve(CHUNK.max(len));
        }
        self.buf.extend_from_slice(&self.last);
        self.buf.split_to(len).freeze()
    }

    /// The handle of job `id`, printed into the buffer of the last one.
    fn print(&mut self, id: JobId) -> &[u8] {
        let next = self.last_id.and_then(|l| l.checked_add(1)) == Some(id);
        if !(next && count_up(&mut self.last[self.head.len()..])) {
            let mut d = [0; 20];
            self.last.clear();
            self.last.extend_from_slice(&self.head);
            self.last.extend_from_slice(decimal(id, &mut d));
        }
        self.last_id = Some(id);
        &self.last
    }

    /// Appends a JOB_CREATED packet for job `id`.
    pub fn encode_created(&mut self, id: JobId, out: &mut BytesMut) {
        let handle = self.print(id);
        encode_one(Magic::Res, PacketType::JobCreated, handle, out);
    }

    /// The handle of job `id`, in a buffer of its own (for a record kept
    /// long, which must not pin a shared buffer).
    pub fn make_owned(&self, id: JobId) -> Bytes {
        let mut out = Vec::with_capacity(self.prefix.len() + 21);
        self.write(&mut out, id);
        out.into()
    }

    /// Appends the handle of job `id`.
    pub fn write(&self, out: &mut Vec<u8>, id: JobId) {
        let mut d = [0; 20];
        out.extend_from_slice(&self.prefix);
        out.push(b':');
        out.extend_from_slice(decimal(id, &mut d));
    }

    /// Whether `handle` is exactly the handle of job `id`.
    pub fn is(&self, handle: &[u8], id: JobId) -> bool {
        let mut d = [0; 20];
        handle
            .strip_prefix(&self.prefix[..])
            .and_then(|rest| rest.strip_prefix(b":"))
            .is_some_and(|rest| rest == decimal(id, &mut d))
    }

    /// The id in a handle of this server's exact form (`<prefix>:<n>`,
    /// `n` without leading zeros).
    pub fn parse(&self, handle: &[u8]) -> Option<JobId> {
        let rest = handle.strip_prefix(&self.prefix[..])?.strip_prefix(b":")?;
        if rest.is_empty() || rest.len() > 20 || rest[0] == b'0' {
            return None;
        }
        let mut id: JobId = 0;
        for &b in rest {
            if !b.is_ascii_digit() {
                return None;
            }
            id = id.checked_mul(10)?.checked_add(JobId::from(b - b'0'))?;
        }
        Some(id)
    }

    /// Shows the handle of job `id` (for logs), without allocating.
    pub fn display(&self, id: JobId) -> impl fmt::Display + '_ {
        Show(&self.prefix, id)
    }
}

/// Adds one to the decimal number in `digits`, in place; false when it
/// needs one more digit (all nines), which the caller prints afresh.
fn count_up(digits: &mut [u8]) -> bool {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return true;
        }
    }
    false
}

struct Show<'a>(&'a [u8], JobId);

impl fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", String::from_utf8_lossy(self.0), self.1)
    }
}

/// Every job's handle as its clients know it: this server's own form, or,
/// for a job restored from records written under another prefix, the
/// handle it was written with (looked up both ways).
#[derive(Debug)]
pub(crate) struct JobHandles {
    own: Handles,
    by_handle: HashMap<Bytes, JobId>,
    by_id: IdMap<JobId, Bytes>,
    /// The next job's number: it only grows.
    next: JobId,
    /// Numbers below this are reserved in the store.
    reserved: JobId,
}

impl JobHandles {
    /// Handles of `prefix`, numbered from `first` (at least 1).
    pub(crate) fn new(prefix: &str, first: JobId) -> Self {
        JobHandles {
            own: Handles::new(prefix),
            by_handle: HashMap::new(),
            by_id: IdMap::default(),
            next: first.max(1),
            reserved: 0,
        }
    }

    /// A new job's (or schedule's) number, never handed out before.
    #[inline]
    pub(crate) fn issue(&mut self) -> JobId {
        let id = self.next;
        self.next = self.next.saturating_add(1);
        id
    }

    /// Moves the store's reservation ahead once the counter nears its end:
    /// the new end to store, if it moved.
    #[inline]
    pub(crate) fn reserve_ahead(&mut self) -> Option<JobId> {
        if self.next.saturating_add(RESERVE_AHEAD / 2) < self.reserved {
            return None;
        }
        self.reserved = self.next.saturating_add(RESERVE_AHEAD);
        Some(self.reserved)
    }

    /// A restored job, schedule or record holds number `id`: the counter
    /// moves past it.
    pub(crate) fn seen(&mut self, id: JobId) {
        self.next = self.next.max(id.saturating_add(1));
    }

    /// After a restart: the store's first never-used number is `next`, and
    /// its reservation ends there.
    pub(crate) fn restart_at(&mut self, next: JobId) {
        self.next = self.next.max(next);
        self.reserved = self.next;
    }

    /// The reservation covers every number handed out or seen.
    pub(crate) fn cover_seen(&mut self) {
        self.reserved = self.reserved.max(self.next);
    }

    /// This server's own handles (a new job's is always this form).
    #[inline]
    pub(crate) fn own(&mut self) -> &mut Handles {
        &mut self.own
    }

    /// The id in a handle of this server's own form only.
    pub(crate) fn parse_own(&self, handle: &[u8]) -> Option<JobId> {
        self.own.parse(handle)
    }

    /// The prefix of this server's own handles.
    pub(crate) fn prefix(&self) -> &[u8] {
        self.own.prefix()
    }

    /// A restored job (or schedule) keeps the handle it was stored with;
    /// one of another prefix stays findable by it.
    pub(crate) fn restored(&mut self, id: JobId, handle: &Bytes) {
        if !self.own.is(handle, id) {
            self.by_handle.insert(handle.clone(), id);
            self.by_id.insert(id, handle.clone());
        }
    }

    /// A job is gone: its foreign handle, if any, with it.
    #[inline]
    pub(crate) fn forget(&mut self, id: JobId) {
        if !self.by_id.is_empty() {
            if let Some(h) = self.by_id.remove(&id) {
                self.by_handle.remove(&h);
            }
        }
    }

    /// The id a handle names (its own form, or a restored one's), whether
    /// or not that job still lives.
    #[inline]
    pub(crate) fn id_of(&self, handle: &[u8]) -> Option<JobId> {
        if !self.by_handle.is_empty() {
            if let Some(&id) = self.by_handle.get(handle) {
                return Some(id);
            }
        }
        self.own.parse(handle)
    }

    /// Whether `handle` is the handle job `id`'s clients know.
    pub(crate) fn is(&self, handle: &[u8], id: JobId) -> bool {
        match self.by_id.get(&id) {
            Some(h) => h[..] == *handle,
            None => self.own.parse(handle) == Some(id),
        }
    }

    /// A restored job's foreign handle, if it has one.
    #[inline]
    pub(crate) fn foreign(&self, id: JobId) -> Option<&Bytes> {
        if self.by_id.is_empty() {
            return None;
        }
        self.by_id.get(&id)
    }

    /// The handle of job `id`.
    #[inline]
    pub(crate) fn of(&mut self, id: JobId) -> Bytes {
        match self.foreign(id) {
            Some(h) => h.clone(),
            None => self.own.make(id),
        }
    }

    /// Appends the handle of job `id` to admin text.
    pub(crate) fn write(&self, out: &mut Vec<u8>, id: JobId) {
        match self.foreign(id) {
            Some(h) => out.extend_from_slice(h),
            None => self.own.write(out, id),
        }
    }

    /// The handle of job `id` for a log line.
    pub(crate) fn text(&self, id: JobId) -> String {
        let mut out = Vec::new();
        self.write(&mut out, id);
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Length of a packet header.
    const HEADER: usize = gearshift_proto::frame::HEADER_LEN;

    #[test]
    fn print_and_parse() {
        let mut h = Handles::new("H:host");
        assert_eq!(h.make(1), Bytes::from_static(b"H:host:1"));
        assert_eq!(h.make(u64::MAX), format!("H:host:{}", u64::MAX).as_bytes());
        assert_eq!(h.make_owned(42), Bytes::from_static(b"H:host:42"));
        assert_eq!(h.parse(b"H:host:42"), Some(42));
        assert_eq!(
            h.parse(format!("H:host:{}", u64::MAX).as_bytes()),
            Some(u64::MAX)
        );
        assert_eq!(h.parse(b"H:host:18446744073709551616"), None);
        assert_eq!(h.parse(b"H:host:042"), None);
        assert_eq!(h.parse(b"H:host:0"), None);
        assert_eq!(h.parse(b"H:host:"), None);
        assert_eq!(h.parse(b"H:host:4x"), None);
        assert_eq!(h.parse(b"H:other:4"), None);
        assert!(h.is(b"H:host:0", 0));
        assert!(h.is(b"H:host:17", 17));
        assert!(!h.is(b"H:host:017", 17));
        assert_eq!(h.display(7).to_string(), "H:host:7");
    }

    #[test]
    fn counting_up_matches_printing() {
        let mut h = Handles::new("H:h");
        let ids = (1..=1_100)
            .chain([5, 6, 7, 99_999, 100_000, 100_001, 3, 4])
            .chain([u64::MAX - 1, u64::MAX, 1]);
        for id in ids {
            assert_eq!(h.make(id), format!("H:h:{id}").as_bytes(), "id {id}");
        }
    }

    #[test]
    fn job_created_packets_carry_the_handle() {
        let mut h = Handles::new("H:h");
        let mut out = BytesMut::new();
        for id in [9, 10, 11, 5] {
            h.encode_created(id, &mut out);
        }
        let mut want = BytesMut::new();
        for id in [9, 10, 11, 5] {
            gearshift_proto::Response::JobCreated(format!("H:h:{id}").into()).encode(&mut want);
        }
        assert_eq!(out, want);
    }

    proptest::proptest! {
        /// Whatever order handles are asked for in — the next id, the same
        /// one again, an older one, a jump across a digit boundary — each
        /// is its own id printed, through both ways of making one, and
        /// parses back to that id.
        #[test]
        fn counted_up_handles_are_always_their_own_id(
            start in proptest::prop_oneof![1u64..2000, 9_990u64..10_010, (u64::MAX - 40)..u64::MAX],
            steps in proptest::collection::vec((0u8..6, 0u64..1200), 1..600),
        ) {
            let mut h = Handles::new("H:p");
            let mut id = start;
            let mut kept = Vec::new();
            for (kind, n) in steps {
                id = match kind {
                    0..=2 => id.saturating_add(1),
                    3 => id,
                    4 => id.saturating_sub(n).max(1),
                    _ => id.saturating_add(n),
                };
                let want = format!("H:p:{id}");
                if n % 2 == 0 {
                    let handle = h.make(id);
                    proptest::prop_assert_eq!(&handle[..], want.as_bytes());
                    kept.push((id, handle));
                } else {
                    let mut out = BytesMut::new();
                    h.encode_created(id, &mut out);
                    proptest::prop_assert_eq!(&out[HEADER..], want.as_bytes());
                }
            }
            // Handles already handed out never change afterwards.
            for (id, handle) in kept {
                proptest::prop_assert_eq!(h.parse(&handle), Some(id));
            }
        }
    }

    #[test]
    fn many_handles_share_a_few_buffers() {
        let mut h = Handles::new("H:localhost");
        let kept: Vec<Bytes> = (1..=10_000).map(|id| h.make(id)).collect();
        for (id, handle) in (1..=10_000).zip(&kept) {
            assert_eq!(h.parse(handle), Some(id));
        }
    }

    #[test]
    fn job_numbers_only_grow_and_the_reservation_stays_ahead() {
        let mut h = JobHandles::new("H:x", 0);
        assert_eq!(h.issue(), 1, "numbers start at 1");
        assert_eq!(h.reserve_ahead(), Some(2 + RESERVE_AHEAD));
        assert_eq!(h.reserve_ahead(), None, "still well ahead");
        h.seen(RESERVE_AHEAD);
        assert_eq!(h.issue(), RESERVE_AHEAD + 1);
        assert_eq!(h.reserve_ahead(), Some(RESERVE_AHEAD + 2 + RESERVE_AHEAD));
        h.seen(5);
        assert_eq!(
            h.issue(),
            RESERVE_AHEAD + 2,
            "a lower restored number moves nothing"
        );
        h.restart_at(7);
        assert_eq!(h.issue(), RESERVE_AHEAD + 3);
        let mut fresh = JobHandles::new("H:x", 1);
        fresh.restart_at(50);
        fresh.seen(80);
        fresh.cover_seen();
        assert_eq!(fresh.issue(), 81);
        // The reservation ended at 81 (covering what was seen): move it.
        assert_eq!(fresh.reserve_ahead(), Some(82 + RESERVE_AHEAD));
    }
}
