//! Which partition a function lives in, for a cluster whose nodes each own
//! some partitions: a pinned function's partition, else a stable hash of
//! its name modulo the partition count.
//!
//! The hash is part of the stored format: jobs are stored with their
//! partition, and every node of every version must place a function where
//! the others do. It is FNV-1a 64 of the name's bytes, mixed by MurmurHash3's
//! 64-bit finaliser (FNV's low bits depend only on the bytes' low bits),
//! taken modulo the count. Never change it.

use std::collections::BTreeMap;

use bytes::Bytes;

/// The partition count a new cluster gets unless told otherwise.
pub const DEFAULT_PARTITIONS: u32 = 64;

/// How functions map to partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// How many partitions there are (numbered from 0); 0 counts as 1.
    pub count: u32,
    /// Functions placed by hand; a pin at or past `count` is ignored.
    pub pins: BTreeMap<Bytes, u32>,
}

impl Placement {
    /// `count` partitions, nothing pinned.
    pub fn new(count: u32) -> Placement {
        Placement {
            count,
            pins: BTreeMap::new(),
        }
    }

    /// The partition `function` lives in.
    pub fn partition_of(&self, function: &[u8]) -> u32 {
        let count = self.count.max(1);
        match self.pins.get(function) {
            Some(&p) if p < count => p,
            _ => hash_partition(function, count),
        }
    }

    /// Pins `function` to `partition`, or unpins it (None).
    pub fn set_pin(&mut self, function: &[u8], partition: Option<u32>) {
        match partition {
            Some(p) => self.pins.insert(Bytes::copy_from_slice(function), p),
            None => self.pins.remove(function),
        };
    }
}

/// The hashed partition of `function` among `count` (at least 1).
pub fn hash_partition(function: &[u8], count: u32) -> u32 {
    // The remainder is below `count`, so it fits.
    (mix(fnv1a64(function)) % u64::from(count.max(1))) as u32
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// MurmurHash3's `fmix64`: every input bit reaches every output bit.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn placement_is_stable() {
        // Fixed forever (checked against an independent implementation):
        // stored jobs carry these partitions.
        let p = Placement::new(64);
        let got: Vec<u32> = ["", "reverse", "email", "resize_image", "fn-0", "fn-1"]
            .iter()
            .map(|f| p.partition_of(f.as_bytes()))
            .collect();
        assert_eq!(got, STABLE_64);
        assert_eq!(Placement::new(7).partition_of(b"reverse"), STABLE_7_REVERSE);
        assert_eq!(Placement::new(1).partition_of(b"reverse"), 0);
        assert_eq!(Placement::new(0).partition_of(b"reverse"), 0);
    }

    const STABLE_64: [u32; 6] = [38, 11, 25, 19, 11, 25];
    const STABLE_7_REVERSE: u32 = 3;

    #[test]
    fn pins_win_unless_out_of_range() {
        let mut p = Placement::new(64);
        let hashed = p.partition_of(b"hot");
        let pin = (hashed + 1) % 64;
        p.pins.insert(Bytes::from_static(b"hot"), pin);
        p.pins.insert(Bytes::from_static(b"odd"), 64);
        assert_eq!(p.partition_of(b"hot"), pin);
        assert_eq!(p.partition_of(b"odd"), hash_partition(b"odd", 64));
        assert_eq!(p.partition_of(b"hot2"), hash_partition(b"hot2", 64));
    }

    #[test]
    fn names_spread_evenly_over_64_partitions() {
        // 10,000 names of several shapes, including ones that differ only
        // in a byte's high bits ('1' and 'q'): each partition gets within
        // 25% of the mean (156.25), at least.
        let shapes: [fn(u32) -> String; 4] = [
            |i| format!("fn-{i}"),
            |i| format!("resize_image_{i:05}"),
            |i| format!("{i}"),
            |i| {
                let low = if (i / 10) % 2 == 0 { b'0' } else { b'p' };
                format!("job{}{}", char::from(low + (i % 10) as u8), i / 20)
            },
        ];
        let p = Placement::new(64);
        for shape in shapes {
            let mut counts = [0u32; 64];
            for i in 0..10_000 {
                counts[p.partition_of(shape(i).as_bytes()) as usize] += 1;
            }
            let (min, max) = (counts.iter().min(), counts.iter().max());
            assert!(
                min >= Some(&117) && max <= Some(&196),
                "{} .. {}: {counts:?}",
                shape(0),
                shape(1)
            );
        }
    }
}
