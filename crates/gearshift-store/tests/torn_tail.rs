//! Crash simulation on the log file: a log written by several flushes is
//! copied into a fresh directory cut short, with garbage appended or with a
//! byte flipped, and reopened. A damaged or incomplete LAST frame is a torn
//! write (the state before the last flush comes back and the file is cut to
//! its valid prefix); damage followed by a valid frame is corruption and
//! refuses to open, never replaying silently fewer jobs; a header this build
//! does not know is refused without touching the file.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{job, kept, live_ids, mark, sched};
use gearshift_store::log::frame::{self, FRAME_MAGIC, HEADER_LEN};
use gearshift_store::log::{FILE_NAME, SYNCED_FILE_NAME};
use gearshift_store::{
    DeadMark, Durability, JobRecord, KeptRecord, LogOptions, LogStore, MemoryStore, Replayed,
    ScheduleRecord, Store, StoreError, FORMAT_VERSION,
};
use tempfile::TempDir;

/// A log written by five flushes, with what a reopen must show after each.
struct History {
    bytes: Vec<u8>,
    /// File length after creation (index 0) and after each flush.
    ends: Vec<usize>,
    /// Replay after creation (index 0) and after each flush.
    states: Vec<Replayed>,
}

impl History {
    fn flushes(&self) -> usize {
        self.ends.len() - 1
    }
}

fn opts() -> LogOptions {
    LogOptions {
        // No fsync per flush: these tests reopen the file hundreds of times
        // and the semantics after a clean reopen are the same.
        durability: Durability::Interval(Duration::from_secs(1)),
        // Never compact: the frames must stay where they were written.
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        ..LogOptions::default()
    }
}

/// Runs the same ops on a log and on the in-memory reference.
fn write_history() -> History {
    let dir = TempDir::new().expect("tempdir");
    let mut log = LogStore::open(dir.path(), opts()).expect("open");
    let mut mem = MemoryStore::new();
    assert!(log.replay().expect("replay").jobs.is_empty());
    let path = dir.path().join(FILE_NAME);
    let len = || fs::metadata(&path).expect("metadata").len() as usize;
    let mut ends = vec![len()];
    let mut states = vec![mem.reopen().replay().expect("replay")];

    let mut with_extras = job(3, "reduce", "u3", 0, b"three");
    with_extras.reducer = Some(Bytes::from_static(b"sum"));
    with_extras.due_ms = Some(1_900_000_000_000);
    let batches: Vec<Vec<Step>> = vec![
        vec![
            Step::Add(job(1, "f", "u1", 1, b"one")),
            Step::Add(job(2, "f", "", 2, b"two")),
            Step::Add(with_extras),
            Step::Schedule(sched(8, "0 * * * *", Some(1_900_000_000_000))),
        ],
        vec![
            Step::Done(2),
            Step::Kept(kept(2, 0, b"two's result")),
            Step::Update(3, 4),
            Step::Add(job(4, "g", "", 1, &[0xAB; 200])),
            Step::Retry(1, 1, Some(1_900_000_000_123)),
        ],
        vec![
            Step::Reserve(100),
            Step::Add(job(5, "f", "", 1, b"five")),
            Step::Dead(4, 3, mark(1_700_000_000_500, "worker crashed")),
            Step::Schedule(sched(8, "0 * * * *", Some(1_900_000_003_600))),
            Step::Schedule(sched(102, "30 1 * * 0", None)),
        ],
        vec![
            Step::Done(1),
            Step::Add(job(6, "f", "", 1, &[6; 64])),
            Step::Add(job(7, "h", "seven", 0, b"")),
            Step::Update(5, 2),
            Step::Dead(7, 1, mark(1_700_000_000_600, "")),
            Step::Unschedule(102),
            Step::Done(8),
            Step::Kept(kept(2, 0, b"two's result, kept longer")),
            Step::Done(6),
            Step::Kept(kept(6, 1, b"")),
        ],
        vec![
            Step::Forget(2),
            Step::Add(job(101, "f", "", 1, &[8; 300])),
            Step::Retry(4, 0, None),
            Step::Schedule(sched(103, "*/5 * * * 1-5", Some(1_900_000_000_300))),
            Step::Done(5),
            Step::Kept(kept(5, 2, &[5; 100])),
        ],
    ];
    for batch in batches {
        for step in batch {
            for s in [&mut log as &mut dyn Store, &mut mem] {
                match &step {
                    Step::Add(r) => s.add(r),
                    Step::Done(id) => s.done(*id),
                    Step::Update(id, n) => s.update(*id, *n),
                    Step::Retry(id, n, due) => s.retry(*id, *n, *due),
                    Step::Dead(id, n, m) => s.dead(*id, *n, m),
                    Step::Schedule(r) => s.schedule(r),
                    Step::Unschedule(id) => s.unschedule(*id),
                    Step::Kept(k) => s.kept(k),
                    Step::Forget(id) => s.forget(*id),
                    Step::Reserve(upto) => s.reserve(*upto),
                }
            }
        }
        log.flush().expect("flush log");
        mem.flush().expect("flush memory");
        ends.push(len());
        states.push(mem.reopen().replay().expect("replay"));
    }
    drop(log);
    let bytes = fs::read(&path).expect("read log");
    assert_eq!(bytes.len(), *ends.last().expect("ends"));
    History {
        bytes,
        ends,
        states,
    }
}

