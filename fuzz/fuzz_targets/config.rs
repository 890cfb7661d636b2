//! Any text as a policy file: `parse` never panics; a refusal names a line
//! and column inside the text; an accepted file holds only what its rules
//! allow (attempts at least one, delays in order, distinct patterns that
//! each match their own text, schedules with a valid cron line, a usable
//! function name, a short unique id and a known priority).
#![no_main]

use gearshift_core::cron::Cron;
use gearshift_core::policy::glob_match;
use gearshift_core::Millis;
use gearshift_server::policy_file::{parse, PolicyFileError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse(&text) {
        Ok(file) => check_accepted(&file),
        Err(e) => check_refusal(&text, &e),
    }
});

fn check_refusal(text: &str, e: &PolicyFileError) {
    let PolicyFileError::Invalid {
        line,
        column,
        message,
        ..
    } = e
    else {
        panic!("a refusal without a place: {e}");
    };
    assert!(!message.trim().is_empty(), "{e}");
    // The place is counted in the text without its byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        *line >= 1 && *line <= lines.len(),
        "{e} ({} lines)",
        lines.len()
    );
    let width = lines[*line - 1].chars().count();
    assert!(
        *column >= 1 && *column <= width + 1,
        "{e} (line is {width} wide)"
    );
}

fn check_accepted(file: &gearshift_server::policy_file::PolicyFile) {
    let rules = &file.policies.rules;
    for (i, rule) in rules.iter().enumerate() {
        let p = &rule.policy;
        assert!(p.max_attempts >= 1, "{rule:?}");
        assert!(p.initial_delay <= p.max_delay, "{rule:?}");
        // Every retry waits no longer than the longest delay.
        for retry in [1, 2, 7, 63, 64, u32::MAX] {
            assert!(p.delay(i as u64, retry) <= p.max_delay, "{rule:?}");
        }
        let pattern = rule.pattern.as_bytes();
        assert!(glob_match(pattern, pattern), "{rule:?}");
        assert!(
            rules[..i].iter().all(|r| r.pattern != rule.pattern),
            "two rules for {:?}",
            rule.pattern
        );
    }
    for s in &file.schedules {
        let cron = Cron::parse_line(&s.cron);
        assert!(cron.is_ok(), "{s:?}: {cron:?}");
        if let Ok(cron) = cron {
            // A firing is on a whole minute, after the time asked about.
            let after: Millis = 1_700_000_000_123;
            if let Some(next) = cron.next_after(after) {
                assert!(next > after && next % 60_000 == 0, "{s:?}: {next}");
            }
        }
        assert!(!s.function.is_empty(), "{s:?}");
        // TAB is allowed: Perl's prefixed names carry one.
        assert!(
            !s.function.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f),
            "{s:?}"
        );
        if let Some(u) = &s.unique {
            assert!(u.len() <= 64 && !u.contains('\0'), "{s:?}");
        }
        assert!(
            ["high", "normal", "low"].contains(&s.priority.as_str()),
            "{s:?}"
        );
    }
}
