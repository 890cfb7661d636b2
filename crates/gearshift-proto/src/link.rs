//! The link between two cluster nodes: many client connections multiplexed
//! over one socket. Each frame names a connection by a number the sending
//! node chose (`vid`) and says what happened to it: it opened, it sent
//! bytes, or it is done sending. Two frames (vid 0, no bytes) speak for
//! the whole link: `Ready`, the job server's first, says it reads the link
//! from now on (a link that ends before it carried nothing anywhere), and
//! `Bye` ends the link in order: the sender read nothing more, so whatever
//! it did not answer or close it never took.
//!
//! A frame is `kind: u8`, `vid: u32`, `len: u32` (big-endian), then `len`
//! bytes. An `Open` frame's bytes are the client's address, a space and the
//! client's TLS identity (possibly empty), as UTF-8.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes before a frame's payload.
pub const LINK_HEADER_LEN: usize = 9;

/// What a link frame says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkFrame {
    /// A connection opened; its client's address and TLS identity.
    Open {
        /// The connection's number on this link.
        vid: u32,
        /// The client's address, as the node that accepted it saw it.
        peer: String,
        /// The client certificate's subject, when it presented one.
        identity: Option<String>,
    },
    /// Bytes the connection sent (or is sent).
    Data {
        /// The connection's number on this link.
        vid: u32,
        /// The bytes, exactly as on the client's socket.
        bytes: Bytes,
    },
    /// The sender is done with the connection: no more bytes follow.
    Close {
        /// The connection's number on this link.
        vid: u32,
    },
    /// The sender closes the link in order and reads no more.
    Bye,
    /// The job server took the link: it reads it from now on.
    Ready,
}

const OPEN: u8 = 1;
const DATA: u8 = 2;
const CLOSE: u8 = 3;
const BYE: u8 = 4;
const READY: u8 = 5;

/// Why a link's bytes cannot be read: the link is broken and must close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// An unknown frame kind.
    #[error("unknown link frame kind {0}")]
    Kind(u8),
    /// A frame larger than the link accepts.
    #[error("link frame of {len} bytes is over the limit of {max}")]
    TooLarge {
        /// The frame's payload size.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// An `Open` frame whose payload is not an address and an identity.
    #[error("malformed link open frame")]
    Open,
    /// A `Close`, `Bye` or `Ready` frame with a payload.
    #[error("link close frame with a payload")]
    Close,
    /// A `Bye` or `Ready` frame that names a connection.
    #[error("a frame for the whole link names connection {0}")]
    LinkWide(u32),
}

impl LinkFrame {
    /// Appends the frame to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            LinkFrame::Open {
                vid,
                peer,
                identity,
            } => {
                let id = identity.as_deref().unwrap_or("");
                header(out, OPEN, *vid, peer.len() + 1 + id.len());
                out.put_slice(peer.as_bytes());
                out.put_u8(b' ');
                out.put_slice(id.as_bytes());
            }
            LinkFrame::Data { vid, bytes } => encode_data(out, *vid, bytes),
            LinkFrame::Close { vid } => header(out, CLOSE, *vid, 0),
            LinkFrame::Bye => header(out, BYE, 0, 0),
            LinkFrame::Ready => header(out, READY, 0, 0),
        }
    }
}

/// Appends a `Data` frame carrying `bytes` without building a [`LinkFrame`].
pub fn encode_data(out: &mut BytesMut, vid: u32, bytes: &[u8]) {
    header(out, DATA, vid, bytes.len());
    out.put_slice(bytes);
}

fn header(out: &mut BytesMut, kind: u8, vid: u32, len: usize) {
    out.reserve(LINK_HEADER_LEN + len);
    out.put_u8(kind);
    out.put_u32(vid);
    // Callers keep payloads under the decoder's limit, far below u32::MAX.
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
}