enum Step {
    Add(JobRecord),
    Done(u64),
    Update(u64, u32),
    Retry(u64, u32, Option<u64>),
    Dead(u64, u32, DeadMark),
    Schedule(ScheduleRecord),
    Unschedule(u64),
    Kept(KeptRecord),
    Forget(u64),
    Reserve(u64),
}

/// A scratch directory whose queue file each check overwrites (cheaper
/// than a new directory per copy: these tests open thousands of copies).
struct Scratch {
    dir: TempDir,
    path: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = TempDir::new().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        Scratch { dir, path }
    }

    /// Puts `bytes` in place as the queue file, of which no sync is
    /// recorded (the marker an open left goes): damage before its end is
    /// corruption.
    fn write(&self, bytes: &[u8]) {
        fs::write(&self.path, bytes).expect("write copy");
        let _ = fs::remove_file(self.dir.path().join(SYNCED_FILE_NAME));
    }

    fn open(&self) -> Result<LogStore, StoreError> {
        LogStore::open(self.dir.path(), opts())
    }

    fn file_len(&self) -> usize {
        fs::metadata(&self.path).expect("metadata").len() as usize
    }

    fn read(&self) -> Vec<u8> {
        fs::read(&self.path).expect("read")
    }

    /// Opens `bytes` and checks it replays `want` with the file cut to `cut_to`.
    fn expect_recovers(
        &self,
        bytes: &[u8],
        want: &Replayed,
        cut_to: usize,
        what: &str,
    ) -> LogStore {
        self.write(bytes);
        let mut store = self
            .open()
            .unwrap_or_else(|e| panic!("{what}: open must recover, got {e}"));
        let got = store.replay().expect("replay");
        assert_eq!(&got, want, "{what}: replay");
        assert_eq!(
            self.file_len(),
            cut_to,
            "{what}: file cut to its valid prefix"
        );
        assert_eq!(store.file_len(), cut_to as u64, "{what}: file_len()");
        store
    }

    /// Opens `bytes`, expects `Corrupt`, and checks the file was left alone.
    fn expect_corrupt(&self, bytes: &[u8], what: &str) -> String {
        self.write(bytes);
        let err = match self.open() {
            Err(StoreError::Corrupt(msg)) => msg,
            Err(e) => panic!("{what}: expected Corrupt, got {e:?}"),
            Ok(mut s) => panic!(
                "{what}: expected Corrupt, opened with {:?}",
                s.replay().map(|r| r.jobs.len())
            ),
        };
        assert_eq!(
            self.read(),
            bytes,
            "{what}: a refused file is never modified"
        );
        err
    }
}

