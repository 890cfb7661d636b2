//! The harness: a log store driven by the actions beside the reference
//! model, checking the store against it after every flush, crash and
//! reopen.

use std::fs;
use std::path::PathBuf;

use gearshift_store::conformance::{job, kept, sched};
use gearshift_store::log::frame::{self, FRAME_HEADER, HEADER_LEN};
use gearshift_store::log::FILE_NAME;
use gearshift_store::{
    DeadMark, Durability, JobRecord, KeptRecord, LogOptions, LogStore, Op, ScheduleRecord, Store,
};
use tempfile::TempDir;

use crate::flushed::Flushed;
use crate::ops::Action;

/// The frames of a file read from disk: its first `len` bytes, after
/// checking that only zeros (room written ahead) follow them.
fn frames_of(disk: &[u8], len: usize) -> Vec<u8> {
    assert!(disk.len() >= len, "the file is shorter than file_len()");
    assert!(
        disk[len..].iter().all(|&b| b == 0),
        "only zeros follow the frames"
    );
    disk[..len].to_vec()
}

/// The last non-empty flush since the store was opened, for tearing it.
pub(crate) struct LastFlush {
    pub(crate) before: Vec<u8>,
    pub(crate) frame: Vec<u8>,
    pub(crate) compacted: bool,
    pub(crate) state_before: Flushed,
}

pub(crate) struct Harness {
    pub(crate) dir: TempDir,
    pub(crate) opts: LogOptions,
    pub(crate) store: Option<LogStore>,
    pub(crate) flushed: Flushed,
    pub(crate) pending: Vec<Op>,
    /// The next id to hand out (from the last replay, then counting up).
    pub(crate) next: u64,
    /// Every id handed out, for stale dones.
    pub(crate) handed_out: Vec<u64>,
    pub(crate) last: Option<LastFlush>,
    /// `next_id` of the last replay.
    pub(crate) last_next_id: u64,
}

impl Harness {
    pub(crate) fn new(opts: LogOptions) -> Harness {
        let dir = TempDir::new().expect("tempdir");
        let mut h = Harness {
            dir,
            opts,
            store: None,
            flushed: Flushed::default(),
            pending: Vec::new(),
            next: 0,
            handed_out: Vec::new(),
            last: None,
            last_next_id: 0,
        };
        h.reopen("initial open");
        h
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join(FILE_NAME)
    }

    pub(crate) fn store(&mut self) -> &mut LogStore {
        self.store.as_mut().expect("store is open")
    }

    /// The flushed state with the buffered ops applied: ids of the live
    /// and dead jobs.
    pub(crate) fn view(&self) -> Vec<u64> {
        let mut v = self.flushed.clone();
        v.apply(&self.pending);
        v.stored()
    }

    /// The flushed state with the buffered ops applied: its schedules.
    pub(crate) fn schedule_view(&self) -> Vec<ScheduleRecord> {
        let mut v = self.flushed.clone();
        v.apply(&self.pending);
        v.schedules.into_values().collect()
    }

    /// The flushed state with the buffered ops applied: its kept records.
    pub(crate) fn kept_view(&self) -> Vec<KeptRecord> {
        let mut v = self.flushed.clone();
        v.apply(&self.pending);
        v.kept.into_values().collect()
    }

    pub(crate) fn buffer(&mut self, op: Op) {
        let store = self.store.as_mut().expect("store is open");
        store.append(std::slice::from_ref(&op));
        self.pending.push(op);
    }

