//! Framing: cutting a byte stream into binary packets and admin text lines,
//! and writing packet headers.
//!
//! A connection may mix both kinds: a frame whose first byte is NUL is a
//! binary packet (12-byte header, then the body), anything else is a text
//! line ending in `\n`. Decoding never allocates for an incomplete frame:
//! it checks the header first (magic, type, size limit) and returns
//! `Ok(None)` until the whole frame is buffered.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::FrameError;
use crate::packet_type::PacketType;

/// Length of a binary packet header.
pub const HEADER_LEN: usize = 12;
/// Magic of a packet sent to a server.
pub const MAGIC_REQ: [u8; 4] = *b"\0REQ";
/// Magic of a packet sent by a server.
pub const MAGIC_RES: [u8; 4] = *b"\0RES";
/// Longest admin text line accepted, terminator included (gearmand's receive buffer).
pub const MAX_TEXT_LINE: usize = 8192;
/// Default cap on a packet body (64 MiB).
pub const DEFAULT_MAX_PACKET: usize = 64 << 20;

/// Which direction a packet's magic says it travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Magic {
    /// `\0REQ`: to a server.
    Req,
    /// `\0RES`: from a server.
    Res,
}

impl Magic {
    /// The four magic bytes.
    pub fn bytes(self) -> [u8; 4] {
        match self {
            Magic::Req => MAGIC_REQ,
            Magic::Res => MAGIC_RES,
        }
    }
}

/// One binary packet: magic, type and the raw body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Direction marker.
    pub magic: Magic,
    /// Packet type.
    pub kind: PacketType,
    /// Everything after the header.
    pub body: Bytes,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A binary packet.
    Packet(Packet),
    /// An admin text line without its `\n` and without one `\r` before it.
    Text(Bytes),
}

/// Cuts frames off the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed. Every error is fatal to the
/// connection: after it the stream position is unknown (bad magic, unknown
/// type) or the frame cannot be buffered (too large).
pub fn decode_frame(buf: &mut BytesMut, max_body: usize) -> Result<Option<Frame>, FrameError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if first != 0 {
        return decode_text(buf);
    }
    let Some((magic, kind, size)) = binary_header(buf, max_body)? else {
        return Ok(None);
    };
    if size == 0 {
        // GRAB_JOB, PRE_SLEEP, …: no need to share the buffer for nothing.
        buf.advance(HEADER_LEN);
        return Ok(Some(Frame::Packet(Packet {
            magic,
            kind,
            body: Bytes::new(),
        })));
    }
    // One cut of the shared buffer for header and body; stepping over the
    // header in the frozen slice is cheaper than in the growable buffer.
    let mut body = buf.split_to(HEADER_LEN + size).freeze();
    body.advance(HEADER_LEN);
    Ok(Some(Frame::Packet(Packet { magic, kind, body })))
}

/// As [`decode_frame`], with a packet's bytes as they came (its body shares
/// them; empty for a text line): for a relay that reads a packet and passes
/// it on unchanged, without encoding it again.
pub fn decode_frame_whole(
    buf: &mut BytesMut,
    max_body: usize,
) -> Result<Option<(Frame, Bytes)>, FrameError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if first != 0 {
        return Ok(decode_text(buf)?.map(|f| (f, Bytes::new())));
    }
    let Some((magic, kind, size)) = binary_header(buf, max_body)? else {
        return Ok(None);
    };
    let whole = buf.split_to(HEADER_LEN + size).freeze();
    let body = whole.slice(HEADER_LEN..);
    Ok(Some((Frame::Packet(Packet { magic, kind, body }), whole)))
}

/// A whole binary packet's magic, type and body size at the front of `buf`
/// (which starts with a zero byte); None until all of it is there.
#[inline(always)]
fn binary_header(
    buf: &BytesMut,
    max_body: usize,
) -> Result<Option<(Magic, PacketType, usize)>, FrameError> {
    if buf.len() < HEADER_LEN {
        // A prefix of a header can already be judged for its magic.
        let have = buf.len().min(4);
        if buf[..have] != MAGIC_REQ[..have] && buf[..have] != MAGIC_RES[..have] {
            return Err(bad_magic(&buf[..have]));
        }
        return Ok(None);
    }
    let magic = match [buf[0], buf[1], buf[2], buf[3]] {
        MAGIC_REQ => Magic::Req,
        MAGIC_RES => Magic::Res,
        other => return Err(bad_magic(&other)),
    };
    let number = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let kind = PacketType::from_u32(number).ok_or(FrameError::UnknownType(number))?;
    let size = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if size > max_body {
        return Err(FrameError::TooLarge {
            size,
            max: max_body,
        });
    }
    if buf.len() < HEADER_LEN + size {
        // No reservation for the announced size: a bare header must not make
        // the server commit memory for a body that may never come.
        return Ok(None);
    }
    Ok(Some((magic, kind, size)))
}

fn bad_magic(seen: &[u8]) -> FrameError {
    let mut m = [0u8; 4];
    m[..seen.len()].copy_from_slice(seen);
    FrameError::BadMagic(m)
}