#[test]
fn every_cut_inside_the_last_frame_rolls_back_to_the_previous_flush() {
    let h = write_history();
    let n = h.flushes();
    let (start, end) = (h.ends[n - 1], h.ends[n]);
    assert!(end - start > 300, "the last frame is a few hundred bytes");
    let scratch = Scratch::new();
    for cut in start..end {
        let what = format!("cut at {cut} (last frame is {start}..{end})");
        let mut store = scratch.expect_recovers(&h.bytes[..cut], &h.states[n - 1], start, &what);
        // The store appends cleanly where the torn frame was.
        let next = h.states[n - 1].next_id;
        assert!(next >= 100, "{what}: the reservation of flush 3 is kept");
        let extra = job(next, "after", "", 1, b"after the crash");
        store.add(&extra);
        store.flush().expect("flush after recovery");
        drop(store);
        let mut again = scratch.open().expect("reopen");
        let mut want = h.states[n - 1].jobs.clone();
        want.push(extra);
        assert_eq!(
            again.replay().expect("replay").jobs,
            want,
            "{what}: later flush survives"
        );
    }
}

#[test]
fn every_frame_boundary_replays_exactly_the_flushes_before_it() {
    let h = write_history();
    let scratch = Scratch::new();
    for (i, &end) in h.ends.iter().enumerate() {
        let what = format!("file ending after flush {i}");
        scratch.expect_recovers(&h.bytes[..end], &h.states[i], end, &what);
    }
}

#[test]
fn a_cut_inside_an_earlier_frame_keeps_the_frames_before_it() {
    // A file cut inside frame i (say, a copy taken mid-write) is a torn
    // frame i: the flushes before it come back.
    let h = write_history();
    let scratch = Scratch::new();
    for i in 1..h.flushes() {
        let (start, end) = (h.ends[i - 1], h.ends[i]);
        for cut in [
            start + 1,
            start + 11,
            start + 12,
            (start + end) / 2,
            end - 1,
        ] {
            let what = format!("cut at {cut} inside frame {i}");
            scratch.expect_recovers(&h.bytes[..cut], &h.states[i - 1], start, &what);
        }
    }
}

#[test]
fn a_flipped_byte_in_any_earlier_frame_is_corruption() {
    let h = write_history();
    let n = h.flushes();
    let scratch = Scratch::new();
    let mut checked = 0;
    for at in h.ends[0]..h.ends[n - 1] {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bytes = h.bytes.clone();
            bytes[at] ^= mask;
            let msg = scratch.expect_corrupt(&bytes, &format!("byte {at} ^ {mask:#x}"));
            assert!(
                msg.contains("damaged frame"),
                "message names the damage: {msg}"
            );
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} damaged copies checked");
}

#[test]
fn a_flipped_byte_in_the_last_frame_is_a_torn_tail() {
    let h = write_history();
    let n = h.flushes();
    let (start, end) = (h.ends[n - 1], h.ends[n]);
    let scratch = Scratch::new();
    for at in start..end {
        let mut bytes = h.bytes.clone();
        bytes[at] ^= 0x20;
        let what = format!("byte {at} flipped in the last frame");
        scratch.expect_recovers(&bytes, &h.states[n - 1], start, &what);
    }
}

#[test]
fn garbage_after_the_last_frame_is_cut_off() {
    let h = write_history();
    let n = h.flushes();
    let end = h.ends[n];
    let mut header_only = FRAME_MAGIC.to_le_bytes().to_vec();
    header_only.extend_from_slice(&1000u32.to_le_bytes());
    header_only.extend_from_slice(&0u32.to_le_bytes());
    let mut huge = FRAME_MAGIC.to_le_bytes().to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 4]);
    huge.extend_from_slice(&[1; 100]);
    let mut bad_crc = Vec::new();
    frame::put_frame(&mut bad_crc, b"\x02\x01\0\0\0\0\0\0\0");
    bad_crc[8] ^= 1;
    let tails: Vec<(&str, Vec<u8>)> = vec![
        ("one zero byte", vec![0]),
        (
            "a block of zeros (size grew, data never written)",
            vec![0; 4096],
        ),
        ("0xFF bytes", vec![0xFF; 37]),
        (
            "half a frame magic",
            FRAME_MAGIC.to_le_bytes()[..2].to_vec(),
        ),
        ("a frame header without its payload", header_only),
        ("a frame claiming 4 GiB", huge),
        ("a whole frame with a bad checksum", bad_crc),
        ("text", b"this is not a frame\n".to_vec()),
    ];
    let scratch = Scratch::new();
    for (what, tail) in tails {
        let mut bytes = h.bytes.clone();
        bytes.extend_from_slice(&tail);
        scratch.expect_recovers(&bytes, &h.states[n], end, what);
    }
}

