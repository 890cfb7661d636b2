//! Compaction on its own thread: flushes go on while it copies, and the
//! frames they write reach the compacted file, whether the thread copies
//! them (it catches up until little is left) or the swap does.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use gearshift_store::conformance::job;
use gearshift_store::log::FILE_NAME;
use gearshift_store::{Durability, JobRecord, LogOptions, LogStore, Store};
use tempfile::TempDir;

fn opts() -> LogOptions {
    LogOptions {
        durability: Durability::Interval(Duration::from_secs(60)),
        compact_min_bytes: 0,
        background_compaction: true,
        ..LogOptions::default()
    }
}

/// A job with a payload of `size` bytes.
fn big(id: u64, size: usize) -> JobRecord {
    let data: Vec<u8> = (0..size).map(|i| (i as u64 ^ id) as u8).collect();
    job(id, "resize", &format!("u{id}"), 1, &data)
}

fn reopened(dir: &Path) -> Vec<JobRecord> {
    let mut s = LogStore::open(dir, opts()).expect("reopen");
    s.replay().expect("replay").jobs
}

/// A new store filled with `n` jobs of `size` bytes, all but every
/// `keep`-th then ended: the flush that writes the ends has started a
/// compaction. Returns the directory, the store and the jobs it holds.
fn compacting_store(
    n: u64,
    size: usize,
    keep: u64,
) -> (TempDir, LogStore, BTreeMap<u64, JobRecord>) {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts()).expect("open");
    s.replay().expect("replay");
    let mut model = BTreeMap::new();
    start_compaction(&mut s, &mut model, n, size, keep);
    assert!(s.compacting(), "the flush of the ends started a compaction");
    (dir, s, model)
}

fn start_compaction(
    s: &mut LogStore,
    model: &mut BTreeMap<u64, JobRecord>,
    n: u64,
    size: usize,
    keep: u64,
) {
    for id in 1..=n {
        let r = big(id, size);
        s.add(&r);
        model.insert(id, r);
        if id % 256 == 0 {
            s.flush().expect("flush adds");
        }
    }
    s.flush().expect("flush adds");
    for id in 1..=n {
        if id % keep != 0 {
            s.done(id);
            model.remove(&id);
        }
    }
    s.flush().expect("flush dones");
}

#[test]
fn frames_flushed_during_a_background_compaction_reach_the_new_file() {
    // 24 MB of jobs, half of them ended: a compaction that takes a while,
    // started by the flush of the ends, and far enough from the size at
    // which flushes would wait for it (twice the one that started it).
    let (dir, mut s, mut model) = compacting_store(3000, 8 << 10, 2);
    let before = s.file_len();

    // While it runs: new jobs (more than the thread leaves to the swap),
    // ends and attempt counts of jobs it is copying, a reservation.
    let mut next = 3001;
    let mut flushes_while_compacting = 0;
    let mut still_compacting_after = 0;
    for round in 0..20u64 {
        for _ in 0..40 {
            let r = big(next, 8 << 10);
            s.add(&r);
            model.insert(next, r);
            next += 1;
        }
        let old = 2 * (round * 10 + 1);
        s.done(old);
        model.remove(&old);
        let retried = 2 * (round * 10 + 5);
        s.update(retried, round as u32 + 1);
        if let Some(r) = model.get_mut(&retried) {
            r.attempts = round as u32 + 1;
        }
        if s.compacting() {
            flushes_while_compacting += 1;
        }
        s.flush().expect("flush while compacting");
        if s.compacting() {
            still_compacting_after += 1;
        }
    }
    s.reserve(next + 100);
    s.flush().expect("flush the reservation");
    s.finish_compaction().expect("compaction");
    assert!(!s.compacting());
    assert!(s.compactions() >= 1, "a compaction was swapped in");
    assert!(
        still_compacting_after >= 1,
        "the compaction outlasted at least one flush beside it"
    );
    assert!(
        s.file_len() < before,
        "compacted: {} bytes, {before} before",
        s.file_len()
    );
    let on_disk = std::fs::metadata(dir.path().join(FILE_NAME))
        .expect("metadata")
        .len();
    assert_eq!(on_disk, s.file_len(), "file_len() is the real length");
    println!(
        "{flushes_while_compacting} of 20 flushes started beside a compaction, \
         {still_compacting_after} ended beside one; {before} -> {} bytes",
        s.file_len()
    );

    // The running store and a fresh one agree with the model.
    let live = s.replay().expect("replay again").jobs;
    let want: Vec<JobRecord> = model.values().cloned().collect();
    assert!(live == want, "the running store reads back the model");
    let next_id = s.replay().expect("replay").next_id;
    assert!(next_id > next + 99, "the reservation survived: {next_id}");
    drop(s);
    assert!(
        reopened(dir.path()) == want,
        "a reopened store replays the model"
    );
    assert!(
        !dir.path().join(format!("{FILE_NAME}.compact")).exists(),
        "no compaction file left behind"
    );
}

#[test]
fn closing_the_store_mid_compaction_keeps_the_log_whole() {
    let (dir, mut s, mut model) = compacting_store(3000, 8 << 10, 3);
    let r = big(5000, 100);
    s.add(&r);
    model.insert(5000, r);
    s.flush().expect("flush while compacting");
    // Closing abandons the compaction: its file goes, the log stays.
    drop(s);
    assert!(
        !dir.path().join(format!("{FILE_NAME}.compact")).exists(),
        "the abandoned compaction's file was removed"
    );
    let want: Vec<JobRecord> = model.values().cloned().collect();
    assert!(reopened(dir.path()) == want, "nothing lost, nothing back");
}

#[test]
fn a_background_compaction_keeps_payloads_byte_for_byte() {
    let (dir, mut s, _) = compacting_store(600, 1000, 2);
    s.finish_compaction().expect("compaction");
    assert_eq!(s.compactions(), 1);
    drop(s);
    let jobs = reopened(dir.path());
    assert_eq!(jobs.len(), 300);
    for r in &jobs {
        assert_eq!(r, &big(r.id, 1000), "job {}", r.id);
    }
}

#[test]
fn an_idle_store_swaps_in_a_compaction_that_finished_after_the_last_flush() {
    let (dir, mut s, model) = compacting_store(1000, 4 << 10, 4);
    let before = s.file_len();
    // No flush from here on: only the idle calls a server makes.
    let start = std::time::Instant::now();
    while s.compacting() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never swapped in"
        );
        std::thread::sleep(Duration::from_millis(5));
        s.idle().expect("idle");
    }
    assert_eq!(s.compactions(), 1);
    assert!(
        s.file_len() < before / 2,
        "{} of {before} bytes",
        s.file_len()
    );
    assert!(
        !dir.path().join(format!("{FILE_NAME}.compact")).exists(),
        "the compacted copy is the log now"
    );
    let want: Vec<JobRecord> = model.values().cloned().collect();
    drop(s);
    assert!(reopened(dir.path()) == want);
}
