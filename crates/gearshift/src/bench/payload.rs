//! The workloads `gearshift bench` sends: `seq:N;` followed by filler up to
//! the requested size, so that a worker can tell which job it got (the
//! exactly-once check of `drain`) and an echo can be compared byte for byte.

use bytes::{BufMut, Bytes, BytesMut};

/// The tag in front of every workload.
const PREFIX: &[u8] = b"seq:";
/// Ends the sequence number.
const END: u8 = b';';

/// Makes the workloads of one run: every one `size` bytes long, or just the
/// tag when `size` is smaller than it.
#[derive(Debug, Clone)]
pub struct Payloads {
    size: usize,
    filler: Bytes,
}

impl Payloads {
    /// Workloads of `size` bytes.
    pub fn new(size: usize) -> Payloads {
        let filler: Vec<u8> = (b'a'..=b'z').cycle().take(size).collect();
        Payloads {
            size,
            filler: Bytes::from(filler),
        }
    }

    /// The workload of job `seq`.
    pub fn make(&self, seq: u64) -> Bytes {
        let tag = format!("seq:{seq};");
        let mut b = BytesMut::with_capacity(self.size.max(tag.len()));
        b.put_slice(tag.as_bytes());
        let rest = self.size.saturating_sub(tag.len());
        b.put_slice(&self.filler[..rest.min(self.filler.len())]);
        b.freeze()
    }
}

/// The sequence number a workload carries, if it is one of ours.
pub fn seq_of(data: &[u8]) -> Option<u64> {
    let rest = data.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == END)?;
    let digits = rest.get(..end)?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_and_tagged() {
        let p = Payloads::new(100);
        let w = p.make(12345);
        assert_eq!(w.len(), 100);
        assert!(w.starts_with(b"seq:12345;abc"));
        assert_eq!(seq_of(&w), Some(12345));
        // Smaller than the tag: just the tag.
        assert_eq!(&Payloads::new(0).make(7)[..], b"seq:7;");
    }

    #[test]
    fn foreign_workloads_have_no_seq() {
        for w in [
            &b""[..],
            b"seq:",
            b"seq:;",
            b"seq:12",
            b"seq:1x;",
            b"hello",
            b"seq:99999999999999999999999;",
        ] {
            assert_eq!(seq_of(w), None, "{w:?}");
        }
    }
}
