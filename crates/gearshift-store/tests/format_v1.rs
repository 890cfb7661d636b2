//! Files of format version 1 (written before retries, dead jobs,
//! schedules and kept results): built here byte for byte, they open and
//! replay; the store keeps appending v1 ops to them as they are, raises the
//! header to the current version just before the first newer op (Retry,
//! Dead, Schedule, Unschedule, Kept, Forget or Function), and compaction
//! rewrites them in the current version. A v1 file holding a v2 op is
//! corrupt.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::{log_file, replayed};
use gearshift_store::conformance::{job, kept, mark, sched};
use gearshift_store::log::frame::{self, FILE_MAGIC, HEADER_LEN};
use gearshift_store::log::FILE_NAME;
use gearshift_store::{
    Durability, JobRecord, LogOptions, LogStore, Op, Replayed, Store, StoreError, FORMAT_VERSION,
    MAX_ID,
};
use tempfile::TempDir;

/// A v1 file header: magic, version 1, four reserved bytes.
fn v1_header() -> Vec<u8> {
    let mut h = FILE_MAGIC.to_vec();
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&[0; 4]);
    assert_eq!(h.len(), HEADER_LEN);
    h
}

fn field(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A v1 Add op, laid out by hand: tag 1, id, created, due (`u64::MAX`:
/// none), attempts, priority, has-reducer, then length-prefixed handle,
/// function, unique, reducer (if any) and data.
fn v1_add(r: &JobRecord) -> Vec<u8> {
    let mut b = vec![1u8];
    b.extend_from_slice(&r.id.to_le_bytes());
    b.extend_from_slice(&r.created_ms.to_le_bytes());
    b.extend_from_slice(&r.due_ms.unwrap_or(u64::MAX).to_le_bytes());
    b.extend_from_slice(&r.attempts.to_le_bytes());
    b.push(r.priority);
    b.push(u8::from(r.reducer.is_some()));
    field(&mut b, &r.handle);
    field(&mut b, &r.function);
    field(&mut b, &r.unique);
    if let Some(red) = &r.reducer {
        field(&mut b, red);
    }
    field(&mut b, &r.data);
    b
}

fn v1_done(id: u64) -> Vec<u8> {
    let mut b = vec![2u8];
    b.extend_from_slice(&id.to_le_bytes());
    b
}

fn v1_update(id: u64, attempts: u32) -> Vec<u8> {
    let mut b = vec![3u8];
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&attempts.to_le_bytes());
    b
}

fn v1_reserve(upto: u64) -> Vec<u8> {
    let mut b = vec![4u8];
    b.extend_from_slice(&upto.to_le_bytes());
    b
}

fn jobs() -> (JobRecord, JobRecord, JobRecord) {
    let one = job(1, "resize", "u1", 1, b"one");
    let mut two = job(2, "reduce", "", 0, b"bin\0ary");
    two.reducer = Some(Bytes::from_static(b"sum"));
    two.due_ms = Some(1_900_000_000_000);
    two.attempts = 1;
    let three = job(3, "f", "", 2, &[3; 100]);
    (one, two, three)
}

/// A v1 log of two flushes, and the live jobs it holds: 1, and 2 with 4
/// attempts; handles reserved up to 50.
fn v1_log() -> (Vec<u8>, Vec<JobRecord>) {
    let (one, two, three) = jobs();
    let mut file = v1_header();
    let first = [v1_add(&one), v1_add(&two), v1_add(&three)].concat();
    frame::put_frame(&mut file, &first);
    let second = [v1_update(2, 4), v1_done(3), v1_reserve(50)].concat();
    frame::put_frame(&mut file, &second);
    let mut two_now = two;
    two_now.attempts = 4;
    (file, vec![one, two_now])
}

fn header_version(dir: &Path) -> u32 {
    let bytes = log_file(dir);
    u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]])
}

fn no_compaction(durability: Durability, direct_io: bool) -> LogOptions {
    LogOptions {
        durability,
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        direct_io,
    }
}

fn every_mode() -> Vec<LogOptions> {
    vec![
        no_compaction(Durability::Fsync, true),
        no_compaction(Durability::Fsync, false),
        no_compaction(Durability::Interval(Duration::from_secs(60)), false),
    ]
}