    pub(crate) fn step(&mut self, a: &Action) {
        match a {
            Action::Add { data_len, priority } => {
                let id = self.next;
                self.next += 1;
                self.handed_out.push(id);
                let data: Vec<u8> = (0..*data_len).map(|i| (i as u64 ^ id) as u8).collect();
                let mut r = job(id, "fn", &format!("u{}", id % 4), *priority, &data);
                if id.is_multiple_of(3) {
                    r.due_ms = Some(1_800_000_000_000 + id);
                }
                self.buffer(Op::Add(r));
            }
            Action::Done(i) => {
                let view = self.view();
                if !view.is_empty() {
                    self.buffer(Op::Done(view[i % view.len()]));
                }
            }
            Action::DoneStale(i) => {
                if !self.handed_out.is_empty() {
                    let id = self.handed_out[i % self.handed_out.len()];
                    self.buffer(Op::Done(id));
                }
            }
            Action::Update(i, attempts) => {
                let view = self.view();
                if !view.is_empty() {
                    let id = view[i % view.len()];
                    self.buffer(Op::Update {
                        id,
                        attempts: *attempts,
                    });
                }
            }
            Action::Retry(i, attempts, due_ms) => {
                let view = self.view();
                if !view.is_empty() {
                    self.buffer(Op::Retry {
                        id: view[i % view.len()],
                        attempts: *attempts,
                        due_ms: *due_ms,
                    });
                }
            }
            Action::Dead(i, attempts, error_len) => {
                let view = self.view();
                if !view.is_empty() {
                    let id = view[i % view.len()];
                    let error: Vec<u8> = (0..*error_len).map(|j| (j as u64 ^ id) as u8).collect();
                    self.buffer(Op::Dead {
                        id,
                        attempts: *attempts,
                        mark: DeadMark {
                            died_ms: 1_700_000_200_000 + id,
                            error: error.into(),
                        },
                    });
                }
            }
            Action::Schedule(data_len) => {
                let id = self.next;
                self.next += 1;
                self.handed_out.push(id);
                let mut r = sched(id, "*/15 * * * *", Some(1_800_000_000_000 + id));
                r.data = (0..*data_len).map(|i| (i as u64 ^ id) as u8).collect();
                self.buffer(Op::Schedule(r));
            }
            Action::Reschedule(i, next_ms, data_len) => {
                let view = self.schedule_view();
                if !view.is_empty() {
                    let mut r = view[i % view.len()].clone();
                    r.next_ms = *next_ms;
                    r.data = (0..*data_len).map(|j| (j as u64 ^ r.id) as u8).collect();
                    self.buffer(Op::Schedule(r));
                }
            }
            Action::Unschedule(i) => {
                let view = self.schedule_view();
                if !view.is_empty() {
                    self.buffer(Op::Unschedule(view[i % view.len()].id));
                }
            }
            Action::UnscheduleStale(i) => {
                if !self.handed_out.is_empty() {
                    let id = self.handed_out[i % self.handed_out.len()];
                    self.buffer(Op::Unschedule(id));
                }
            }
            Action::Finish(i, outcome, result_len) => {
                let view = self.view();
                if !view.is_empty() {
                    let id = view[i % view.len()];
                    let result: Vec<u8> = (0..*result_len).map(|j| (j as u64 ^ id) as u8).collect();
                    self.buffer(Op::Done(id));
                    self.buffer(Op::Kept(kept(id, *outcome, &result)));
                }
            }
            Action::Rekeep(i, result_len) => {
                let view = self.kept_view();
                if !view.is_empty() {
                    let mut k = view[i % view.len()].clone();
                    k.expires_ms += 60_000;
                    k.result = (0..*result_len).map(|j| (j as u64 ^ k.id) as u8).collect();
                    self.buffer(Op::Kept(Box::new(k)));
                }
            }
            Action::Forget(i) => {
                let view = self.kept_view();
                if !view.is_empty() {
                    self.buffer(Op::Forget(view[i % view.len()].id));
                }
            }
            Action::ForgetStale(i) => {
                if !self.handed_out.is_empty() {
                    let id = self.handed_out[i % self.handed_out.len()];
                    self.buffer(Op::Forget(id));
                }
            }
            Action::Reserve(ahead) => {
                let upto = self.next + ahead;
                self.buffer(Op::Reserve(upto));
            }
            Action::Discard => {
                self.store().discard();
                self.pending.clear();
            }
            Action::Flush => self.flush(),
            Action::Reopen => self.reopen("reopen"),
            Action::Crash { at, leftover_tmp } => self.crash(*at, *leftover_tmp),
        }
    }

    pub(crate) fn flush(&mut self) {
        let path = self.path();
        let before_len = self.store().file_len() as usize;
        let before_disk = fs::read(&path).expect("read before flush");
        let ops = std::mem::take(&mut self.pending);
        self.store().flush().expect("flush");
        let after_disk = fs::read(&path).expect("read after flush");
        if ops.is_empty() {
            assert_eq!(after_disk, before_disk, "an empty flush writes nothing");
            return;
        }
        let before = frames_of(&before_disk, before_len);
        let after = frames_of(&after_disk, self.store().file_len() as usize);
        assert_eq!(
            self.store().disk_len(),
            after_disk.len() as u64,
            "disk_len() is the real length"
        );
        let mut payload = Vec::new();
        for op in &ops {
            op.encode(&mut payload);
        }
        let mut frame = Vec::new();
        frame::put_frame(&mut frame, &payload);
        let appended = after.len() == before.len() + frame.len()
            && after[..before.len()] == before[..]
            && after[before.len()..] == frame[..];
        if !appended {
            assert_eq!(
                &after[..HEADER_LEN],
                &frame::file_header(),
                "compacted file header"
            );
            assert!(
                after.len() <= before.len() + frame.len(),
                "a flush either appends exactly one frame or compacts to no more than that"
            );
        }
        let state_before = self.flushed.clone();
        self.flushed.apply(&ops);
        self.check_size_bound(after.len() as u64);
        self.last = Some(LastFlush {
            before,
            frame,
            compacted: !appended,
            state_before,
        });
    }

