//! The index from a job's id to its slot in the job slab.
//!
//! Ids are counters the server hands out one after another, and jobs mostly
//! leave in about the order they came. So the index is a window of pages
//! over the id line, each holding the slots of [`SPAN`] consecutive ids: a
//! lookup is two array reads, an insert never rehashes, and a queued job
//! costs four bytes. Pages that empty at the old end are dropped as the
//! window moves on.
//!
//! Ids that do not fit that pattern go to an ordered map on the side, so the
//! window's memory always stays within a small multiple of its entries:
//! - stragglers (an epoch job due tomorrow, a job a worker holds for hours)
//!   would keep sparse pages alive at the old end; once the window's pages
//!   are mostly empty, the oldest page's entries move to the side map;
//! - an id far ahead of the window (restored jobs with gaps between their
//!   ids) would open a long run of empty pages; instead the window's
//!   entries move to the side map and the window starts over at the new id.
//!
//! An id lives in exactly one of the two; lookups try the window first.
//! Both are ordered, so [`IdIndex::walk`] lists ids in order a page at a
//! time (the HTTP API's job listing) without a sort of the whole table.

use std::collections::{BTreeMap, VecDeque};

use crate::ids::JobId;

/// Ids per page.
pub const SPAN: usize = 512;
/// An id of the page that has no slot.
const NONE: u32 = u32::MAX;

/// One page: the slots of `SPAN` consecutive ids.
struct Page {
    at: Box<[u32; SPAN]>,
    live: u32,
}

/// Job id → slab position.
#[derive(Default)]
pub struct IdIndex {
    /// Page number (id / SPAN) of `pages[0]`.
    base: u64,
    /// The window; `None` is a page with no entries.
    pages: VecDeque<Option<Page>>,
    /// Pages of the window that exist.
    live_pages: usize,
    /// Entries in the window.
    live: usize,
    /// Entries outside the window.
    side: BTreeMap<JobId, u32>,
}

/// How an ordered walk ([`IdIndex::walk`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Every id from the start on was visited.
    End,
    /// The visitor asked to stop after this id.
    Stopped(JobId),
    /// The budget ran out: every id below this one was visited.
    Budget(JobId),
}

fn split(id: JobId) -> (u64, usize) {
    (id / SPAN as u64, (id % SPAN as u64) as usize)
}

impl IdIndex {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.live + self.side.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The window's page of `page`, if the window covers it.
    fn page(&self, page: u64) -> Option<&Page> {
        let i = usize::try_from(page.checked_sub(self.base)?).ok()?;
        self.pages.get(i)?.as_ref()
    }

    /// The slot of `id`.
    #[inline]
    pub fn get(&self, id: JobId) -> Option<u32> {
        let (page, i) = split(id);
        if let Some(p) = self.page(page) {
            let at = p.at[i];
            if at != NONE {
                return Some(at);
            }
        }
        if self.side.is_empty() {
            return None;
        }
        self.side.get(&id).copied()
    }

    /// Records the slot of a new id (one not in the index).
    #[inline]
    pub fn insert(&mut self, id: JobId, at: u32) {
        let (page, i) = split(id);
        let k = page
            .checked_sub(self.base)
            .and_then(|k| usize::try_from(k).ok());
        if let Some(Some(p)) = k.and_then(|k| self.pages.get_mut(k)) {
            // The common case: a page that exists (so the window's shape
            // does not change).
            if std::mem::replace(&mut p.at[i], at) == NONE {
                p.live += 1;
                self.live += 1;
            }
            return;
        }
        self.insert_new_page(id, at);
    }

    fn insert_new_page(&mut self, id: JobId, at: u32) {
        let (page, i) = split(id);
        if self.pages.is_empty() {
            self.base = page;
        }
        let Some(mut k) = page.checked_sub(self.base) else {
            // Older than the window (a restored job): kept aside.
            self.side.insert(id, at);
            return;
        };
        let ahead = k.saturating_sub(self.pages.len() as u64);
        if ahead > 4 * self.live_pages as u64 + 16 {
            // Far ahead: a run of empty pages would cost more than the
            // window holds. Start the window over at this id.
            self.evict_all();
            self.base = page;
            k = 0;
        }
        let k = k as usize;
        while self.pages.len() <= k {
            self.pages.push_back(None);
        }
        let slot = &mut self.pages[k];
        let p = slot.get_or_insert_with(|| Page {
            at: Box::new([NONE; SPAN]),
            live: 0,
        });
        if p.live == 0 {
            self.live_pages += 1;
        }
        if std::mem::replace(&mut p.at[i], at) == NONE {
            p.live += 1;
            self.live += 1;
        }
        self.trim();
    }