#[test]
fn a_newer_format_version_is_refused_untouched_with_an_upgrade_hint() {
    let h = write_history();
    let scratch = Scratch::new();
    for found in [FORMAT_VERSION + 1, u32::MAX] {
        // A torn tail too: a newer file must not be "repaired" either.
        let mut bytes = h.bytes.clone();
        bytes[8..12].copy_from_slice(&found.to_le_bytes());
        bytes.extend_from_slice(&[0xEE; 5]);
        scratch.write(&bytes);
        match scratch.open() {
            Err(e @ StoreError::NewerFormat { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("upgrade"), "message says to upgrade: {msg}");
                assert!(msg.contains(&found.to_string()), "names the version: {msg}");
                let StoreError::NewerFormat {
                    found: f,
                    supported,
                } = e
                else {
                    unreachable!()
                };
                assert_eq!((f, supported), (found, FORMAT_VERSION));
            }
            other => panic!("version {found}: expected NewerFormat, got {other:?}"),
        }
        assert_eq!(scratch.read(), bytes, "file left untouched");
    }
}

#[test]
fn a_damaged_header_never_loses_jobs_silently() {
    // Magic and version are checked; the last four bytes are reserved. A
    // flip anywhere is refused, or (reserved bytes) changes nothing.
    let h = write_history();
    let n = h.flushes();
    let scratch = Scratch::new();
    for at in 0..HEADER_LEN {
        let mut bytes = h.bytes.clone();
        bytes[at] ^= 0x04;
        scratch.write(&bytes);
        match scratch.open() {
            Ok(mut s) => {
                assert!(at >= 12, "byte {at} of the header is checked");
                assert_eq!(s.replay().expect("replay"), h.states[n], "byte {at}");
            }
            Err(StoreError::Corrupt(_) | StoreError::NewerFormat { .. }) => {
                assert_eq!(scratch.read(), bytes, "byte {at}: file left alone");
            }
            Err(e) => panic!("byte {at}: unexpected {e:?}"),
        }
    }
}

#[test]
fn version_zero_and_foreign_files_are_corrupt() {
    let mut v0 = frame::file_header().to_vec();
    v0[8..12].copy_from_slice(&0u32.to_le_bytes());
    let mut wrong_magic = frame::file_header().to_vec();
    wrong_magic[0] = b'g';
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("format version 0", v0),
        ("wrong magic", wrong_magic),
        (
            "text file",
            b"hello, this is somebody's notes file\n".to_vec(),
        ),
        ("zip file", b"PK\x03\x04\x14\0\0\0\x08\0".repeat(10)),
        ("sixteen zero bytes", vec![0; HEADER_LEN]),
        ("a lone frame without a header", {
            let mut f = Vec::new();
            frame::put_frame(&mut f, b"\x04\x05\0\0\0\0\0\0\0");
            f
        }),
    ];
    let scratch = Scratch::new();
    for (what, bytes) in cases {
        scratch.expect_corrupt(&bytes, what);
    }
}

#[test]
fn a_zero_length_file_is_a_fresh_store() {
    let scratch = Scratch::new();
    scratch.write(&[]);
    let mut store = scratch.open().expect("open empty file");
    let r = store.replay().expect("replay");
    assert!(r.jobs.is_empty());
    assert!(r.next_id >= 1);
    assert_eq!(scratch.read(), frame::file_header(), "header written");
    store.add(&job(1, "f", "", 1, b"x"));
    store.flush().expect("flush");
    drop(store);
    let r = scratch.open().expect("reopen").replay().expect("replay");
    assert_eq!(r.jobs, vec![job(1, "f", "", 1, b"x")]);
    assert!(r.next_id > 1);
}