fn decode_text(buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    let window = buf.len().min(MAX_TEXT_LINE);
    match buf[..window].iter().position(|&b| b == b'\n') {
        Some(nl) => {
            let mut line = buf.split_to(nl + 1);
            line.truncate(nl);
            if line.last() == Some(&b'\r') {
                line.truncate(nl - 1);
            }
            Ok(Some(Frame::Text(line.freeze())))
        }
        None if buf.len() >= MAX_TEXT_LINE => Err(FrameError::TextLineTooLong),
        None => Ok(None),
    }
}

/// Writes a packet whose body is `body` (one argument, or raw bytes).
#[inline]
pub fn encode_one(magic: Magic, kind: PacketType, body: &[u8], out: &mut BytesMut) {
    out.reserve(HEADER_LEN + body.len());
    out.extend_from_slice(&header(magic, kind, body.len()));
    out.extend_from_slice(body);
}

/// A packet header for a body of `body_len` bytes.
#[inline]
fn header(magic: Magic, kind: PacketType, body_len: usize) -> [u8; HEADER_LEN] {
    let mut header = [0; HEADER_LEN];
    header[..4].copy_from_slice(&magic.bytes());
    header[4..8].copy_from_slice(&kind.as_u32().to_be_bytes());
    header[8..].copy_from_slice(&(body_len as u32).to_be_bytes());
    header
}

/// Writes a packet whose body is `parts` joined by NUL bytes.
pub fn encode_parts(magic: Magic, kind: PacketType, parts: &[&[u8]], out: &mut BytesMut) {
    let body_len: usize =
        parts.iter().map(|p| p.len()).sum::<usize>() + parts.len().saturating_sub(1);
    out.reserve(HEADER_LEN + body_len);
    // `extend_from_slice` inlines where `put_slice` (a trait method) does not.
    out.extend_from_slice(&header(magic, kind, body_len));
    if let [first, rest @ ..] = parts {
        out.extend_from_slice(first);
        for p in rest {
            out.put_u8(0);
            out.extend_from_slice(p);
        }
    }
}

/// `n` in decimal, written into the tail of `buf` (no allocation).
pub fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let digits = decimal_u64(n.unsigned_abs(), buf).len();
    let mut i = buf.len() - digits;
    if n < 0 {
        // At most 19 digits: room for the sign.
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// `n` in decimal, written into the tail of `buf` (no allocation).
pub fn decimal_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Splits a body into the arguments its type's layout names.
///
/// Commands with a data part: `n` NUL-terminated arguments, then the data.
/// Commands without: `n - 1` NUL-terminated arguments, then the raw rest.
/// Returns `None` when the body holds fewer separators than the layout needs.
pub fn split_args(kind: PacketType, body: &Bytes) -> Option<Vec<Bytes>> {
    let mut args = Args::split(kind, body)?;
    Some((0..args.len()).map(|_| args.next_arg()).collect())
}

/// Most NUL-terminated arguments any layout has (SUBMIT_JOB_SCHED).
const MAX_TERMINATED: usize = 7;

/// A body's arguments, cut without allocating: the same cut as
/// [`split_args`], handed out one at a time as slices of the body.
#[derive(Debug)]
pub struct Args<'a> {
    body: &'a Bytes,
    /// Where each NUL-terminated argument's NUL is (bodies fit in u32).
    nuls: [u32; MAX_TERMINATED],
    /// NUL-terminated arguments.
    terminated: u8,
    /// Arguments taken so far.
    taken: u8,
    /// A last argument runs to the end of the body.
    rest: bool,
}