    /// Forgets `id`; returns its slot.
    pub fn remove(&mut self, id: JobId) -> Option<u32> {
        let (page, i) = split(id);
        let k = page
            .checked_sub(self.base)
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < self.pages.len());
        if let Some(k) = k {
            if let Some(p) = self.pages[k].as_mut() {
                let at = std::mem::replace(&mut p.at[i], NONE);
                if at != NONE {
                    p.live -= 1;
                    self.live -= 1;
                    if p.live == 0 {
                        self.pages[k] = None;
                        self.live_pages -= 1;
                    }
                    self.trim();
                    return Some(at);
                }
            }
        }
        self.side.remove(&id)
    }

    /// Drops empty pages at the old end, and moves the oldest pages'
    /// entries aside while the window is mostly empty.
    fn trim(&mut self) {
        loop {
            match self.pages.front() {
                Some(None) => {
                    self.pages.pop_front();
                    self.base += 1;
                }
                Some(Some(_)) if self.oversized() => self.evict_front(),
                _ => break,
            }
        }
        if self.pages.is_empty() && self.pages.capacity() > 64 {
            self.pages = VecDeque::new();
        }
    }

    /// The window is mostly empty: its pages hold over eight times the
    /// slots its entries need, or most of its pages are gaps.
    fn oversized(&self) -> bool {
        self.live_pages * SPAN > 8 * self.live + 4 * SPAN
            || self.pages.len() > 4 * self.live_pages + 16
    }

    fn evict_front(&mut self) {
        if let Some(Some(p)) = self.pages.pop_front() {
            self.move_aside(p);
        }
        self.base += 1;
    }

    fn evict_all(&mut self) {
        while !self.pages.is_empty() {
            self.evict_front();
        }
    }

    fn move_aside(&mut self, p: Page) {
        let first = self.base * SPAN as u64;
        for (i, &at) in p.at.iter().enumerate() {
            if at != NONE {
                self.side.insert(first + i as u64, at);
            }
        }
        self.live -= p.live as usize;
        self.live_pages -= 1;
    }

    /// Visits the ids from `start` on, in ascending order, with their
    /// slots, until `visit` returns false or about `budget` slots were
    /// looked at (a whole page of [`SPAN`] ids at least, so it always moves).
    pub fn walk(
        &self,
        start: JobId,
        budget: usize,
        mut visit: impl FnMut(JobId, u32) -> bool,
    ) -> Walk {
        let mut cursor = start;
        let mut spent = 0usize;
        let mut chunk: Vec<(JobId, u32)> = Vec::new();
        loop {
            let Some((page, skipped)) = self.next_page_from(cursor) else {
                return Walk::End;
            };
            spent += skipped;
            let lo = cursor.max(page * SPAN as u64);
            // `None`: the last page of the id line.
            let hi = (page + 1).checked_mul(SPAN as u64);
            chunk.clear();
            if let Some(p) = self.page(page) {
                let first = page * SPAN as u64;
                let from = (lo - first) as usize;
                for (i, &at) in p.at.iter().enumerate().skip(from) {
                    if at != NONE {
                        chunk.push((first + i as u64, at));
                    }
                }
                spent += SPAN;
            }
            let side = match hi {
                Some(hi) => self.side.range(lo..hi),
                None => self.side.range(lo..),
            };
            for (&id, &at) in side {
                chunk.push((id, at));
                spent += 1;
            }
            chunk.sort_unstable_by_key(|&(id, _)| id);
            for &(id, at) in &chunk {
                if !visit(id, at) {
                    return Walk::Stopped(id);
                }
            }
            let Some(hi) = hi else {
                return Walk::End;
            };
            cursor = hi;
            if spent >= budget {
                return Walk::Budget(cursor);
            }
        }
    }

    /// The first page number, at or after `cursor`'s, that holds an entry
    /// (in the window or aside), and how many empty window pages it skipped.
    fn next_page_from(&self, cursor: JobId) -> Option<(u64, usize)> {
        let (page, _) = split(cursor);
        let aside = self.side.range(cursor..).next().map(|(&id, _)| split(id).0);
        let from = usize::try_from(page.saturating_sub(self.base)).unwrap_or(usize::MAX);
        let mut skipped = 0;
        let mut window = None;
        for (k, p) in self.pages.iter().enumerate().skip(from) {
            let n = self.base + k as u64;
            if aside.is_some_and(|a| a <= n) {
                break;
            }
            if p.is_some() {
                window = Some(n.max(page));
                break;
            }
            skipped += 1;
        }
        let next = match (window, aside) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.map(|n| (n, skipped))
    }

    /// Bytes the window's pages take (for tests of its bounds).
    #[cfg(test)]
    fn window_bytes(&self) -> usize {
        self.live_pages * SPAN * 4 + self.pages.len() * std::mem::size_of::<Option<Page>>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn dense_ids_live_in_the_window() {
        let mut ix = IdIndex::default();
        for id in 1..=10_000u64 {
            ix.insert(id, id as u32 * 3);
        }
        assert!(ix.side.is_empty());
        assert_eq!(ix.get(5000), Some(15_000));
        for id in 1..=9_000u64 {
            assert_eq!(ix.remove(id), Some(id as u32 * 3));
        }
        assert_eq!(ix.get(9_000), None);
        assert_eq!(ix.len(), 1000);
        assert!(
            ix.pages.len() <= 1000 / SPAN + 2,
            "drained pages are dropped"
        );
    }

    #[test]
    fn a_straggler_does_not_pin_the_pages_after_it() {
        let mut ix = IdIndex::default();
        ix.insert(1, 7);
        for id in 2..300_000u64 {
            ix.insert(id, 0);
            ix.remove(id);
        }
        assert_eq!(ix.get(1), Some(7));
        assert!(ix.window_bytes() < 64 * 1024, "{} bytes", ix.window_bytes());
        assert_eq!(ix.remove(1), Some(7));
        assert!(ix.is_empty());
    }

    #[test]
    fn an_id_far_ahead_restarts_the_window() {
        let mut ix = IdIndex::default();
        ix.insert(3, 1);
        ix.insert(1 << 40, 2);
        ix.insert((1 << 40) + 1, 3);
        ix.insert(u64::MAX, 4);
        assert!(ix.window_bytes() < 64 * 1024);
        assert_eq!(ix.get(3), Some(1));
        assert_eq!(ix.get(1 << 40), Some(2));
        assert_eq!(ix.get((1 << 40) + 1), Some(3));
        assert_eq!(ix.get(u64::MAX), Some(4));
        assert_eq!(ix.get(4), None);
    }

    /// Operations of the model test: ids drawn from a few regions, so
    /// inserts land behind, inside and far ahead of the window.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Remove(u64),
        Get(u64),
    }

    /// Every id of the index in order, in walks of a small budget.
    fn walked(ix: &IdIndex, budget: usize) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            match ix.walk(start, budget, |id, at| {
                out.push((id, at));
                out.len() % 7 != 0
            }) {
                Walk::End => return out,
                Walk::Stopped(id) => match id.checked_add(1) {
                    Some(n) => start = n,
                    None => return out,
                },
                Walk::Budget(next) => start = next,
            }
        }
    }

    #[test]
    fn walks_visit_window_and_side_in_order_once() {
        let mut ix = IdIndex::default();
        ix.insert(1, 7);
        for id in 2..20_000u64 {
            ix.insert(id, 0);
            if id % 100 != 0 {
                ix.remove(id);
            }
        }
        ix.insert(1 << 40, 1);
        ix.insert(u64::MAX, 2);
        let ids: Vec<u64> = walked(&ix, 1).into_iter().map(|(id, _)| id).collect();
        let mut want: Vec<u64> = std::iter::once(1)
            .chain((100..20_000).step_by(100))
            .chain([1 << 40, u64::MAX])
            .collect();
        want.sort_unstable();
        assert_eq!(ids, want);
        // A bounded walk stops and says where to go on.
        assert!(matches!(ix.walk(0, 1, |_, _| true), Walk::Budget(_)));
    }

    fn id() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..4096,
            (0u64..4096).prop_map(|i| (1 << 33) + i),
            (0u64..64).prop_map(|i| u64::MAX - i),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => id().prop_map(Op::Insert),
            2 => id().prop_map(Op::Remove),
            1 => id().prop_map(Op::Get),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Agrees with a hash map on every lookup, and its window never
        /// holds more than a small multiple of what its entries need.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(op(), 1..2000)) {
            let mut ix = IdIndex::default();
            let mut model = HashMap::new();
            for (n, op) in ops.into_iter().enumerate() {
                let n = n as u32;
                match op {
                    Op::Insert(id) => {
                        if let std::collections::hash_map::Entry::Vacant(e) = model.entry(id) {
                            e.insert(n);
                            ix.insert(id, n);
                        }
                    }
                    Op::Remove(id) => prop_assert_eq!(ix.remove(id), model.remove(&id)),
                    Op::Get(id) => prop_assert_eq!(ix.get(id), model.get(&id).copied()),
                }
                prop_assert_eq!(ix.len(), model.len());
                let bound = (8 * ix.len() + 8 * SPAN) * 4 + 4096;
                prop_assert!(ix.window_bytes() <= bound, "{} > {}", ix.window_bytes(), bound);
            }
            for (id, at) in &model {
                prop_assert_eq!(ix.get(*id), Some(*at));
            }
            let mut sorted: Vec<(u64, u32)> = model.into_iter().collect();
            sorted.sort_unstable();
            prop_assert_eq!(walked(&ix, 600), sorted);
        }

        /// The pattern a busy server makes: ids handed out in order (with
        /// now and then a jump, as after a restore), a deep block of jobs
        /// that stay, a stream that comes and goes in any order, and some
        /// stragglers held for a long time. Every id always finds exactly
        /// its own slot, and a removed id finds none — even once its slot
        /// number is given to a newer id.
        #[test]
        fn counter_ids_never_find_another_slot(
            deep in 0usize..3 * SPAN,
            steps in proptest::collection::vec((0u8..8, any::<u16>()), 1..4000),
        ) {
            let mut ix = IdIndex::default();
            let mut model: HashMap<u64, u32> = HashMap::new();
            let mut live: Vec<u64> = Vec::new();
            let mut gone: Vec<u64> = Vec::new();
            // Slots are reused as a slab reuses them: freed ones first.
            let mut free: Vec<u32> = Vec::new();
            let mut next_slot = 0u32;
            let mut next_id = 1u64;
            let mut take_slot = |free: &mut Vec<u32>| {
                free.pop().unwrap_or_else(|| {
                    next_slot += 1;
                    next_slot - 1
                })
            };
            for _ in 0..deep {
                let at = take_slot(&mut free);
                ix.insert(next_id, at);
                model.insert(next_id, at);
                next_id += 1;
            }
            for (kind, r) in steps {
                let r = usize::from(r);
                match kind {
                    // New ids, in order.
                    0..=3 => {
                        let at = take_slot(&mut free);
                        ix.insert(next_id, at);
                        model.insert(next_id, at);
                        live.push(next_id);
                        next_id += 1;
                    }
                    // The stream leaves: mostly the oldest, sometimes any.
                    4 | 5 if !live.is_empty() => {
                        let i = if kind == 4 { r % live.len().min(8) } else { r % live.len() };
                        let id = live.swap_remove(i);
                        let at = model.remove(&id);
                        prop_assert_eq!(ix.remove(id), at);
                        free.extend(at);
                        gone.push(id);
                    }
                    // An id that left is not found, whoever has its slot now.
                    6 if !gone.is_empty() => {
                        let id = gone[r % gone.len()];
                        prop_assert_eq!(ix.get(id), None);
                        prop_assert_eq!(ix.remove(id), None);
                    }
                    // A jump ahead of the window.
                    7 if r % 16 == 0 => next_id += (r as u64) * SPAN as u64,
                    _ => {
                        if let Some(&id) = live.get(r % live.len().max(1)) {
                            prop_assert_eq!(ix.get(id), model.get(&id).copied());
                        }
                    }
                }
                prop_assert_eq!(ix.len(), model.len());
            }
            for (id, at) in &model {
                prop_assert_eq!(ix.get(*id), Some(*at));
            }
            for id in &gone {
                prop_assert_eq!(ix.get(*id), None);
            }
        }
    }
}