/// Cuts the next whole frame off `buf`: `Ok(None)` until one has arrived.
/// A payload over `max` bytes is an error (the link closes).
pub fn decode_link(buf: &mut BytesMut, max: usize) -> Result<Option<LinkFrame>, LinkError> {
    if buf.len() < LINK_HEADER_LEN {
        return Ok(None);
    }
    let kind = buf[0];
    let vid = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    let len = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) as usize;
    if !(OPEN..=READY).contains(&kind) {
        return Err(LinkError::Kind(kind));
    }
    if len > max {
        return Err(LinkError::TooLarge { len, max });
    }
    if buf.len() < LINK_HEADER_LEN + len {
        buf.reserve(LINK_HEADER_LEN + len - buf.len());
        return Ok(None);
    }
    buf.advance(LINK_HEADER_LEN);
    let body = buf.split_to(len).freeze();
    Ok(Some(match kind {
        OPEN => {
            let text = std::str::from_utf8(&body).map_err(|_| LinkError::Open)?;
            let (peer, id) = text.split_once(' ').ok_or(LinkError::Open)?;
            LinkFrame::Open {
                vid,
                peer: peer.to_owned(),
                identity: (!id.is_empty()).then(|| id.to_owned()),
            }
        }
        DATA => LinkFrame::Data { vid, bytes: body },
        _ if !body.is_empty() => return Err(LinkError::Close),
        CLOSE => LinkFrame::Close { vid },
        _ if vid != 0 => return Err(LinkError::LinkWide(vid)),
        BYE => LinkFrame::Bye,
        _ => LinkFrame::Ready,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frames: &[LinkFrame]) -> Vec<LinkFrame> {
        let mut buf = BytesMut::new();
        for f in frames {
            f.encode(&mut buf);
        }
        let mut got = Vec::new();
        // Fed a byte at a time: a frame is only cut once it is whole.
        let mut feed = BytesMut::new();
        for b in buf.iter() {
            feed.put_u8(*b);
            while let Some(f) = decode_link(&mut feed, 1 << 20).expect("valid") {
                got.push(f);
            }
        }
        assert!(feed.is_empty());
        got
    }

    #[test]
    fn frames_round_trip_whole_or_in_pieces() {
        let frames = vec![
            LinkFrame::Open {
                vid: 7,
                peer: "10.0.0.1:5555".into(),
                identity: None,
            },
            LinkFrame::Open {
                vid: u32::MAX,
                peer: "[::1]:1".into(),
                identity: Some("CN=worker one".into()),
            },
            LinkFrame::Data {
                vid: 7,
                bytes: Bytes::from_static(b"\0REQ\0\0\0\x01\0\0\0\0"),
            },
            LinkFrame::Data {
                vid: 7,
                bytes: Bytes::new(),
            },
            LinkFrame::Close { vid: 7 },
            LinkFrame::Bye,
            LinkFrame::Ready,
        ];
        assert_eq!(round_trip(&frames), frames);
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut b = BytesMut::from(&[9u8, 0, 0, 0, 1, 0, 0, 0, 0][..]);
        assert_eq!(decode_link(&mut b, 10), Err(LinkError::Kind(9)));
        let mut b = BytesMut::new();
        encode_data(&mut b, 1, &[0u8; 11]);
        assert_eq!(
            decode_link(&mut b, 10),
            Err(LinkError::TooLarge { len: 11, max: 10 })
        );
        let mut b = BytesMut::from(&[OPEN, 0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b'][..]);
        assert_eq!(decode_link(&mut b, 10), Err(LinkError::Open));
        let mut b = BytesMut::from(&[CLOSE, 0, 0, 0, 1, 0, 0, 0, 1, b'x'][..]);
        assert_eq!(decode_link(&mut b, 10), Err(LinkError::Close));
        let mut b = BytesMut::from(&[BYE, 0, 0, 0, 0, 0, 0, 0, 1, b'x'][..]);
        assert_eq!(decode_link(&mut b, 10), Err(LinkError::Close));
        let mut b = BytesMut::from(&[READY, 0, 0, 0, 3, 0, 0, 0, 0][..]);
        assert_eq!(decode_link(&mut b, 10), Err(LinkError::LinkWide(3)));
    }
}
