//! Reading the log at startup: every op applied as its frame is read,
//! into the live jobs in submission order, the dead ones with their marks,
//! the schedules (few: an ordered map of them), the kept records (an
//! ordered map too: each id's versions replace one another), the sizes of
//! what a compaction would keep (for the compaction rule) and the handle
//! counter's high-water mark.
//!
//! The live jobs go straight into the vector handed to the server: a job
//! ended later in the file leaves an empty slot behind (found through an
//! id index that lives only while reading), and the slots are squeezed out
//! in place at the end (a dead job's slot is emptied into the dead list
//! first; only its mark waits in a map meanwhile). Holding every op of the file at once, or the live
//! set in an ordered map and then a copy of it, took a 160 MB log of a
//! million jobs to 755 MB at startup.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use bytes::Bytes;

use super::{frame, IdHash, LiveSizes};
use crate::{DeadMark, FunctionRecord, JobRecord, KeptRecord, Op, ScheduleRecord, StoreError};

/// What a log holds.
pub(super) struct Replay {
    /// Live jobs in id order.
    pub jobs: Vec<JobRecord>,
    /// Dead jobs in id order, with their marks.
    pub dead: Vec<(JobRecord, DeadMark)>,
    /// Live schedules in id order, each its latest version.
    pub schedules: Vec<ScheduleRecord>,
    /// Kept records in id order, each its latest version.
    pub kept: Vec<KeptRecord>,
    /// Functions' settings in name order, each its latest version.
    pub functions: Vec<FunctionRecord>,
    /// Encoded size of each live or dead job's Add.
    pub sizes: LiveSizes,
    /// Encoded size of each dead job's last Dead op.
    pub dead_sizes: LiveSizes,
    /// Encoded size of each live schedule's latest Schedule op.
    pub schedule_sizes: LiveSizes,
    /// Encoded size of each kept record's latest Kept op.
    pub kept_sizes: LiveSizes,
    /// Every id + 1 and reservation seen.
    pub high: u64,
    /// Length of the valid prefix (a torn tail starts here).
    pub valid_len: usize,
    /// The file's format version.
    pub version: u32,
}

/// Reads the log `raw` (header included); cuts nothing, refuses corruption.
pub(super) fn read(raw: &Bytes) -> Result<Replay, StoreError> {
    let version = frame::check_header(raw)?;
    let mut slots: Vec<Option<JobRecord>> = Vec::new();
    let mut at: HashMap<u64, usize, BuildHasherDefault<IdHash>> = HashMap::default();
    // Dead jobs stay in their slots until the end; their marks wait here.
    let mut marks: HashMap<u64, DeadMark, BuildHasherDefault<IdHash>> = HashMap::default();
    let mut sizes = LiveSizes::default();
    let mut dead_sizes = LiveSizes::default();
    let mut schedules: BTreeMap<u64, ScheduleRecord> = BTreeMap::new();
    let mut schedule_sizes = LiveSizes::default();
    let mut kept: BTreeMap<u64, KeptRecord> = BTreeMap::new();
    let mut kept_sizes = LiveSizes::default();
    let mut functions: BTreeMap<Bytes, FunctionRecord> = BTreeMap::new();
    let mut high = 1;
    let valid_len = frame::scan(raw, |op, size| match op {
        Op::Add(r) => {
            high = high.max(r.id.saturating_add(1));
            sizes.insert(r.id, size as u64);
            marks.remove(&r.id);
            dead_sizes.remove(&r.id);
            match at.get(&r.id) {
                // The same id twice (never written): the later one wins.
                Some(&i) => slots[i] = Some(r),
                None => {
                    at.insert(r.id, slots.len());
                    slots.push(Some(r));
                }
            }
        }
        Op::Done(id) => {
            sizes.remove(&id);
            marks.remove(&id);
            dead_sizes.remove(&id);
            if let Some(i) = at.remove(&id) {
                slots[i] = None;
            }
        }
        Op::Update { id, attempts } => {
            // A dead job keeps the count it died with.
            if marks.contains_key(&id) {
                return;
            }
            if let Some(r) = at.get(&id).and_then(|&i| slots[i].as_mut()) {
                r.attempts = attempts;
            }
        }
        Op::Retry {
            id,
            attempts,
            due_ms,
        } => {
            if let Some(r) = at.get(&id).and_then(|&i| slots[i].as_mut()) {
                r.attempts = attempts;
                r.due_ms = due_ms;
                // A dead job is revived.
                marks.remove(&id);
                dead_sizes.remove(&id);
            }
        }
        Op::Dead { id, attempts, mark } => {
            if let Some(r) = at.get(&id).and_then(|&i| slots[i].as_mut()) {
                r.attempts = attempts;
                marks.insert(id, mark);
                dead_sizes.insert(id, size as u64);
            }
        }
        Op::Schedule(s) => {
            high = high.max(s.id.saturating_add(1));
            schedule_sizes.insert(s.id, size as u64);
            schedules.insert(s.id, s);
        }
        // A Done leaves schedules alone; only this drops one.
        Op::Unschedule(id) => {
            schedules.remove(&id);
            schedule_sizes.remove(&id);
        }
        Op::Kept(k) => {
            high = high.max(k.id.saturating_add(1));
            kept_sizes.insert(k.id, size as u64);
            kept.insert(k.id, *k);
        }
        // A Done leaves kept records alone too.
        Op::Forget(id) => {
            kept.remove(&id);
            kept_sizes.remove(&id);
        }
        Op::Reserve(upto) => high = high.max(upto),
        // Never written to the log.
        Op::Started(_) => {}
        Op::Function(f) if f.is_default() => {
            functions.remove(&f.name);
        }
        Op::Function(f) => {
            functions.insert(f.name.clone(), f);
        }
    })?;
    // Dead jobs leave their slots for the dead list, in id order.
    let mut marks: Vec<(u64, DeadMark)> = marks.into_iter().collect();
    marks.sort_unstable_by_key(|(id, _)| *id);
    let dead: Vec<(JobRecord, DeadMark)> = marks
        .into_iter()
        .filter_map(|(id, mark)| {
            let r = at.get(&id).and_then(|&i| slots[i].take())?;
            Some((r, mark))
        })
        .collect();
    drop(at);
    // `filter_map`, not `flatten`: std collects it into the same buffer (an
    // `Option<JobRecord>` is a `JobRecord` with a niche), where `flatten`
    // allocates a second one: 475 against 583 MB at the peak for a million
    // jobs.
    #[allow(clippy::filter_map_identity)]
    let mut jobs: Vec<JobRecord> = slots.into_iter().filter_map(|slot| slot).collect();
    if !jobs.is_sorted_by_key(|r| r.id) {
        // Adds are written in id order; a file from elsewhere may not be.
        jobs.sort_by_key(|r| r.id);
    }
    Ok(Replay {
        jobs,
        dead,
        schedules: schedules
            .into_values()
            .map(ScheduleRecord::detached)
            .collect(),
        kept: kept.into_values().map(KeptRecord::detached).collect(),
        functions: functions
            .into_values()
            .map(FunctionRecord::detached)
            .collect(),
        sizes,
        dead_sizes,
        schedule_sizes,
        kept_sizes,
        high,
        valid_len,
        version,
    })
}