#[test]
fn job_data_that_looks_like_a_frame_inside_a_torn_write_is_not_corruption() {
    // A client's workload may hold bytes that form a valid frame. When the
    // flush carrying it is torn, the intact frame header is trusted for its
    // extent, so the embedded look-alike is never taken for a real frame.
    let dir = TempDir::new().expect("tempdir");
    let mut log = LogStore::open(dir.path(), opts()).expect("open");
    log.replay().expect("replay");
    log.add(&job(1, "f", "", 1, b"first"));
    log.flush().expect("flush");
    let mut fake = Vec::new();
    let mut payload = Vec::new();
    gearshift_store::Op::Add(job(99, "f", "", 1, b"forged")).encode(&mut payload);
    frame::put_frame(&mut fake, &payload);
    log.add(&job(2, "f", "", 1, &fake));
    log.flush().expect("flush");
    drop(log);
    let path = dir.path().join(FILE_NAME);
    let full = fs::read(&path).expect("read");
    fs::write(&path, &full[..full.len() - 50]).expect("cut");
    let mut log = LogStore::open(dir.path(), opts()).expect("a torn write is not corruption");
    let ids = live_ids(&mut log);
    assert_eq!(
        ids,
        vec![1],
        "the state before the torn flush, and no forged job"
    );
}

/// A header and one sealed frame holding `ops`.
fn log_with(ops: &[gearshift_store::Op]) -> Vec<u8> {
    let mut payload = Vec::new();
    for op in ops {
        op.encode(&mut payload);
    }
    let mut bytes = frame::file_header().to_vec();
    frame::put_frame(&mut bytes, &payload);
    bytes
}

#[test]
fn ids_beyond_the_largest_a_store_keeps_are_corruption() {
    use gearshift_store::{Op, MAX_ID};
    let scratch = Scratch::new();
    // The largest id is a job like any other.
    scratch.write(&log_with(&[
        Op::Add(job(MAX_ID, "f", "", 1, b"top")),
        Op::Reserve(MAX_ID + 1),
    ]));
    let r = scratch.open().expect("open").replay().expect("replay");
    assert_eq!(r.jobs, vec![job(MAX_ID, "f", "", 1, b"top")]);
    assert_eq!(r.next_id, MAX_ID + 1);
    // One past it, in any op, is refused with a message naming it.
    let cases = [
        ("an added job", Op::Add(job(MAX_ID + 1, "f", "", 1, b"x"))),
        ("a done job", Op::Done(u64::MAX)),
        (
            "an updated job",
            Op::Update {
                id: MAX_ID + 1,
                attempts: 1,
            },
        ),
        ("a reservation", Op::Reserve(MAX_ID + 2)),
        (
            "a retried job",
            Op::Retry {
                id: MAX_ID + 1,
                attempts: 1,
                due_ms: None,
            },
        ),
        (
            "a dead job",
            Op::Dead {
                id: u64::MAX,
                attempts: 1,
                mark: mark(1, "e"),
            },
        ),
        (
            "a schedule",
            Op::Schedule(sched(MAX_ID + 1, "* * * * *", None)),
        ),
        ("a dropped schedule", Op::Unschedule(u64::MAX)),
        ("a kept job", Op::Kept(kept(MAX_ID + 1, 0, b"r"))),
        ("a forgotten job", Op::Forget(u64::MAX)),
    ];
    for (what, op) in cases {
        let msg = scratch.expect_corrupt(&log_with(&[op]), what);
        assert!(msg.contains(&MAX_ID.to_string()), "{what}: {msg}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Whatever a frame that passes its checksum holds, opening the log
    /// either replays it or refuses it as corrupt (leaving the file as it
    /// was); it never panics.
    #[test]
    fn any_payload_in_a_sealed_frame_opens_or_is_refused(
        payload in proptest::collection::vec(
            proptest::prop_oneof![
                3 => 1u8..=10,
                1 => proptest::prelude::any::<u8>(),
            ],
            0..200,
        ),
    ) {
        let mut bytes = frame::file_header().to_vec();
        frame::put_frame(&mut bytes, &payload);
        let scratch = Scratch::new();
        scratch.write(&bytes);
        match scratch.open() {
            Ok(mut store) => {
                let r = store.replay().expect("an opened log replays");
                proptest::prop_assert!(r.jobs.iter().all(|j| j.id <= gearshift_store::MAX_ID));
            }
            Err(StoreError::Corrupt(_)) => {
                proptest::prop_assert_eq!(scratch.read(), bytes);
            }
            Err(e) => proptest::prop_assert!(false, "unexpected error {:?}", e),
        }
    }
}
