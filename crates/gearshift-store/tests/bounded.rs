//! The size bound: a steady stream of jobs with a small live set keeps the
//! log file small, however many jobs went through it.
//!
//! Compaction starts at the end of a flush when the file is over
//! `compact_min_bytes` and its dead bytes exceed its live bytes. With the
//! compaction inside the flush, right after any flush either the file was
//! not compacted, and then `len <= compact_min_bytes` or `len - live <= live`,
//! or it was just compacted to `header + live + frame overhead`:
//!
//! `len <= max(compact_min_bytes, 2 * live, live + COMPACTED_OVERHEAD)`
//!
//! where `live` is the encoded size of the live jobs' adds. With the
//! compaction on its own thread (the default) the frames flushed while it
//! runs are appended to the old file and then copied behind the compacted
//! part; a flush that finds the file at twice its size when the running
//! compaction started waits for it (and compacts at once if the file is
//! still worth it). So after any flush the file is within the bound above
//! when no compaction runs, and within twice its size at the start of the
//! one that runs; once the stream stops it settles within the bound. This
//! test appends far faster than a server would (no network, a debug
//! build), so it takes the waiting path as well as the background one.
//!
//! The stream is ONE MILLION jobs of 100 bytes, flushed in groups of 256
//! (interval durability: compactions still fsync), about 7 s per mode in a
//! debug build on 2 cores, so it runs in every profile.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_store::log::frame::{FRAME_HEADER, HEADER_LEN};
use gearshift_store::log::FILE_NAME;
use gearshift_store::{Durability, JobRecord, LogOptions, LogStore, Op, Store};
use tempfile::TempDir;

const GROUP: u64 = 256;
/// A job is done this many groups after the one it was added in.
const DONE_LAG: usize = 4;
const COMPACT_MIN: u64 = 512 << 10;
/// Header, one frame header and the leading reservation of a compacted
/// file whose live set fits one frame (frames split at 1 MiB).
const COMPACTED_OVERHEAD: u64 = (HEADER_LEN + FRAME_HEADER + 9) as u64;

const STREAM: u64 = 1_000_000;

/// An encoded Done op: tag and id.
const DONE_SIZE: u64 = 9;

fn job(id: u64) -> JobRecord {
    JobRecord {
        id,
        handle: Bytes::from(format!("H:bounded:{id}")),
        function: Bytes::from_static(b"resize"),
        unique: Bytes::new(),
        priority: 1,
        data: Bytes::from(vec![(id % 251) as u8; 100]),
        reducer: None,
        due_ms: None,
        attempts: 0,
        created_ms: 1_700_000_000_000 + id,
    }
}

fn add_size(r: &JobRecord) -> u64 {
    Op::Add(r.clone()).encode(&mut Vec::new()) as u64
}

fn bound(live: u64) -> u64 {
    COMPACT_MIN.max(2 * live).max(live + COMPACTED_OVERHEAD)
}

#[test]
fn a_steady_stream_keeps_the_file_bounded_with_compaction_in_the_flush() {
    stream(false);
}

#[test]
fn a_steady_stream_keeps_the_file_bounded_with_background_compaction() {
    stream(true);
}

