//! Gearshift's `stats` option (docs/compat.md): a worker reports what its
//! jobs have cost so far as OPTION_REQ `stats cpu=SECONDS rss=KIB`. An
//! unmodified server answers ERROR UNKNOWN_OPTION, and the worker then stops
//! sending it; nothing else changes on the connection.

use std::fmt::Write;

/// The option's leading word.
pub const STATS_OPTION: &str = "stats";

/// What a worker's jobs cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// CPU time (user + system) of everything its jobs ran, in milliseconds.
    pub cpu_ms: u64,
    /// The largest resident set any of them reached, in KiB.
    pub max_rss_kib: u64,
}

impl WorkerStats {
    /// The OPTION_REQ text (`stats cpu=1.250 rss=2048`), well under
    /// gearmand's 64-byte option buffer.
    ///
    /// ```
    /// use gearshift_proto::worker_stats::WorkerStats;
    /// let s = WorkerStats { cpu_ms: 1250, max_rss_kib: 2048 };
    /// assert_eq!(s.option_text(), "stats cpu=1.250 rss=2048");
    /// ```
    pub fn option_text(&self) -> String {
        let mut out = String::from(STATS_OPTION);
        let _ = write!(
            out,
            " cpu={}.{:03} rss={}",
            self.cpu_ms / 1000,
            self.cpu_ms % 1000,
            self.max_rss_kib
        );
        out
    }

    /// Reads an option: `None` when it is not a `stats` option at all,
    /// `Some(None)` when it is one but malformed. Unknown `key=value`
    /// parts are skipped (room for later figures).
    ///
    /// ```
    /// use gearshift_proto::worker_stats::WorkerStats;
    /// let s = WorkerStats::parse(b"stats cpu=0.5 rss=900 gpu=1").unwrap().unwrap();
    /// assert_eq!((s.cpu_ms, s.max_rss_kib), (500, 900));
    /// assert_eq!(WorkerStats::parse(b"exceptions"), None);
    /// assert_eq!(WorkerStats::parse(b"stats cpu=x"), Some(None));
    /// ```
    pub fn parse(option: &[u8]) -> Option<Option<WorkerStats>> {
        let text = std::str::from_utf8(option).ok()?;
        let mut words = text.split_ascii_whitespace();
        if !words.next()?.eq_ignore_ascii_case(STATS_OPTION) {
            return None;
        }
        let mut out = WorkerStats::default();
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return Some(None);
            };
            match k {
                "cpu" => match seconds_ms(v) {
                    Some(ms) => out.cpu_ms = ms,
                    None => return Some(None),
                },
                "rss" => match v.parse() {
                    Ok(kib) => out.max_rss_kib = kib,
                    Err(_) => return Some(None),
                },
                _ => {}
            }
        }
        Some(Some(out))
    }
}

/// `12.5` seconds as 12500 ms (at most three decimals are read).
fn seconds_ms(v: &str) -> Option<u64> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    if whole.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut ms = 0;
    for (i, b) in frac.bytes().take(3).enumerate() {
        ms += u64::from(b - b'0') * [100, 10, 1][i];
    }
    whole.checked_mul(1000)?.checked_add(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let s = WorkerStats {
            cpu_ms: 61_007,
            max_rss_kib: 123_456,
        };
        let text = s.option_text();
        assert!(text.len() < 64, "{text}");
        assert_eq!(WorkerStats::parse(text.as_bytes()), Some(Some(s)));
        assert_eq!(
            WorkerStats::parse(b"STATS cpu=3"),
            Some(Some(WorkerStats {
                cpu_ms: 3000,
                max_rss_kib: 0
            }))
        );
        assert_eq!(WorkerStats::parse(b"stats cpu=-1"), Some(None));
        assert_eq!(WorkerStats::parse(b"stats cpu=.5"), Some(None));
        assert_eq!(WorkerStats::parse(b"stats rss"), Some(None));
        assert_eq!(WorkerStats::parse(b"statsx"), None);
        assert_eq!(WorkerStats::parse(b"dead-set"), None);
    }
}
