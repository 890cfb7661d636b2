//! A set of job sequence numbers `0..capacity`, one bit each, that many
//! tasks can insert into at once: which jobs `submit` queued, and which of
//! them `drain`'s workers ran (a second insert of a number is a duplicate).

use std::sync::atomic::{AtomicU64, Ordering};

/// A fixed-capacity, lock-free bit set.
#[derive(Debug)]
pub struct SeqSet {
    words: Box<[AtomicU64]>,
    capacity: u64,
}

impl SeqSet {
    /// An empty set for `0..capacity`.
    pub fn new(capacity: u64) -> SeqSet {
        let n = usize::try_from(capacity.div_ceil(64)).unwrap_or(usize::MAX);
        SeqSet {
            words: (0..n).map(|_| AtomicU64::new(0)).collect(),
            capacity,
        }
    }

    /// The numbers this set can hold: `0..capacity`.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn slot(&self, seq: u64) -> Option<(&AtomicU64, u64)> {
        if seq >= self.capacity {
            return None;
        }
        let word = self.words.get(usize::try_from(seq / 64).ok()?)?;
        Some((word, 1u64 << (seq % 64)))
    }

    /// Adds `seq`: `Some(true)` if it was new, `Some(false)` if it was
    /// already there, `None` if it is out of range.
    pub fn insert(&self, seq: u64) -> Option<bool> {
        let (word, bit) = self.slot(seq)?;
        Some(word.fetch_or(bit, Ordering::Relaxed) & bit == 0)
    }

    /// Whether `seq` is in the set.
    pub fn contains(&self, seq: u64) -> bool {
        self.slot(seq)
            .is_some_and(|(word, bit)| word.load(Ordering::Relaxed) & bit != 0)
    }

    /// How many numbers are in the set.
    pub fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_and_count() {
        let a = SeqSet::new(130);
        assert_eq!(a.insert(0), Some(true));
        assert_eq!(a.insert(129), Some(true));
        assert_eq!(a.insert(129), Some(false));
        assert_eq!(a.insert(130), None);
        assert!(a.contains(129) && !a.contains(64));
        assert_eq!(a.count(), 2);
        assert_eq!(a.capacity(), 130);
    }
}
