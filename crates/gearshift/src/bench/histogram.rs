//! Latency recording for `gearshift bench`: a fixed-size, log-linear
//! histogram in the manner of HdrHistogram, with about 1.6 % precision over
//! the whole `u64` range of nanoseconds, cheap to record into (one index
//! computation and an add) and to merge.
//!
//! Values below 128 get a bucket each; above, every power of two is cut
//! into 64 equal buckets. A percentile is reported as the highest value of
//! its bucket, clamped to the exact maximum, so `p50 <= p99 <= max` always
//! holds. Every load task owns one histogram; they are merged at the end.

use std::time::Duration;

/// Bits of linear precision: 2^(SUB_BITS-1) buckets per power of two.
const SUB_BITS: u32 = 7;
/// Values below this have a bucket each.
const LINEAR: u64 = 1 << SUB_BITS;
/// Buckets per power of two above [`LINEAR`].
const HALF: u64 = LINEAR / 2;
/// Number of buckets needed for every `u64`.
const BUCKETS: usize = ((64 - SUB_BITS as usize + 1) << (SUB_BITS - 1)) + HALF as usize;

/// Recorded latencies, in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max: 0,
        }
    }
}

/// The bucket of `v`.
fn index(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let shift = exp - SUB_BITS + 1;
    let sub = v >> shift;
    (((u64::from(shift)) << (SUB_BITS - 1)) + sub) as usize
}

/// The highest value that falls in bucket `i`.
fn highest(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let shift = (i >> (SUB_BITS - 1)) - 1;
    let sub = i - (shift << (SUB_BITS - 1));
    let top = (u128::from(sub + 1) << shift) - 1;
    u64::try_from(top).unwrap_or(u64::MAX)
}

impl Histogram {
    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(index(ns)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(ns);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// The largest value recorded, in nanoseconds (0 when empty).
    pub fn max_ns(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0.0..=1.0) in nanoseconds: the smallest
    /// bucket holding at least `q` of the values; 0 when empty.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        let mut last = 0;
        for v in (0..5000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            assert!(highest(i) >= v, "{v} above its bucket {i}");
            if v < 5000 {
                assert!(i == last || i == last + 1, "gap at {v}");
                last = i;
            }
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn precision_is_within_two_percent() {
        for v in [200u64, 1_000, 33_333, 1_234_567, 987_654_321] {
            let h = highest(index(v));
            assert!(h >= v && (h - v) as f64 / v as f64 <= 0.016, "{v} -> {h}");
        }
    }

    #[test]
    fn quantiles_are_ordered_and_close() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        for us in 1..=1000u64 {
            let h = if us % 2 == 0 { &mut a } else { &mut b };
            h.record(Duration::from_micros(us));
        }
        a.merge(&b);
        assert_eq!(a.len(), 1000);
        let p50 = a.quantile_ns(0.5);
        let p99 = a.quantile_ns(0.99);
        assert!((500_000..=508_000).contains(&p50), "{p50}");
        assert!((990_000..=1_000_000).contains(&p99), "{p99}");
        assert!(p50 <= p99 && p99 <= a.max_ns());
        assert_eq!(a.max_ns(), 1_000_000);
        assert_eq!(a.quantile_ns(1.0), 1_000_000);
        assert_eq!(Histogram::default().quantile_ns(0.5), 0);
    }
}