fn written(bytes: &[u8]) -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    fs::write(dir.path().join(FILE_NAME), bytes).expect("write v1 log");
    dir
}

/// The log of [`v1_log`] in a fresh directory, opened with `opts`: the
/// store, its replay, and the live jobs the file holds.
fn opened_v1(opts: LogOptions) -> (TempDir, LogStore, Replayed, Vec<JobRecord>) {
    let (bytes, want) = v1_log();
    let dir = written(&bytes);
    let mut s = LogStore::open(dir.path(), opts).expect("open v1");
    let r = s.replay().expect("replay");
    (dir, s, r, want)
}

/// Flushes `s` and checks the format version of its file in `dir`: in the
/// header, and as `s` reports it.
fn flushed_at_version(s: &mut LogStore, dir: &Path, version: u32, what: &str) {
    s.flush().expect("flush");
    assert_eq!(header_version(dir), version, "{what}");
    assert_eq!(s.format_version(), version, "{what}");
}

/// Records of one kind on the v1 file of [`opened_v1`], `store` writing
/// one and `end` ending one: none are replayed; a record that is
/// discarded, or refused (an id past [`MAX_ID`]), raises nothing, nor does
/// an end naming no storable id (nothing is written); flushed with a v1
/// Update (job 1 to 2 attempts), the file stays v1. Returns the directory,
/// the store and the live jobs the file held.
fn nothing_raises(
    opts: LogOptions,
    what: &str,
    store: impl Fn(&mut LogStore, u64),
    end: impl Fn(&mut LogStore, u64),
) -> (TempDir, LogStore, Vec<JobRecord>) {
    let (dir, mut s, r, jobs) = opened_v1(opts);
    assert!(r.schedules.is_empty() && r.kept.is_empty(), "{what}");
    store(&mut s, 60);
    s.discard();
    store(&mut s, MAX_ID + 1);
    assert!(matches!(s.flush(), Err(StoreError::IdOutOfRange(_))));
    end(&mut s, MAX_ID + 1);
    s.update(1, 2);
    flushed_at_version(&mut s, dir.path(), 1, &format!("{what}: still v1"));
    (dir, s, jobs)
}

/// Each mode of [`every_mode`], with either value of a flag.
fn every_mode_either_way() -> Vec<(bool, LogOptions)> {
    let modes = every_mode();
    [false, true]
        .into_iter()
        .flat_map(|flag| modes.iter().map(move |&opts| (flag, opts)))
        .collect()
}

/// Appends the Add of `last` to a raised file, closes it and checks its
/// header stayed raised; returns what it replays, reopened with `opts`.
fn still_raised(
    mut s: LogStore,
    dir: &Path,
    opts: LogOptions,
    last: &JobRecord,
    what: &str,
) -> Replayed {
    s.add(last);
    s.flush().expect("flush");
    drop(s);
    assert_eq!(header_version(dir), FORMAT_VERSION, "{what}: still raised");
    replayed(dir, opts)
}

#[test]
fn a_version_1_file_opens_and_compaction_rewrites_it_in_the_current_version() {
    let (bytes, want) = v1_log();
    let dir = written(&bytes);
    let opts = no_compaction(Durability::Fsync, true);
    let mut s = LogStore::open(dir.path(), opts).expect("a v1 file opens");
    assert_eq!(s.format_version(), 1);
    let r = s.replay().expect("replay");
    assert_eq!(r.jobs, want, "the v1 file's jobs come back");
    assert!(r.dead.is_empty(), "a v1 file has no dead jobs");
    assert_eq!(r.next_id, 50, "its reservation too");
    // v1 ops are appended to it as they are: it stays a v1 file.
    let four = job(50, "f", "", 1, &[4; 3000]);
    s.add(&four);
    s.update(1, 2);
    s.flush().expect("flush v1 ops");
    assert_eq!(s.format_version(), 1);
    drop(s);
    assert_eq!(header_version(dir.path()), 1, "no v2 op, no new header");
    assert_eq!(
        &log_file(dir.path())[..bytes.len()],
        &bytes[..],
        "the v1 frames are untouched"
    );
    // Ending the big job makes the file worth compacting.
    let compacting = LogOptions {
        compact_min_bytes: 0,
        ..opts
    };
    let mut s = LogStore::open(dir.path(), compacting).expect("reopen");
    let mut want = s.replay().expect("replay").jobs;
    assert_eq!(want.len(), 3);
    assert_eq!(want[0].attempts, 2);
    s.done(50);
    want.pop();
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "the flush compacted");
    assert_eq!(s.format_version(), FORMAT_VERSION);
    drop(s);
    assert_eq!(
        header_version(dir.path()),
        FORMAT_VERSION,
        "compaction writes the current version"
    );
    let r = replayed(dir.path(), opts);
    assert_eq!(r.jobs, want, "the same jobs after the rewrite");
    assert_eq!(r.next_id, 51);
}

