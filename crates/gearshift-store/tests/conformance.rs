//! Every backend passes the one conformance suite.

use gearshift_store::{conformance, fault::FaultyStore, LogOptions, LogStore, MemoryStore};

#[test]
fn memory_store_conforms() {
    conformance::run(|| {
        let base = MemoryStore::new();
        move || base.reopen()
    });
}

#[test]
fn log_store_conforms() {
    let mut dirs = Vec::new();
    conformance::run(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        dirs.push(dir);
        move || LogStore::open(&path, LogOptions::default()).expect("open log store")
    });
}

#[test]
fn log_store_with_tiny_compaction_threshold_conforms() {
    // Compaction after nearly every flush exercises the rewrite path: on
    // its own thread (the default: flushes and swaps interleave with it at
    // random) and inside the flush.
    for background_compaction in [true, false] {
        let mut dirs = Vec::new();
        conformance::run(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().to_path_buf();
            dirs.push(dir);
            move || {
                let opts = LogOptions {
                    compact_min_bytes: 0,
                    background_compaction,
                    ..LogOptions::default()
                };
                LogStore::open(&path, opts).expect("open log store")
            }
        });
    }
}

#[test]
fn faulty_store_with_ample_budget_conforms() {
    conformance::run(|| {
        let base = MemoryStore::new();
        move || FaultyStore::new(base.reopen(), i64::MAX / 2)
    });
}
