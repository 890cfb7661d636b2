//! The size bound: a steady stream of jobs with a small live set keeps the
//! log file small, however many jobs went through it.
//!
//! Compaction runs at the end of a flush when the file is over
//! `compact_min_bytes` and its dead bytes exceed its live bytes. So right
//! after any flush either the file was not compacted, and then
//! `len <= compact_min_bytes` or `len - live <= live`, or it was just
//! compacted to `header + live + frame overhead`:
//!
//! `len <= max(compact_min_bytes, 2 * live, live + COMPACTED_OVERHEAD)`
//!
//! where `live` is the encoded size of the live jobs' adds.
//!
//! The stream is ONE MILLION jobs of 100 bytes, flushed in groups of 256
//! (interval durability: compactions still fsync), about 7 s in a debug
//! build on 2 cores, so it runs in every profile.

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
fn a_steady_stream_keeps_the_file_bounded() {
    let total = STREAM;
    let dir = TempDir::new().expect("tempdir");
    let opts = LogOptions {
        // The bound does not depend on durability, and ~4,000 fsyncs make
        // the run's time hostage to whatever else uses the disk.
        durability: Durability::Interval(Duration::from_secs(1)),
        compact_min_bytes: COMPACT_MIN,
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
    let mut compactions = 0u32;
    let mut written = 0u64;
    let mut at_10k = None;
    let mut next = 1u64;
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
        written += bytes + ids.len() as u64 * 9;
        live_bytes += bytes;
        groups.push_back((ids, bytes));
        if groups.len() > DONE_LAG {
            let (old, old_bytes) = groups.pop_front().expect("group");
            for id in old {
                store.done(id);
            }
            live_bytes -= old_bytes;
        }
        let before = store.file_len();
        store.flush().expect("flush");
        let len = store.file_len();
        if len < before {
            compactions += 1;
        }
        max_live = max_live.max(live_bytes);
        max_len = max_len.max(len);
        assert!(
            len <= bound(live_bytes),
            "after job {}: file {len} bytes, over the bound {} (live {live_bytes})",
            next - 1,
            bound(live_bytes)
        );
        if at_10k.is_none() && next > 10_000 {
            at_10k = Some(disk_len());
        }
    }
    let elapsed = started.elapsed();
    let final_len = disk_len();
    assert_eq!(final_len, store.file_len(), "file_len() is the real length");
    let at_10k = at_10k.expect("stream passed 10k jobs");
    let overall = bound(max_live);
    println!(
        "{total} jobs in {elapsed:.2?} ({}): file {at_10k} bytes at 10k jobs, {final_len} at the end, \
         at most {max_len}; {compactions} compactions; ~{written} bytes appended in all; \
         live set at most {max_live} bytes; bound {overall}",
        if cfg!(debug_assertions) { "debug" } else { "optimized" }
    );
    assert!(compactions > 10, "compaction ran ({compactions} times)");
    assert!(at_10k <= overall, "at 10k jobs: {at_10k} > {overall}");
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