#[test]
fn the_first_version_2_op_raises_the_header_first() {
    for opts in every_mode() {
        let what = format!("{opts:?}");
        let (dir, mut s, _, mut want) = opened_v1(opts);
        // A v2 op that is discarded, or refused, raises nothing.
        s.dead(1, 1, &mark(5, "discarded"));
        s.discard();
        s.add(&job(60, "f", "", 1, b"x"));
        s.done(60);
        flushed_at_version(&mut s, dir.path(), 1, &format!("{what}: still v1"));
        s.retry(1, 3, Some(1_950_000_000_000));
        flushed_at_version(
            &mut s,
            dir.path(),
            FORMAT_VERSION,
            &format!("{what}: header raised"),
        );
        // Later appends (a direct write rewrites the file's first block
        // while the file is small) keep it raised.
        s.dead(2, 6, &mark(1_700_000_000_001, "out of attempts"));
        let last = job(61, "f", "", 1, b"y");
        let r = still_raised(s, dir.path(), opts, &last, &what);
        want[0].attempts = 3;
        want[0].due_ms = Some(1_950_000_000_000);
        let mut two = want.remove(1);
        two.attempts = 6;
        want.push(last);
        assert_eq!(r.jobs, want, "{what}");
        assert_eq!(
            r.dead,
            vec![(two, mark(1_700_000_000_001, "out of attempts"))],
            "{what}"
        );
    }
}

