//! Identifiers the core hands out or receives, and a cheap hasher for maps
//! keyed by them.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A connection, numbered by the server (never reused while the core runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A job: the number at the end of its handle. Never reused.
pub type JobId = u64;

/// Index of a function in the core's function table.
pub type FuncId = usize;

/// Hashes one integer key with a multiply; ids are dense counters, so this
/// spreads them well and costs far less than SipHash on the hot path.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by job or connection numbers.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// A set of job or connection numbers.
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;
