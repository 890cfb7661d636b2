//! The log file's layout: a 16-byte header (magic, format version), then
//! frames. A frame is one flush: `FRAME_MAGIC u32 | payload length u32 |
//! CRC-32 of the payload u32 | CRC-32 of the previous 12 bytes u32 |
//! payload`, the payload being encoded ops.
//!
//! Reading distinguishes a torn tail from corruption, and never guesses:
//! - a frame whose header checks out but whose payload runs past the end of
//!   the file, or is the file's last frame and fails its checksum, is the
//!   torn last write of a crash: it is cut off;
//! - a frame whose header checks out, that is complete and not last, but
//!   whose payload fails its checksum is corruption;
//! - a damaged header is corruption if any valid frame follows it, else a
//!   torn tail. Because an intact header is trusted for its extent, job data
//!   that happens to look like a frame inside a torn write is never
//!   mistaken for one.

use bytes::Bytes;

use crate::record::{Op, FORMAT_VERSION};
use crate::StoreError;

/// First bytes of every log file.
pub const FILE_MAGIC: &[u8; 8] = b"GEARSHFT";
/// Length of the file header.
pub const HEADER_LEN: usize = 16;
/// First bytes of every frame.
pub const FRAME_MAGIC: u32 = 0x4753_4631; // "GSF1"
/// Length of a frame header.
pub const FRAME_HEADER: usize = 16;

/// The file header for the current format.
pub fn file_header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(FILE_MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h
}

