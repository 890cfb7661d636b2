//! Reading the log at startup: every op applied as its frame is read,
//! into the live jobs in submission order, their Adds' sizes (for the
//! compaction rule) and the handle counter's high-water mark.
//!
//! The live jobs go straight into the vector handed to the server: a job
//! ended later in the file leaves an empty slot behind (found through an
//! id index that lives only while reading), and the slots are squeezed out
//! in place at the end. Holding every op of the file at once, or the live
//! set in an ordered map and then a copy of it, took a 160 MB log of a
//! million jobs to 755 MB at startup.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use bytes::Bytes;

use super::{frame, IdHash, LiveSizes};
use crate::{JobRecord, Op, StoreError};

/// What a log holds.
pub(super) struct Replay {
    /// Live jobs in id order.
    pub jobs: Vec<JobRecord>,
    /// Encoded size of each live job's Add.
    pub sizes: LiveSizes,
    /// Every id + 1 and reservation seen.
    pub high: u64,
    /// Length of the valid prefix (a torn tail starts here).
    pub valid_len: usize,
}

/// Reads the log `raw` (header included); cuts nothing, refuses corruption.
pub(super) fn read(raw: &Bytes) -> Result<Replay, StoreError> {
    let mut slots: Vec<Option<JobRecord>> = Vec::new();
    let mut at: HashMap<u64, usize, BuildHasherDefault<IdHash>> = HashMap::default();
    let mut sizes = LiveSizes::default();
    let mut high = 1;
    let valid_len = frame::scan(raw, |op, size| match op {
        Op::Add(r) => {
            high = high.max(r.id.saturating_add(1));
            sizes.insert(r.id, size as u64);
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
            if let Some(i) = at.remove(&id) {
                slots[i] = None;
            }
        }
        Op::Update { id, attempts } => {
            if let Some(r) = at.get(&id).and_then(|&i| slots[i].as_mut()) {
                r.attempts = attempts;
            }
        }
        Op::Reserve(upto) => high = high.max(upto),
    })?;
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
        sizes,
        high,
        valid_len,
    })
}
