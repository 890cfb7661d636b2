//! Unix milliseconds as RFC 3339 UTC text with milliseconds
//! (`2026-11-25T18:49:17.123Z`), for admin listings; and RFC 3339 text read
//! back as Unix seconds (the CLI's `--at`, the HTTP API's `at`).

use std::io::Write;

/// Unix milliseconds.
type Millis = u64;

/// Appends `ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn write_rfc3339(out: &mut Vec<u8>, ms: Millis) {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    );
}

/// `ms` as RFC 3339 text.
pub fn rfc3339(ms: Millis) -> String {
    let mut out = Vec::with_capacity(24);
    write_rfc3339(&mut out, ms);
    String::from_utf8_lossy(&out).into_owned()
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (a space may replace the `T`);
/// fractions are dropped. Unix seconds; `None` for anything else.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    parse_rfc3339_ms(s).map(|ms| ms.div_euclid(1000))
}

/// As [`parse_rfc3339`], in Unix milliseconds (a fraction's first three
/// digits kept).
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = s.get(from..to)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let mut rest = &s[19..];
    let mut milli = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        milli = format!("{:0<3}", &frac[..digits.min(3)]).parse().ok()?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let r = rest.as_bytes();
            if r.len() != 6 || r[3] != b':' {
                return None;
            }
            let sign = match r[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hh: i64 = rest.get(1..3)?.parse().ok()?;
            let mm: i64 = rest.get(4..6)?.parse().ok()?;
            if hh > 23 || mm > 59 {
                return None;
            }
            sign * (hh * 3600 + mm * 60)
        }
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset) * 1000 + milli)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_632_557_123), "2026-11-25T18:49:17.123Z");
        assert_eq!(rfc3339(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn parses_what_it_writes_and_refuses_the_rest() {
        for ms in [0, 951_782_400_000, 1_795_632_557_123, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some((ms / 1000) as i64));
        }
        assert_eq!(
            parse_rfc3339("2026-11-22 11:00:00+01:00"),
            Some(1_795_341_600)
        );
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-22T10:00:00",
            "2026-11-22T24:00:00Z",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
