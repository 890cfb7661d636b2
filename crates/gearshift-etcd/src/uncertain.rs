//! Writes of a held job whose reply was lost. Each compared the same
//! revision (a write that did not answer leaves the held one), so at most
//! one of them applied; a later write that finds the revision moved looks
//! for it by key and bytes before it calls the job taken away.

use crate::store::Entry;

/// Most lost writes kept at once; past it they are settled before the
/// next write (a long outage with a chatty worker).
pub const MOST: usize = 32;

/// The lost writes of one held job since its last write that answered.
#[derive(Debug, Default)]
pub struct Uncertain {
    writes: Vec<(String, Vec<u8>)>,
}

impl Uncertain {
    /// Records a write whose reply was lost (once, however often retried).
    pub fn add(&mut self, key: String, bytes: Vec<u8>) {
        if !self.writes.iter().any(|(k, b)| *k == key && *b == bytes) {
            self.writes.push((key, bytes));
        }
    }

    /// As many are kept as allowed.
    pub fn is_full(&self) -> bool {
        self.writes.len() >= MOST
    }

    /// Forgets them: a write answered, so none of them can apply any more.
    pub fn clear(&mut self) {
        self.writes.clear();
    }

    /// The keys to read to settle them, each once.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for (k, _) in &self.writes {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }

    /// The one that applied, given what its key holds now: its entry
    /// (key, revision and bytes).
    pub fn applied<'a>(&self, now: &'a [Entry]) -> Option<&'a Entry> {
        now.iter().find(|e| {
            self.writes
                .iter()
                .any(|(k, b)| *k == e.key && *b == e.value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &[u8], mod_rev: i64) -> Entry {
        Entry {
            key: key.into(),
            value: value.to_vec(),
            mod_rev,
        }
    }

    #[test]
    fn an_earlier_lost_write_that_applied_is_found() {
        // A progress write applied unseen, then an owner write failed: the
        // first is still what etcd holds.
        let mut u = Uncertain::default();
        u.add("/jobs/1".into(), b"step 1/2".to_vec());
        u.add("/jobs/1".into(), b"owner w3".to_vec());
        let now = [entry("/jobs/1", b"step 1/2", 9)];
        assert_eq!(u.applied(&now).map(|e| e.mod_rev), Some(9));
    }

    #[test]
    fn someone_elses_write_is_not_ours() {
        let mut u = Uncertain::default();
        u.add("/jobs/1".into(), b"step 1/2".to_vec());
        let now = [entry("/jobs/1", b"QUEUED by the harvester", 12)];
        assert!(u.applied(&now).is_none());
    }

    #[test]
    fn a_write_that_moved_the_key_is_found_under_its_new_key() {
        let mut u = Uncertain::default();
        u.add("/jobs/finished/1".into(), b"done".to_vec());
        u.add("/jobs/finished/1".into(), b"done".to_vec());
        assert_eq!(u.keys(), vec!["/jobs/finished/1".to_owned()]);
        let now = [entry("/jobs/finished/1", b"done", 4)];
        assert_eq!(u.applied(&now).map(|e| e.mod_rev), Some(4));
    }

    #[test]
    fn retries_of_one_write_are_kept_once_and_the_count_is_bounded() {
        let mut u = Uncertain::default();
        for _ in 0..100 {
            u.add("/jobs/1".into(), b"same".to_vec());
        }
        assert!(!u.is_full());
        for n in 0..MOST {
            u.add("/jobs/1".into(), n.to_string().into_bytes());
        }
        assert!(u.is_full());
        u.clear();
        assert!(u.keys().is_empty());
    }
}