fn stream(background_compaction: bool) {
    let total = STREAM;
    let dir = TempDir::new().expect("tempdir");
    let opts = LogOptions {
        // The bound does not depend on durability, and ~4,000 fsyncs make
        // the run's time hostage to whatever else uses the disk.
        durability: Durability::Interval(Duration::from_secs(1)),
        compact_min_bytes: COMPACT_MIN,
        background_compaction,
        ..LogOptions::default()
    };
    let mut store = LogStore::open(dir.path(), opts).expect("open");
    assert!(store.replay().expect("replay").jobs.is_empty());
    let path = dir.path().join(FILE_NAME);
    let disk_len = || std::fs::metadata(&path).expect("metadata").len();

    let started = Instant::now();
    // Live groups, oldest first, and their encoded size.
    let mut groups: VecDeque<(Vec<u64>, u64)> = VecDeque::new();
    let mut live_bytes = 0u64;
    let mut max_live = 0u64;
    let mut max_len = 0u64;
    let mut written = 0u64;
    let mut at_10k = None;
    let mut next = 1u64;
    let mut compacting_flushes = 0u64;
    // The file's size when the running background compaction started.
    let mut started_at = 0u64;
    while next <= total {
        let mut ids = Vec::new();
        let mut bytes = 0;
        while next <= total && ids.len() < GROUP as usize {
            let r = job(next);
            bytes += add_size(&r);
            store.add(&r);
            ids.push(next);
            next += 1;
        }
        let mut frame = FRAME_HEADER as u64 + bytes;
        live_bytes += bytes;
        groups.push_back((ids, bytes));
        if groups.len() > DONE_LAG {
            let (old, old_bytes) = groups.pop_front().expect("group");
            frame += old.len() as u64 * DONE_SIZE;
            for id in old {
                store.done(id);
            }
            live_bytes -= old_bytes;
        }
        written += frame;
        let (was_compacting, swapped) = (store.compacting(), store.compactions());
        store.flush().expect("flush");
        let len = store.file_len();
        max_live = max_live.max(live_bytes);
        max_len = max_len.max(len);
        if store.compacting() {
            compacting_flushes += 1;
            if !was_compacting || store.compactions() != swapped {
                // One started at the end of this flush.
                started_at = len;
            }
        }
        // With no compaction running the strict bound holds (else one
        // would have started); beside one, flushes may double the file
        // before one of them waits for it.
        let allowed = if store.compacting() {
            2 * started_at
        } else {
            bound(live_bytes)
        };
        assert!(
            len <= allowed,
            "after job {}: file {len} bytes, over the bound {allowed} (live {live_bytes})",
            next - 1,
        );
        if at_10k.is_none() && next > 10_000 {
            at_10k = Some(disk_len());
        }
    }
    if background_compaction {
        assert!(compacting_flushes > 0, "flushes ran beside a compaction");
        // Once the stream stops, the file comes back within the strict
        // bound after a compaction or two (each flush that finds the file
        // worth it starts one; a reservation is the smallest flush).
        let mut settle = 0;
        loop {
            store.finish_compaction().expect("compaction");
            if store.file_len() <= bound(live_bytes) {
                break;
            }
            settle += 1;
            assert!(settle <= 4, "the file did not settle: {}", store.file_len());
            store.reserve(total + 1);
            store.flush().expect("settling flush");
        }
    } else {
        assert_eq!(
            compacting_flushes, 0,
            "no thread without background compaction"
        );
    }
    let compactions = store.compactions();
    let elapsed = started.elapsed();
    let final_len = disk_len();
    assert_eq!(final_len, store.file_len(), "file_len() is the real length");
    let at_10k = at_10k.expect("stream passed 10k jobs");
    // Beside a running compaction the file may double (see above).
    let overall = bound(max_live);
    println!(
        "{total} jobs in {elapsed:.2?} ({}, background compaction {background_compaction}): \
         file {at_10k} bytes at 10k jobs, {final_len} at the end, at most {max_len}; \
         {compactions} compactions; {compacting_flushes} flushes beside one; {written} bytes \
         appended in all; live set at most {max_live} bytes; bound {overall}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "optimized"
        }
    );
    assert!(compactions > 10, "compaction ran ({compactions} times)");
    if !background_compaction {
        assert!(at_10k <= overall, "at 10k jobs: {at_10k} > {overall}");
    }
    assert!(final_len <= overall, "at the end: {final_len} > {overall}");
    assert!(
        final_len * 20 < written,
        "the file is a small fraction of what went through it"
    );

    // Reopening replays exactly the live set.
    drop(store);
    let mut reopened = LogStore::open(dir.path(), opts).expect("reopen");
    let r = reopened.replay().expect("replay");
    let want: Vec<JobRecord> = groups
        .iter()
        .flat_map(|(ids, _)| ids)
        .map(|&id| job(id))
        .collect();
    assert_eq!(r.jobs.len(), want.len(), "live count");
    assert!(r.jobs == want, "replay is exactly the live set");
    assert!(r.next_id > total, "next_id {} is past every id", r.next_id);
}