/// Checks a file header; returns its format version.
pub fn check_header(h: &[u8]) -> Result<u32, StoreError> {
    if h.len() < HEADER_LEN || &h[..8] != FILE_MAGIC {
        return Err(StoreError::Corrupt(
            "not a Gearshift queue file (bad header)".into(),
        ));
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version > FORMAT_VERSION {
        return Err(StoreError::NewerFormat {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(StoreError::Corrupt("format version 0".into()));
    }
    Ok(version)
}

/// Appends a frame holding `payload` to `out`.
pub fn put_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let start = out.len();
    out.resize(start + FRAME_HEADER, 0);
    out.extend_from_slice(payload);
    seal(&mut out[start..]);
}

/// Turns `buf` (a frame header's worth of room, then the payload) into a
/// frame by writing the header in place.
pub fn seal(buf: &mut [u8]) {
    let (head, payload) = buf.split_at_mut(FRAME_HEADER);
    head[..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
    head[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    head[8..12].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let header_crc = crc32fast::hash(&head[..12]);
    head[12..16].copy_from_slice(&header_crc.to_le_bytes());
}

/// A frame header that checks out at `pos`: (payload length, payload CRC).
pub(super) fn header_at(file: &Bytes, pos: usize) -> Option<(usize, u32)> {
    parse_header(file.get(pos..pos.checked_add(FRAME_HEADER)?)?)
}

/// A frame header (its first [`FRAME_HEADER`] bytes) that checks out:
/// (payload length, payload CRC).
fn parse_header(h: &[u8]) -> Option<(usize, u32)> {
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if h.len() < FRAME_HEADER || word(0) != FRAME_MAGIC || crc32fast::hash(&h[..12]) != word(12) {
        return None;
    }
    Some((word(4) as usize, word(8)))
}

/// Reads the frames of a log one at a time, for compaction, which must not
/// hold a copy of the whole file. It reads only a prefix the store wrote and
/// has already checked (up to its last flushed frame), so anything that
/// does not check out is corruption: no torn tail to cut here.
pub struct FrameReader<R> {
    reader: R,
    left: u64,
    payload: Vec<u8>,
    /// Format version in the file header: how to decode the payloads.
    version: u32,
}

impl<R: std::io::Read> FrameReader<R> {
    /// Starts at the file header of a log whose frames end at `len`.
    pub fn new(mut reader: R, len: u64) -> Result<Self, StoreError> {
        let mut header = [0u8; HEADER_LEN];
        reader.read_exact(&mut header)?;
        let version = check_header(&header)?;
        Ok(FrameReader {
            reader,
            left: len.saturating_sub(HEADER_LEN as u64),
            payload: Vec::new(),
            version,
        })
    }

    /// The file's format version (decode payloads with
    /// [`Op::decode_each_in`] or [`crate::record::scan_ops_in`]).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The next frame's payload (checksum verified), or `None` after the
    /// last frame. The buffer is reused from frame to frame.
    pub fn next_payload(&mut self) -> Result<Option<&[u8]>, StoreError> {
        if self.left == 0 {
            return Ok(None);
        }
        let corrupt = |what: &str| StoreError::Corrupt(format!("while compacting: {what}"));
        let mut head = [0u8; FRAME_HEADER];
        self.reader.read_exact(&mut head)?;
        let (len, crc) = parse_header(&head).ok_or_else(|| corrupt("damaged frame header"))?;
        let whole = (FRAME_HEADER + len) as u64;
        if whole > self.left {
            return Err(corrupt("frame runs past the flushed end"));
        }
        self.payload.resize(len, 0);
        self.reader.read_exact(&mut self.payload)?;
        if crc32fast::hash(&self.payload) != crc {
            return Err(corrupt("frame fails its checksum"));
        }
        self.left -= whole;
        Ok(Some(&self.payload))
    }
}

/// A valid frame at `pos`: its payload and the offset after it.
pub(super) fn frame_at(file: &Bytes, pos: usize) -> Option<(Bytes, usize)> {
    let (len, crc) = header_at(file, pos)?;
    let start = pos + FRAME_HEADER;
    let end = start.checked_add(len)?;
    let payload = file.get(start..end)?;
    (crc32fast::hash(payload) == crc).then(|| (file.slice(start..end), end))
}

/// Where the first frame that fails its checksum starts: the file's end if
/// none does.
pub(super) fn first_damaged(file: &Bytes) -> usize {
    let mut pos = HEADER_LEN;
    while let Some((_, next)) = frame_at(file, pos) {
        pos = next;
    }
    pos.min(file.len())
}

/// Reads every frame of a log file, handing each op to `f` (with the
/// length of its encoding) as its frame is read, so a replay never holds
/// every op of the file at once; stops at a torn tail, refuses corruption.
/// Returns the length of the valid prefix (the caller cuts the rest). On
/// an error `f` may have seen the ops of the frames before it.
pub fn scan(file: &Bytes, mut f: impl FnMut(Op, usize)) -> Result<usize, StoreError> {
    let version = check_header(file)?;
    let mut pos = HEADER_LEN;
    while pos < file.len() {
        match frame_at(file, pos) {
            Some((payload, next)) => {
                Op::decode_each_in(version, &payload, &mut f)?;
                pos = next;
            }
            None => {
                let nothing_valid_from =
                    |from: usize| (from..file.len()).all(|p| frame_at(file, p).is_none());
                let torn = if file[pos..].iter().all(|&b| b == 0) {
                    // Room the store wrote ahead, never used.
                    true
                } else {
                    match header_at(file, pos) {
                        // An intact header: torn if its extent runs past the
                        // end, or only zeros follow it (a frame cut short
                        // inside the room written ahead).
                        Some((len, _)) => {
                            let end = pos + FRAME_HEADER + len;
                            end >= file.len() || file[end..].iter().all(|&b| b == 0)
                        }
                        // A damaged header: torn only if nothing valid follows.
                        None => nothing_valid_from(pos + 1),
                    }
                };
                if !torn {
                    return Err(StoreError::Corrupt(format!(
                        "damaged frame at byte {pos} of {} is followed by more data",
                        file.len()
                    )));
                }
                break;
            }
        }
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::job;

    fn log_of(frames: &[Vec<Op>]) -> Vec<u8> {
        let mut file = file_header().to_vec();
        for ops in frames {
            let mut payload = Vec::new();
            for op in ops {
                op.encode(&mut payload);
            }
            put_frame(&mut file, &payload);
        }
        file
    }

    #[test]
    fn frame_reader_yields_each_frame_then_stops_at_len() {
        let frames = vec![
            vec![Op::Add(job(1, "f", "", 1, b"a")), Op::Reserve(10)],
            vec![Op::Done(1)],
        ];
        let mut file = log_of(&frames);
        let len = file.len() as u64;
        // Room written ahead after the last frame is not read.
        file.extend_from_slice(&[0; 64]);
        let mut r = FrameReader::new(&file[..], len).expect("header");
        for want in &frames {
            let payload = r.next_payload().expect("frame").expect("not the end");
            let ops = Op::decode_all(&Bytes::copy_from_slice(payload)).expect("ops");
            assert_eq!(&ops, want);
        }
        assert_eq!(r.next_payload().expect("end"), None);
    }

    #[test]
    fn frame_reader_refuses_a_damaged_frame() {
        let frames = vec![vec![Op::Add(job(1, "f", "", 1, b"abc"))], vec![Op::Done(1)]];
        let clean = log_of(&frames);
        let first_payload = HEADER_LEN + FRAME_HEADER;
        for at in [HEADER_LEN + 2, first_payload + 3] {
            let mut file = clean.clone();
            file[at] ^= 0x40;
            let mut r = FrameReader::new(&file[..], file.len() as u64).expect("header");
            assert!(
                matches!(r.next_payload(), Err(StoreError::Corrupt(_))),
                "byte {at} flipped"
            );
        }
        // A length that claims more than the flushed end.
        let mut r = FrameReader::new(&clean[..], (clean.len() - 1) as u64).expect("header");
        assert!(r.next_payload().is_ok());
        assert!(matches!(r.next_payload(), Err(StoreError::Corrupt(_))));
    }
}
