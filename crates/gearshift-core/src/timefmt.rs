//! Unix milliseconds as RFC 3339 UTC text with milliseconds
//! (`2026-11-25T18:49:17.123Z`), for admin listings.

use std::io::Write;

use crate::Millis;

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
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
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
}
