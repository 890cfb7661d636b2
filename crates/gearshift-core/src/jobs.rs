//! Where jobs live: a paged slab of [`Job`]s and three compact indexes
//! into it — by id (the handle number, see [`crate::id_index`]), by named
//! unique, and by (function, workload) for `-` uniques.
//!
//! The indexes hold 4-byte slab positions: the id index is a window over
//! the id line, the other two are hash tables whose keys are read back from
//! the job itself. So a queued job costs its slot in the slab plus about
//! four or five bytes per index it is in, at any depth, and every lookup is
//! O(1). The slab grows a page at a time (no reallocation copying every
//! job) and reuses freed slots; it lets go of everything once it is empty.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::id_index::{IdIndex, Walk};
use crate::ids::{FuncId, JobId};
use crate::job::{Job, UniqueKey};

/// Slots per slab page.
const PAGE: usize = 256;
/// Pages an empty table keeps (so a queue that keeps emptying does not
/// allocate again each time); past this, emptying lets go of everything.
const KEEP_PAGES: usize = 16;
/// End of the free list.
const NONE: u32 = u32::MAX;

enum Slot {
    Full(Job),
    /// A free slot: the next free one.
    Free(u32),
}

/// All jobs, by id, with the coalescing indexes.
pub struct Jobs {
    pages: Vec<Vec<Slot>>,
    free: u32,
    len: usize,
    by_id: IdIndex,
    /// Jobs with a named unique: one entry per job, keyed by the unique.
    by_unique: HashTable<u32>,
    /// Jobs with the `-` unique: one entry per (function, workload).
    by_data: HashTable<u32>,
    /// Keys the hashes of client-chosen bytes (uniques, workloads).
    keys: RandomState,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs {
            pages: Vec::new(),
            free: NONE,
            len: 0,
            by_id: IdIndex::default(),
            by_unique: HashTable::new(),
            by_data: HashTable::new(),
            keys: RandomState::new(),
        }
    }
}

fn slot(pages: &[Vec<Slot>], at: u32) -> Option<&Job> {
    let at = at as usize;
    match pages.get(at / PAGE)?.get(at % PAGE)? {
        Slot::Full(job) => Some(job),
        Slot::Free(_) => None,
    }
}

/// The job in slot `at`, which an index entry names: always full.
fn indexed(pages: &[Vec<Slot>], at: u32) -> &Job {
    match slot(pages, at) {
        Some(job) => job,
        None => unreachable!("an index names a free slot"),
    }
}

impl Jobs {
    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No jobs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn position(&self, id: JobId) -> Option<u32> {
        self.by_id.get(id)
    }

    /// The job with this id.
    pub fn get(&self, id: JobId) -> Option<&Job> {
        slot(&self.pages, self.position(id)?)
    }

    /// The job with this id, to change (never its id, unique or workload:
    /// the indexes are keyed by them).
    pub fn get_mut(&mut self, id: JobId) -> Option<&mut Job> {
        let at = self.position(id)? as usize;
        match self.pages.get_mut(at / PAGE)?.get_mut(at % PAGE)? {
            Slot::Full(job) => Some(job),
            Slot::Free(_) => None,
        }
    }

    /// Whether a job has this id.
    pub fn contains(&self, id: JobId) -> bool {
        self.position(id).is_some()
    }

