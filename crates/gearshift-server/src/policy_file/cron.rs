//! Validation of a `[[schedule]]`'s five-field cron line.

/// The cron fields: name, lowest and highest value.
const CRON_FIELDS: [(&str, u32, u32); 5] = [
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
];

/// Checks a five-field cron line; on error, the byte offset in `line` of
/// the field at fault and what is wrong.
pub(super) fn check_cron(line: &str) -> Result<(), (usize, String)> {
    let mut fields: Vec<(usize, &str)> = Vec::with_capacity(5);
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                fields.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        fields.push((s, &line[s..]));
    }
    if fields.len() != 5 {
        return Err((
            0,
            format!(
                "{:?} has {} field{}; a cron line has 5: minute hour day-of-month month day-of-week",
                line,
                fields.len(),
                if fields.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    for (n, ((offset, field), (name, lo, hi))) in fields.into_iter().zip(CRON_FIELDS).enumerate() {
        check_cron_field(field, lo, hi)
            .map_err(|why| (offset, format!("field {} ({name}) {field:?}: {why}", n + 1)))?;
    }
    Ok(())
}

fn check_cron_field(field: &str, lo: u32, hi: u32) -> Result<(), String> {
    let number = |s: &str| -> Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{s:?} is not a number (use numbers, *, ranges a-b, lists a,b and steps /n)"
            ));
        }
        match s.parse::<u32>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(format!("{s} is out of range {lo}-{hi}")),
        }
    };
    for item in field.split(',') {
        if item.is_empty() {
            return Err("a list has an empty item".into());
        }
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        if let Some(s) = step {
            let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            match s.parse::<u32>() {
                Ok(v) if ok && (1..=hi).contains(&v) => {}
                _ => return Err(format!("step {s:?} is not a number from 1 to {hi}")),
            }
        }
        if range == "*" {
            continue;
        }
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("range {a}-{b} runs backwards"));
                }
            }
            None => {
                number(range)?;
                if step.is_some() {
                    return Err(format!(
                        "a step needs * or a range before it (\"*/n\" or \"a-b/n\"), not {range:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_lines() {
        for ok in [
            "* * * * *",
            "*/5 * * * *",
            "0 3 * * 1-5",
            "0,15,30,45 0-23/2 1,15 1-12 0-7",
            "59 23 31 12 7",
            "  0   0 1 1 0  ",
            "0-30/10 * * */3 *",
        ] {
            assert_eq!(check_cron(ok), Ok(()), "{ok}");
        }
        for bad in [
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 8",
            "*/0 * * * *",
            "5/10 * * * *",
            "1,,2 * * * *",
            "a * * * *",
            "30-10 * * * *",
            "* * * JAN *",
            "-1 * * * *",
            "@daily",
        ] {
            assert!(check_cron(bad).is_err(), "{bad} accepted");
        }
    }
}
