//! RFC 3339 UTC timestamps, as the seed's `Date` and `Heartbeat` fields
//! carry them: written as `2026-11-28T10:00:00.123Z`, read with any offset.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds (the core's format).
pub fn format_ms(ms: i64) -> String {
    gearshift_core::timefmt::rfc3339(u64::try_from(ms).unwrap_or(0))
}

/// Now as RFC 3339 UTC.
pub fn now_text() -> String {
    format_ms(now_ms())
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (a space for `T` too)
/// into Unix milliseconds; `None` for anything else.
pub fn parse_ms(text: &str) -> Option<i64> {
    gearshift_core::timefmt::parse_rfc3339_ms(text.trim())
}

/// How long ago `text` was, at `now_ms`; `None` when it does not parse.
pub fn age(text: &str, now_ms: i64) -> Option<Duration> {
    let then = parse_ms(text)?;
    Some(Duration::from_millis(
        u64::try_from(now_ms.saturating_sub(then)).unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_back() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        let t = 1_795_860_000_123; // 2026-11-28T10:00:00.123Z
        assert_eq!(format_ms(t), "2026-11-28T10:00:00.123Z");
        assert_eq!(parse_ms(&format_ms(t)), Some(t));
        assert_eq!(parse_ms("2026-11-28T10:00:00Z"), Some(t - 123));
        assert_eq!(parse_ms("2026-11-28T11:00:00.123456+01:00"), Some(t));
        assert_eq!(parse_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
    }

    #[test]
    fn refuses_what_is_not_a_timestamp() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-28T09:20:00",
            "2026-11-28T09:20:00.Z",
            "1795860000",
        ] {
            assert_eq!(parse_ms(bad), None, "{bad}");
        }
        assert_eq!(age("junk", now_ms()), None);
        assert_eq!(age(&format_ms(1000), 61_000), Some(Duration::from_secs(60)));
    }
}