    /// Every job, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Job> {
        self.pages.iter().flatten().filter_map(|s| match s {
            Slot::Full(job) => Some(job),
            Slot::Free(_) => None,
        })
    }

    /// Visits jobs from id `start` on, in id order, until `visit` returns
    /// false or about `budget` index slots were looked at ([`IdIndex::walk`]).
    pub fn walk(&self, start: JobId, budget: usize, mut visit: impl FnMut(&Job) -> bool) -> Walk {
        let pages = &self.pages;
        self.by_id
            .walk(start, budget, |_, at| visit(indexed(pages, at)))
    }

    fn unique_hash(&self, unique: &[u8]) -> u64 {
        self.keys.hash_one(unique)
    }

    fn data_hash(&self, func: FuncId, data: &[u8]) -> u64 {
        self.keys.hash_one((func, data))
    }

    /// Adds a job (its id must be new) and puts it in the coalescing index
    /// its unique calls for. A `-` job takes over the (function, workload)
    /// entry of an earlier one, as a map insert would.
    pub fn insert(&mut self, job: Job) {
        let (id, key) = (job.id, job.unique_key());
        let uhash = match key {
            UniqueKey::None => 0,
            UniqueKey::Data => self.data_hash(job.func(), job.data()),
            UniqueKey::Named => self.unique_hash(job.unique()),
        };
        let at = self.alloc(job);
        self.by_id.insert(id, at);
        let Jobs {
            pages,
            by_unique,
            by_data,
            keys,
            ..
        } = self;
        match key {
            UniqueKey::None => {}
            UniqueKey::Named => {
                by_unique.insert_unique(uhash, at, |&i| keys.hash_one(indexed(pages, i).unique()));
            }
            UniqueKey::Data => {
                let job = indexed(pages, at);
                let same = |&i: &u32| {
                    let other = indexed(pages, i);
                    other.func == job.func && other.data() == job.data()
                };
                match by_data.find_mut(uhash, same) {
                    Some(entry) => *entry = at,
                    None => {
                        by_data.insert_unique(uhash, at, |&i| {
                            let j = indexed(pages, i);
                            keys.hash_one((j.func(), j.data()))
                        });
                    }
                }
            }
        }
    }

    fn alloc(&mut self, job: Job) -> u32 {
        self.len += 1;
        if self.free != NONE {
            let at = self.free;
            let page = &mut self.pages[at as usize / PAGE];
            let s = &mut page[at as usize % PAGE];
            if let Slot::Free(next) = *s {
                self.free = next;
            }
            *s = Slot::Full(job);
            return at;
        }
        if self.pages.last().is_none_or(|p| p.len() == PAGE) {
            self.pages.push(Vec::with_capacity(PAGE));
        }
        let n = self.pages.len() - 1;
        let page = &mut self.pages[n];
        page.push(Slot::Full(job));
        // Past u32::MAX - 1 slots (hundreds of GiB of jobs) positions would wrap.
        (n * PAGE + page.len() - 1) as u32
    }

    /// Removes a job and every index entry that names it.
    pub fn remove(&mut self, id: JobId) -> Option<Job> {
        let at = self.by_id.remove(id)?;
        self.unindex_at(at);
        let page = self.pages.get_mut(at as usize / PAGE)?;
        let s = std::mem::replace(&mut page[at as usize % PAGE], Slot::Free(self.free));
        self.free = at;
        self.len -= 1;
        if self.len == 0 && self.pages.len() > KEEP_PAGES {
            // Drained: give the memory of a deep queue back.
            *self = Jobs {
                keys: self.keys.clone(),
                ..Jobs::default()
            };
        }
        match s {
            Slot::Full(job) => Some(job),
            Slot::Free(_) => None,
        }
    }

    /// Takes a job out of the coalescing indexes, so later submissions
    /// with its unique make a new job. Only entries naming this very job
    /// go: a cancelled job is unindexed early, and a newer job may own the
    /// key by the time it is removed.
    pub fn unindex_unique(&mut self, id: JobId) {
        if let Some(at) = self.position(id) {
            self.unindex_at(at);
        }
    }

    fn unindex_at(&mut self, at: u32) {
        let job = indexed(&self.pages, at);
        let (hash, table) = match job.unique_key() {
            UniqueKey::None => return,
            UniqueKey::Data => (self.data_hash(job.func(), job.data()), &mut self.by_data),
            UniqueKey::Named => (self.unique_hash(job.unique()), &mut self.by_unique),
        };
        if let Ok(entry) = table.find_entry(hash, |&i| i == at) {
            entry.remove();
        }
    }

    /// The unique-id rule, for every submission (a client's or a
    /// schedule's): the live job a submission of `unique` and `data` to
    /// `func` joins instead of making a new one. An empty unique never
    /// joins, `-` joins on the workload, any other on the unique.
    #[inline]
    pub fn coalesces_with(&self, func: FuncId, unique: &[u8], data: &[u8]) -> Option<JobId> {
        match UniqueKey::of(unique) {
            UniqueKey::None => None,
            UniqueKey::Data => self.find_data(func, data),
            UniqueKey::Named => self.find_named(Some(func), unique).map(|j| j.id),
        }
    }

    /// The job a `-` submission of this workload joins.
    pub fn find_data(&self, func: FuncId, data: &[u8]) -> Option<JobId> {
        let pages = &self.pages;
        self.by_data
            .find(self.data_hash(func, data), |&i| {
                let j = indexed(pages, i);
                j.func() == func && j.data() == data
            })
            .map(|&i| indexed(pages, i).id)
    }

    /// The oldest job holding a named unique, within a function or in any.
    pub fn find_named(&self, func: Option<FuncId>, unique: &[u8]) -> Option<&Job> {
        let pages = &self.pages;
        self.by_unique
            .iter_hash(self.unique_hash(unique))
            .map(|&i| indexed(pages, i))
            .filter(|j| j.unique() == unique && func.is_none_or(|f| j.func() == f))
            .min_by_key(|j| j.id)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use gearshift_proto::Priority;

    use super::*;
    use crate::job::{ConnList, JobState, Persist};

    fn job(id: JobId, func: u32, unique: &'static str, data: &'static str) -> Job {
        Job {
            id,
            payload: Bytes::from(format!("{unique}{data}")),
            unique_len: unique.len() as u32,
            created: 0,
            clients: ConnList::Empty,
            extra: None,
            func,
            retries: 0,
            priority: Priority::Normal,
            background: true,
            state: JobState::Queued,
            persist: Persist::No,
        }
    }

    #[test]
    fn insert_get_remove_reuse() {
        let mut jobs = Jobs::default();
        for id in 1..=1000 {
            jobs.insert(job(id, 0, "", "d"));
        }
        assert_eq!(jobs.len(), 1000);
        for id in (1..=1000).step_by(2) {
            assert_eq!(jobs.remove(id).map(|j| j.id), Some(id));
        }
        assert!(jobs.get(1).is_none());
        assert_eq!(jobs.get(2).map(|j| j.id), Some(2));
        for id in 1001..=1500 {
            jobs.insert(job(id, 0, "", "d"));
        }
        assert_eq!(jobs.pages.len(), 1000usize.div_ceil(PAGE));
        assert_eq!(jobs.iter().count(), 1000);
        for id in (2..=1000).step_by(2).chain(1001..=1500) {
            assert!(jobs.remove(id).is_some());
        }
        assert!(jobs.is_empty());
        assert_eq!(jobs.pages.len(), 4, "a small table keeps its pages");
        for id in 2000..2000 + (KEEP_PAGES as u64 + 1) * PAGE as u64 {
            jobs.insert(job(id, 0, "", "d"));
        }
        for id in 2000..2000 + (KEEP_PAGES as u64 + 1) * PAGE as u64 {
            jobs.remove(id);
        }
        assert!(jobs.pages.is_empty(), "a drained deep table lets go");
    }

    #[test]
    fn scattered_ids_are_found() {
        // Restored jobs keep their ids, which may lie far apart and arrive
        // in any order; new ones then follow the highest.
        let mut jobs = Jobs::default();
        let ids = [1u64 << 40, 7, u64::MAX - 1, 8, 1 << 20, (1 << 40) + 1];
        for &id in &ids {
            jobs.insert(job(id, 0, "", "d"));
        }
        for id in (u64::MAX - 600)..(u64::MAX - 1) {
            jobs.insert(job(id, 0, "", "d"));
        }
        for &id in &ids {
            assert_eq!(jobs.get(id).map(|j| j.id), Some(id));
        }
        assert!(jobs.get(9).is_none());
        for &id in &ids {
            assert_eq!(jobs.remove(id).map(|j| j.id), Some(id));
            assert!(jobs.get(id).is_none());
        }
        assert_eq!(jobs.len(), 599);
        assert_eq!(jobs.get(u64::MAX - 2).map(|j| j.id), Some(u64::MAX - 2));
    }

    #[test]
    fn coalescing_indexes() {
        let mut jobs = Jobs::default();
        jobs.insert(job(1, 0, "u", "a"));
        jobs.insert(job(2, 1, "u", "a"));
        jobs.insert(job(3, 0, "-", "w"));
        assert_eq!(jobs.find_named(Some(1), b"u").map(|j| j.id), Some(2));
        assert_eq!(jobs.find_named(None, b"u").map(|j| j.id), Some(1));
        assert_eq!(jobs.find_data(0, b"w"), Some(3));
        assert_eq!(jobs.find_data(1, b"w"), None);
        jobs.insert(job(4, 0, "-", "w"));
        assert_eq!(jobs.find_data(0, b"w"), Some(4));
        jobs.remove(3);
        assert_eq!(jobs.find_data(0, b"w"), Some(4));
        jobs.unindex_unique(1);
        assert_eq!(jobs.find_named(None, b"u").map(|j| j.id), Some(2));
        assert_eq!(jobs.remove(1).map(|j| j.id), Some(1));
        jobs.remove(4);
        assert_eq!(jobs.find_data(0, b"w"), None);
    }
}
