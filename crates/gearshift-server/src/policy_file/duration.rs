//! Durations as the policy file writes them: `"1h30m"`, `"1500ms"`, or
//! whole seconds.

/// Milliseconds in a duration string: numbers with units `d`, `h`, `m`,
/// `s`, `ms`, largest first, each at most once; or digits alone (seconds).
pub(super) fn parse_duration(s: &str) -> Result<u64, String> {
    const UNITS: [(&str, u64); 5] = [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.starts_with('-') {
        return Err("it is negative".into());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1000))
            .ok_or_else(|| "it is too large".into());
    }
    let mut rest = s;
    let mut total: u64 = 0;
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("expected a number at {rest:?}"));
        }
        let (number, after) = rest.split_at(digits);
        let letters = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(letters);
        if unit.is_empty() {
            return Err(match after.chars().next() {
                Some('.') => "fractions are not accepted (1.5s is \"1500ms\")".into(),
                Some(c) => format!("unexpected {c:?} after {number}"),
                None => format!("{number} has no unit"),
            });
        }
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(format!(
                "unknown unit {unit:?} (the units are ms, s, m, h and d)"
            ));
        };
        if index < next_unit {
            return Err("units go from largest to smallest, each once".into());
        }
        next_unit = index + 1;
        total = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(UNITS[index].1))
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| "it is too large".to_owned())?;
        rest = after;
    }
    Ok(total)
}

/// A duration as the file would write it: `"1h30m"`, `"1500ms"`, `"0s"`.
pub(super) fn format_ms(ms: u64) -> String {
    if ms == 0 {
        return "\"0s\"".into();
    }
    let mut out = String::from("\"");
    let mut rest = ms;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = |s: &str| parse_duration(s).expect(s);
        assert_eq!(ok("1500ms"), 1_500);
        assert_eq!(ok("1s"), 1_000);
        assert_eq!(ok("10m"), 600_000);
        assert_eq!(ok("24h"), 86_400_000);
        assert_eq!(ok("30d"), 30 * 86_400_000);
        assert_eq!(ok("1h30m"), 5_400_000);
        assert_eq!(ok("1d2h3m4s5ms"), 93_784_005);
        assert_eq!(ok("0s"), 0);
        assert_eq!(ok("45"), 45_000);
        for bad in [
            "",
            "-5s",
            "1.5s",
            "5x",
            "s",
            "1m1h",
            "1s1s",
            "5 s",
            "1h30",
            "99999999999999999999s",
            "999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(format_ms(5_400_000), "\"1h30m\"");
        assert_eq!(format_ms(1_500), "\"1s500ms\"");
    }
}
