//! The values `serve`'s flags take: sizes, durations, durability modes,
//! store names and log levels, parsed for clap with a clear error.

use std::time::Duration;

use gearshift_store::Durability;
use tracing_subscriber::filter::LevelFilter;

/// An `--idle-timeout`: `0` (never: zero) or a duration as `--node-timeout`.
pub(super) fn parse_idle(s: &str) -> Result<Duration, String> {
    if s == "0" || s == "off" {
        return Ok(Duration::ZERO);
    }
    parse_timeout(s)
}

/// A `--node-timeout`: a duration as `--timeout` takes (`5s`, `1500ms`;
/// `crate::when`), at least 200 ms.
pub(super) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = crate::when::parse_duration(s)?;
    if d < Duration::from_millis(200) {
        return Err(format!("{s:?} is too short: at least 200ms"));
    }
    Ok(d)
}

pub(super) fn parse_size(s: &str) -> Result<usize, String> {
    let v = parse_bytes(s)?;
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0 && v <= u32::MAX as usize)
        .ok_or_else(|| format!("size {s:?} must be between 1 byte and 4 GiB (the wire limit)"))
}

/// A byte count with an optional K, M, G or T suffix (powers of 1024).
pub(super) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = digits.parse().map_err(|_| format!("not a size: {s:?}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

pub(super) fn parse_durability(s: &str) -> Result<Durability, String> {
    if s == "fsync" {
        return Ok(Durability::Fsync);
    }
    let ms = s
        .strip_prefix("interval=")
        .and_then(|v| v.trim_end_matches("ms").parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .ok_or_else(|| {
            format!("durability must be `fsync` or `interval=<ms>` (ms > 0), not {s:?}")
        })?;
    Ok(Durability::Interval(Duration::from_millis(ms)))
}

/// A durability as `--durability` takes it (`fsync`, `interval=5ms`), for
/// the start-up log: the operator's word, not the type's name.
pub(super) fn durability_word(d: &Durability) -> String {
    match d {
        Durability::Fsync => "fsync".to_owned(),
        Durability::Interval(every) => format!("interval={}ms", every.as_millis()),
    }
}

/// Whether `--store` names a PostgreSQL database.
pub(crate) fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// `log`, `memory` or a PostgreSQL URL.
pub(crate) fn parse_store(s: &str) -> Result<String, String> {
    if s == "log" || s == "memory" || is_postgres_url(s) {
        Ok(s.to_owned())
    } else {
        Err("expected `log`, `memory` or a `postgres://` URL".to_owned())
    }
}

pub(super) fn level(name: &str) -> Result<LevelFilter, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "FATAL" | "ALERT" | "CRITICAL" | "ERROR" => LevelFilter::ERROR,
        "WARNING" | "WARN" => LevelFilter::WARN,
        "NOTICE" | "INFO" => LevelFilter::INFO,
        "DEBUG" => LevelFilter::DEBUG,
        "TRACE" => LevelFilter::TRACE,
        other => return Err(format!("unknown log level {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_is_logged_as_the_flag_takes_it() {
        for word in ["fsync", "interval=5ms", "interval=250ms"] {
            let d = parse_durability(word).expect("a durability");
            assert_eq!(durability_word(&d), word);
        }
        // Given without the unit, it is logged with it (and parses back).
        let d = parse_durability("interval=7").expect("a durability");
        assert_eq!(durability_word(&d), "interval=7ms");
        assert_eq!(parse_durability(&durability_word(&d)), Ok(d));
    }
}
