//! Parsing the times and durations the command line takes: `--timeout 30s`
//! and `--at` (Unix seconds, RFC 3339, or `+30s` from now).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A duration: a number with an optional unit `ms`, `s` (the default), `m`,
/// `h` or `d`; decimals allowed (`1.5s`).
///
/// ```text
/// 30  30s  500ms  1.5m  2h  1d
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (try 30s, 500ms, 5m, 2h)"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s, m, h, d)")),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("duration out of range: {s:?}"))
}

/// A duration for `--timeout`: as [`parse_duration`], but not zero.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err("a timeout must be more than zero".into());
    }
    Ok(d)
}

/// `--at`: a Unix time in whole seconds, from `1900000000`,
/// `2026-11-22T10:00:00Z` (RFC 3339, any offset), or `+30s` / `+5m` / `+2h`
/// (from now, rounded up to the next whole second).
pub fn parse_at(s: &str) -> Result<i64, String> {
    parse_at_from(s, SystemTime::now())
}

fn parse_at_from(s: &str, now: SystemTime) -> Result<i64, String> {
    let s = s.trim();
    if let Some(rel) = s.strip_prefix('+') {
        let d = parse_duration(rel)?;
        let at = now
            .checked_add(d)
            .ok_or_else(|| format!("time out of range: {s:?}"))?;
        let since = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the clock is before 1970".to_owned())?;
        let secs = since.as_secs() + u64::from(since.subsec_nanos() > 0);
        return i64::try_from(secs).map_err(|_| format!("time out of range: {s:?}"));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| format!("time out of range: {s:?}"));
    }
    gearshift_core::timefmt::parse_rfc3339(s).ok_or_else(|| {
        format!(
            "not a time: {s:?} (Unix seconds, RFC 3339 like 2026-11-22T10:00:00Z, or +30s/+5m/+2h)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_timeout("0s").is_err());
    }

    #[test]
    fn absolute_times() {
        assert_eq!(parse_at("1900000000"), Ok(1_900_000_000));
        assert_eq!(parse_at("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_at("2026-11-22T10:00:00Z"), Ok(1_795_341_600));
        assert_eq!(parse_at("2026-11-22 11:00:00.250+01:00"), Ok(1_795_341_600));
        assert_eq!(parse_at("2000-02-29T00:00:00-00:30"), Ok(951_784_200));
        assert!(parse_at("2026-02-30T00:00:00Z").is_err());
        assert!(parse_at("2026-11-22T10:00:00").is_err());
        assert!(parse_at("tomorrow").is_err());
    }

    #[test]
    fn relative_times_round_up() {
        let now = UNIX_EPOCH + Duration::from_millis(1_000_500);
        assert_eq!(parse_at_from("+30s", now), Ok(1031));
        assert_eq!(parse_at_from("+2m", now), Ok(1121));
        let whole = UNIX_EPOCH + Duration::from_secs(1000);
        assert_eq!(parse_at_from("+1h", whole), Ok(4600));
        assert!(parse_at_from("+", whole).is_err());
    }
}