impl<'a> Args<'a> {
    /// Cuts `body` as `kind`'s layout says; `None` when the body holds
    /// fewer separators than the layout needs.
    #[inline]
    pub fn split(kind: PacketType, body: &'a Bytes) -> Option<Args<'a>> {
        let (nargs, has_data) = kind.layout();
        let terminated = if has_data {
            nargs
        } else {
            nargs.saturating_sub(1)
        };
        let mut nuls = [0u32; MAX_TERMINATED];
        let mut from = 0;
        for nul in nuls.iter_mut().take(terminated) {
            from += body[from..].iter().position(|&b| b == 0)?;
            *nul = from as u32;
            from += 1;
        }
        Some(Args {
            body,
            nuls,
            terminated: terminated as u8,
            taken: 0,
            // No argument at all may be expected, yet a body came: gearmand ignores it.
            rest: has_data || nargs > 0,
        })
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        usize::from(self.terminated) + usize::from(self.rest)
    }

    /// No arguments.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next argument; empty once all were taken.
    #[inline]
    pub fn next_arg(&mut self) -> Bytes {
        let i = usize::from(self.taken);
        let start = match i {
            0 => 0,
            _ => self.nuls[(i - 1).min(MAX_TERMINATED - 1)] as usize + 1,
        };
        let end = if i < usize::from(self.terminated) {
            self.nuls[i] as usize
        } else if i == usize::from(self.terminated) && self.rest {
            self.body.len()
        } else {
            return Bytes::new();
        };
        self.taken += 1;
        self.body.slice(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_like_to_string() {
        for n in [0, 1, -1, 9, 10, 42, -7, 4_294_967_295, i64::MAX, i64::MIN] {
            let mut buf = [0; 20];
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
        let mut buf = [0; 20];
        assert_eq!(
            decimal_u64(u64::MAX, &mut buf),
            u64::MAX.to_string().as_bytes()
        );
    }

    #[test]
    fn args_match_split_args() {
        for (kind, body) in [
            (PacketType::SubmitJob, &b"f\0u\0a\0b"[..]),
            (PacketType::SubmitJob, b"\0\0"),
            (PacketType::CanDo, b"fn\0x"),
            (PacketType::GrabJob, b"ignored"),
            (PacketType::EchoReq, b""),
            (PacketType::StatusResUnique, b"u\x001\x000\x003\x004\x005"),
        ] {
            let body = Bytes::copy_from_slice(body);
            let mut args = Args::split(kind, &body).expect("enough separators");
            let all = split_args(kind, &body).expect("enough separators");
            assert_eq!(args.len(), all.len());
            for want in all {
                assert_eq!(args.next_arg(), want);
            }
            assert_eq!(args.next_arg(), Bytes::new());
        }
    }

    #[test]
    fn split_keeps_nul_in_data() {
        let body = Bytes::from_static(b"f\0u\0a\0b");
        let args = split_args(PacketType::SubmitJob, &body).expect("two NULs present");
        assert_eq!(args, vec![&b"f"[..], &b"u"[..], &b"a\0b"[..]]);
    }

    #[test]
    fn split_raw_last_argument() {
        let body = Bytes::from_static(b"fn\0with-nul");
        let args = split_args(PacketType::CanDo, &body).expect("raw arg");
        assert_eq!(args, vec![&b"fn\0with-nul"[..]]);
    }

    #[test]
    fn split_too_few_separators() {
        let body = Bytes::from_static(b"only-one\0");
        assert!(split_args(PacketType::SubmitJob, &body).is_none());
    }

    fn next(buf: &mut BytesMut) -> (Frame, Bytes) {
        decode_frame_whole(buf, 1 << 20)
            .expect("a good frame")
            .expect("a whole frame")
    }

    #[test]
    fn whole_frames_come_with_their_bytes() {
        let mut buf = BytesMut::new();
        encode_one(Magic::Req, PacketType::SubmitJob, b"f\0u\0data", &mut buf);
        encode_one(Magic::Res, PacketType::Noop, b"", &mut buf);
        buf.extend_from_slice(b"status\r\n");
        let first_len = HEADER_LEN + 8;
        let expected = buf.clone();
        encode_one(Magic::Req, PacketType::GrabJob, b"", &mut buf);
        buf.truncate(buf.len() - 1);

        let (frame, whole) = next(&mut buf);
        assert_eq!(&whole[..], &expected[..first_len]);
        let Frame::Packet(p) = frame else {
            panic!("a packet")
        };
        assert_eq!(
            (p.magic, p.kind, &p.body[..]),
            (Magic::Req, PacketType::SubmitJob, &b"f\0u\0data"[..])
        );

        let (frame, whole) = next(&mut buf);
        assert_eq!(&whole[..], &expected[first_len..first_len + HEADER_LEN]);
        assert!(matches!(
            frame,
            Frame::Packet(Packet {
                kind: PacketType::Noop,
                ..
            })
        ));

        let (frame, whole) = next(&mut buf);
        assert!(whole.is_empty());
        let line = decode_frame(&mut BytesMut::from(&b"status\r\n"[..]), 0);
        assert_eq!(Ok(Some(frame)), line);

        // A packet cut short waits; one too large is refused.
        assert_eq!(decode_frame_whole(&mut buf, 1 << 20), Ok(None));
        let mut big = BytesMut::new();
        encode_one(Magic::Req, PacketType::EchoReq, &[7; 100], &mut big);
        assert!(matches!(
            decode_frame_whole(&mut big, 99),
            Err(FrameError::TooLarge { size: 100, max: 99 })
        ));
    }

    #[test]
    fn text_line_strips_one_cr() {
        let mut buf = BytesMut::from(&b"status\r\r\nversion\n"[..]);
        let f = decode_frame(&mut buf, 100).expect("ok");
        assert_eq!(f, Some(Frame::Text(Bytes::from_static(b"status\r"))));
        let f = decode_frame(&mut buf, 100).expect("ok");
        assert_eq!(f, Some(Frame::Text(Bytes::from_static(b"version"))));
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_header_with_bad_magic_fails_early() {
        let mut buf = BytesMut::from(&b"\0RE"[..]);
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
        let mut buf = BytesMut::from(&b"\0XY"[..]);
        assert!(matches!(
            decode_frame(&mut buf, 100),
            Err(FrameError::BadMagic(_))
        ));
    }
}