    /// Right after a flush the file is at most `compact_min_bytes`, or its
    /// obsolete bytes do not exceed its live bytes (what a compaction keeps:
    /// the Adds of live and dead jobs, the dead ones' Dead ops, each
    /// schedule's latest Schedule op, each kept record's latest Kept op),
    /// or it was just compacted.
    pub(crate) fn check_size_bound(&self, len: u64) {
        let size = |op: Op| op.encode(&mut Vec::new()) as u64;
        let live: u64 = self
            .flushed
            .live
            .values()
            .map(|r| size(Op::Add(r.clone())))
            .sum::<u64>()
            + self
                .flushed
                .dead
                .values()
                .map(|(r, mark)| {
                    size(Op::Add(r.clone()))
                        + size(Op::Dead {
                            id: r.id,
                            attempts: r.attempts,
                            mark: mark.clone(),
                        })
                })
                .sum::<u64>()
            + self
                .flushed
                .schedules
                .values()
                .map(|r| size(Op::Schedule(r.clone())))
                .sum::<u64>()
            + self
                .flushed
                .kept
                .values()
                .map(|k| size(Op::Kept(Box::new(k.clone()))))
                .sum::<u64>();
        let compacted = (HEADER_LEN + FRAME_HEADER + 9) as u64 + live;
        let bound = self.opts.compact_min_bytes.max(2 * live).max(compacted);
        assert!(
            len <= bound,
            "file of {len} bytes exceeds the compaction bound {bound} (live {live})"
        );
    }

    pub(crate) fn crash(&mut self, at: u16, leftover_tmp: bool) {
        self.store = None;
        self.pending.clear();
        let Some(last) = self.last.take() else {
            // Nothing written since the last open: a crash is a reopen.
            return self.reopen("crash with nothing in flight");
        };
        let keep = last.frame.len() * usize::from(at) / usize::from(u16::MAX);
        let mut torn = last.before.clone();
        torn.extend_from_slice(&last.frame[..keep]);
        let mut on_disk = torn.clone();
        let mut complete = keep == last.frame.len();
        if self.opts.durability == Durability::Fsync {
            // Fsync durability writes room ahead: the cut frame sits in
            // zeros, not at the end of the file. If the bytes it lost were
            // zeros anyway, the whole frame is on disk (and replays, like
            // any frame written before a crash that its fsync never
            // confirmed).
            on_disk.resize(on_disk.len() + 1000, 0);
            complete |= last.frame[keep..].iter().all(|&b| b == 0);
            if complete {
                torn = last.before.clone();
                torn.extend_from_slice(&last.frame);
            }
        }
        fs::write(self.path(), &on_disk).expect("write torn file");
        if last.compacted && leftover_tmp {
            let tmp = self.dir.path().join(format!("{FILE_NAME}.compact"));
            fs::write(tmp, &torn[..torn.len() / 2]).expect("write temp file");
        }
        if !complete {
            self.flushed = last.state_before;
        }
        let what = format!(
            "crash keeping {keep} of the last frame's {} bytes",
            last.frame.len()
        );
        self.reopen(&what);
        let want_len = if !complete {
            last.before.len()
        } else {
            torn.len()
        };
        let tmp = self.dir.path().join(format!("{FILE_NAME}.compact"));
        assert!(!tmp.exists(), "{what}: open removed the stale temp file");
        let len = fs::metadata(self.path()).expect("metadata").len();
        // Open never compacts, so the length is exact.
        assert_eq!(
            len, want_len as u64,
            "{what}: file cut to the last whole frame"
        );
    }

    pub(crate) fn reopen(&mut self, what: &str) {
        self.store = None;
        self.pending.clear();
        self.last = None;
        let mut store = LogStore::open(self.dir.path(), self.opts)
            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        let r = store.replay().expect("replay");
        let want: Vec<JobRecord> = self.flushed.live.values().cloned().collect();
        assert_eq!(r.jobs, want, "{what}: replay equals the flushed state");
        let want: Vec<(JobRecord, DeadMark)> = self.flushed.dead.values().cloned().collect();
        assert_eq!(r.dead, want, "{what}: dead jobs equal the flushed state");
        let want: Vec<ScheduleRecord> = self.flushed.schedules.values().cloned().collect();
        assert_eq!(
            r.schedules, want,
            "{what}: schedules equal the flushed state"
        );
        let want: Vec<KeptRecord> = self.flushed.kept.values().cloned().collect();
        assert_eq!(r.kept, want, "{what}: kept records equal the flushed state");
        assert!(
            r.next_id >= self.flushed.high,
            "{what}: next_id {} below acknowledged high-water {}",
            r.next_id,
            self.flushed.high
        );
        assert!(r.next_id >= 1, "{what}: next_id starts at 1");
        assert!(
            r.next_id >= self.last_next_id,
            "{what}: next_id went back from {} to {}",
            self.last_next_id,
            r.next_id
        );
        self.last_next_id = r.next_id;
        self.next = r.next_id;
        self.store = Some(store);
    }
}