#[test]
fn a_version_1_file_holding_a_version_2_op_is_corrupt() {
    let (one, _, _) = jobs();
    let mut retry = vec![5u8];
    retry.extend_from_slice(&1u64.to_le_bytes());
    retry.extend_from_slice(&2u32.to_le_bytes());
    retry.extend_from_slice(&u64::MAX.to_le_bytes());
    let mut schedule = Vec::new();
    Op::Schedule(sched(9, "* * * * *", None)).encode(&mut schedule);
    let mut unschedule = Vec::new();
    Op::Unschedule(9).encode(&mut unschedule);
    let mut keep = Vec::new();
    Op::Kept(kept(10, 1, b"result")).encode(&mut keep);
    let mut forget = Vec::new();
    Op::Forget(10).encode(&mut forget);
    for (code, op) in [
        (5, retry),
        (7, schedule),
        (8, unschedule),
        (9, keep),
        (10, forget),
    ] {
        assert_eq!(op[0], code);
        let mut file = v1_header();
        frame::put_frame(&mut file, &[v1_add(&one), op].concat());
        frame::put_frame(&mut file, &v1_done(1));
        let dir = written(&file);
        match LogStore::open(dir.path(), no_compaction(Durability::Fsync, false)) {
            Err(StoreError::Corrupt(msg)) => {
                assert!(msg.contains("format version 1"), "op {code}: {msg}");
            }
            other => panic!("op {code}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(log_file(dir.path()), file);
        // The same ops behind a v2 header are fine.
        file[8..12].copy_from_slice(&2u32.to_le_bytes());
        fs::write(dir.path().join(FILE_NAME), &file).expect("write");
        let r = replayed(dir.path(), no_compaction(Durability::Fsync, false));
        assert!(r.jobs.is_empty() && r.dead.is_empty(), "op {code}");
        let want = if code == 7 {
            vec![sched(9, "* * * * *", None)]
        } else {
            vec![]
        };
        assert_eq!(r.schedules, want, "op {code}");
        let want = if code == 9 {
            vec![kept(10, 1, b"result")]
        } else {
            vec![]
        };
        assert_eq!(r.kept, want, "op {code}");
    }
}

#[test]
fn the_first_schedule_op_raises_the_header_first() {
    // Either schedule op, alone, raises the header: an Unschedule too (even
    // of an unknown id, which is written all the same).
    for (first_is_unschedule, opts) in every_mode_either_way() {
        let what = format!("{opts:?}, unschedule first: {first_is_unschedule}");
        let store = |s: &mut LogStore, id| s.schedule(&sched(id, "* * * * *", None));
        let (dir, mut s, mut jobs) = nothing_raises(opts, &what, store, |s, id| s.unschedule(id));
        if first_is_unschedule {
            s.unschedule(61);
        } else {
            s.schedule(&sched(61, "0 * * * *", Some(1_950_000_000_000)));
        }
        flushed_at_version(
            &mut s,
            dir.path(),
            FORMAT_VERSION,
            &format!("{what}: header raised"),
        );
        // Later appends keep it raised.
        s.schedule(&sched(62, "15 * * * *", None));
        let last = job(63, "f", "", 1, b"y");
        let r = still_raised(s, dir.path(), opts, &last, &what);
        jobs[0].attempts = 2;
        jobs.push(last);
        assert_eq!(r.jobs, jobs, "{what}");
        let mut scheds = vec![sched(62, "15 * * * *", None)];
        if !first_is_unschedule {
            scheds.insert(0, sched(61, "0 * * * *", Some(1_950_000_000_000)));
        }
        assert_eq!(r.schedules, scheds, "{what}");
        assert_eq!(r.next_id, 64, "{what}");
    }
}

#[test]
fn the_first_kept_op_raises_the_header_first() {
    // Either kept op, alone, raises the header: a Forget too (even of an
    // unknown id, which is written all the same).
    for (first_is_forget, opts) in every_mode_either_way() {
        let what = format!("{opts:?}, forget first: {first_is_forget}");
        let store = |s: &mut LogStore, id| s.kept(&kept(id, 0, b"discarded or refused"));
        let (dir, mut s, mut jobs) = nothing_raises(opts, &what, store, |s, id| s.forget(id));
        // A job of the v1 file ends and is kept, as the core writes it
        // (or an unknown id is forgotten).
        if first_is_forget {
            s.forget(61);
        } else {
            s.done(1);
            s.kept(&kept(1, 0, b"one's result"));
        }
        flushed_at_version(
            &mut s,
            dir.path(),
            FORMAT_VERSION,
            &format!("{what}: header raised"),
        );
        // Later appends keep it raised.
        s.kept(&kept(2, 1, b"two failed"));
        s.done(2);
        let last = job(63, "f", "", 1, b"y");
        let r = still_raised(s, dir.path(), opts, &last, &what);
        jobs[0].attempts = 2;
        jobs.remove(1);
        if !first_is_forget {
            jobs.remove(0);
        }
        jobs.push(last);
        assert_eq!(r.jobs, jobs, "{what}");
        let mut kepts = vec![kept(2, 1, b"two failed")];
        if !first_is_forget {
            kepts.insert(0, kept(1, 0, b"one's result"));
        }
        assert_eq!(r.kept, kepts, "{what}");
        assert_eq!(r.next_id, 64, "{what}");
    }
}

#[test]
fn a_version_2_file_is_raised_by_its_first_function_op() {
    for opts in every_mode() {
        let what = format!("{opts:?}");
        // The v1 file's bytes with a version 2 header: every v1 op is a v2 op.
        let (mut bytes, want) = v1_log();
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        let dir = written(&bytes);
        let mut s = LogStore::open(dir.path(), opts).expect("open v2");
        assert_eq!(s.replay().expect("replay").jobs, want, "{what}");
        s.retry(1, 3, None);
        flushed_at_version(&mut s, dir.path(), 2, &format!("{what}: v2 ops keep v2"));
        let paused = gearshift_store::conformance::func(b"f", true, [0; 3]);
        s.append(&[Op::Function(paused.clone())]);
        flushed_at_version(
            &mut s,
            dir.path(),
            FORMAT_VERSION,
            &format!("{what}: raised"),
        );
        drop(s);
        assert_eq!(replayed(dir.path(), opts).functions, vec![paused], "{what}");
    }
}
