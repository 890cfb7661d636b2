//! The policy file: per-function job policies, retention limits and
//! scheduled submissions, in TOML. [`parse`] reads the text, [`load`] a file;
//! every error names the line and column it is about and says what is wrong.
//!
//! ```toml
//! [retention]                 # optional, once
//! dead_ttl = "30d"            # how long a dead job is kept (default 30d)
//! max_kept = 100000           # most finished jobs kept queryable (default 100000)
//! max_dead = 100000           # most dead jobs kept (default 100000)
//! max_kept_bytes = 268435456  # most bytes of kept results and records (default 256 MiB)
//!
//! [[function]]                # any number; the first whose `match` fits wins
//! match = "resize_*"          # required: a glob, `*` any run of bytes, `?` one byte
//! max_attempts = 5            # runs in all, the first included, >= 1 (default 1: no retry)
//! retry_on = ["fail", "exception", "timeout", "worker_lost"]
//!                             # endings that are retried (default fail, exception, timeout)
//! backoff = "exponential"     # or "fixed": delay x2 per retry, or always initial_delay
//! initial_delay = "1s"        # delay before the first retry (default 1s)
//! max_delay = "10m"           # longest delay, >= initial_delay (default 10m)
//! jitter = true               # spread each delay over ±25 % (default true)
//! timeout = "30s"             # run time limit the server enforces (default none)
//! keep_results = "24h"        # how long a finished job stays queryable (default 0s)
//! require_worker = false      # refuse submissions while no worker can run it
//! can_do_timeout_unit = "auto" # how CAN_DO_TIMEOUT is read: "auto" (< 1000 is
//!                             # seconds), "seconds" or "milliseconds" (default auto)
//!
//! [[schedule]]                # any number: a job submitted on a cron schedule
//! cron = "*/5 * * * *"        # required: minute hour day-of-month month day-of-week
//! function = "resize_thumbs"  # required
//! workload = "all"            # required (may be "")
//! unique = "thumbs"           # optional unique id, at most 64 bytes
//! priority = "normal"         # "high", "normal" or "low" (default normal)
//! ```
//!
//! Durations are strings of numbers with units `ms`, `s`, `m`, `h`, `d`,
//! largest first (`"1500ms"`, `"10m"`, `"1h30m"`), or a bare whole number
//! of seconds (`30` or `"30"`). Cron fields are made of `*`, numbers, `,`,
//! `-` and `/` (`*/5`, `1-5`, `0-30/10`, `1,15`) within minute 0-59, hour
//! 0-23, day of month 1-31, month 1-12, day of week 0-7 (0 and 7 are
//! Sunday). Unknown keys and sections are errors, as are two `[[function]]`
//! sections with the same `match` (the second could never apply).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gearshift_core::policy::{
    Backoff, Policies, Policy, Reason, Reasons, Retention, Rule, TimeoutUnit,
};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// Longest unique id a submission may carry (gearmand's 64 bytes).
const MAX_UNIQUE: usize = gearshift_core::config::MAX_UNIQUE;

/// Everything a policy file declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFile {
    /// The `[[function]]` rules, in file order, and `[retention]`.
    pub policies: Policies,
    /// The `[[schedule]]` sections, in file order.
    pub schedules: Vec<ScheduleDecl>,
}

/// One `[[schedule]]` section: a job to submit on a cron schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleDecl {
    /// Five checked cron fields: minute hour day-of-month month day-of-week.
    pub cron: String,
    /// The function to submit to (non-empty, no control characters).
    pub function: String,
    /// The job's workload.
    pub workload: String,
    /// The job's unique id, if any (at most 64 bytes, no NUL).
    pub unique: Option<String>,
    /// `"high"`, `"normal"` or `"low"`.
    pub priority: String,
}

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    /// The file could not be read.
    #[error("cannot read policy file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not TOML, or breaks a rule of the format.
    #[error("policy file{} line {line}, column {column}: {message}", in_file(.path))]
    Invalid {
        /// The file, when read by [`load`].
        path: Option<PathBuf>,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// An error the TOML reader could not place in the text.
    #[error("policy file{}: {message}", in_file(.path))]
    Unplaced {
        /// The file, when read by [`load`].
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
    },
}

fn in_file(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" {}", p.display()),
        None => String::new(),
    }
}

impl PolicyFileError {
    fn in_path(self, file: &Path) -> PolicyFileError {
        match self {
            PolicyFileError::Invalid {
                line,
                column,
                message,
                ..
            } => PolicyFileError::Invalid {
                path: Some(file.to_owned()),
                line,
                column,
                message,
            },
            PolicyFileError::Unplaced { message, .. } => PolicyFileError::Unplaced {
                path: Some(file.to_owned()),
                message,
            },
            other => other,
        }
    }
}

/// Reads a policy file. Errors name the line (and column) and say what is wrong.
pub fn parse(text: &str) -> Result<PolicyFile, PolicyFileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let message = toml_message(text, &e);
        match e.span() {
            Some(span) => invalid(text, span.start, message),
            None => PolicyFileError::Unplaced {
                path: None,
                message,
            },
        }
    })?;
    raw.build(text)
        .map_err(|bad| invalid(text, bad.at, bad.message))
}

/// Reads the policy file at `path`; errors name the file.
pub fn load(path: &Path) -> Result<PolicyFile, PolicyFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|e| e.in_path(path))
}

/// The TOML reader's message, in the file's terms.
fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end();
    // `[function]` instead of `[[function]]`: say so.
    let line = e
        .span()
        .and_then(|s| text.get(s.start..))
        .and_then(|rest| rest.lines().next())
        .unwrap_or("")
        .trim_start();
    let single = line.strip_prefix('[').filter(|l| !l.starts_with('['));
    if let (Some(name), true) = (single, message.contains("expected a sequence")) {
        for section in ["function", "schedule"] {
            if name.trim_start().starts_with(section) {
                return format!(
                    "write `[[{section}]]`, not `[{section}]`: each such section is one entry of a list"
                );
            }
        }
    }
    message
        .replace("struct RawFunction", "a [[function]] table")
        .replace("struct RawSchedule", "a [[schedule]] table")
        .replace("struct RawRetention", "the [retention] table")
        .replace("struct RawFile", "a table")
}

fn invalid(text: &str, at: usize, message: String) -> PolicyFileError {
    let (line, column) = line_column(text, at);
    PolicyFileError::Invalid {
        path: None,
        line,
        column,
        message,
    }
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// A rule broken at byte `at` of the text.
struct Bad {
    at: usize,
    message: String,
}

fn bad<T>(at: usize, message: impl Into<String>) -> Result<T, Bad> {
    Err(Bad {
        at,
        message: message.into(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    retention: Option<RawRetention>,
    #[serde(default)]
    function: Vec<RawFunction>,
    #[serde(default)]
    schedule: Vec<RawSchedule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    dead_ttl: Option<Spanned<RawDuration>>,
    max_kept: Option<Spanned<Whole>>,
    max_dead: Option<Spanned<Whole>>,
    max_kept_bytes: Option<Spanned<Whole>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFunction {
    #[serde(rename = "match")]
    pattern: Spanned<String>,
    max_attempts: Option<Spanned<Whole>>,
    retry_on: Option<Vec<Spanned<String>>>,
    backoff: Option<Spanned<String>>,
    initial_delay: Option<Spanned<RawDuration>>,
    max_delay: Option<Spanned<RawDuration>>,
    jitter: Option<bool>,
    timeout: Option<Spanned<RawDuration>>,
    keep_results: Option<Spanned<RawDuration>>,
    require_worker: Option<bool>,
    can_do_timeout_unit: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    cron: Spanned<String>,
    function: Spanned<String>,
    workload: String,
    unique: Option<Spanned<String>>,
    priority: Option<Spanned<String>>,
}

/// A TOML integer, checked for range after reading.
struct Whole(i64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Whole;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Whole, E> {
                Ok(Whole(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Whole, E> {
                Ok(Whole(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration as written: a string with units, or whole seconds.
enum RawDuration {
    Text(String),
    Seconds(i64),
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"30s\" or \"1h30m\", or whole seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawDuration, E> {
                Ok(RawDuration::Text(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawDuration, E> {
                Ok(RawDuration::Seconds(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawDuration, E> {
                Ok(RawDuration::Seconds(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}

impl RawFile {
    fn build(self, text: &str) -> Result<PolicyFile, Bad> {
        let mut retention = Retention::default();
        if let Some(r) = self.retention {
            if let Some(v) = &r.dead_ttl {
                retention.dead_ttl = duration("dead_ttl", v)?;
            }
            if let Some(v) = &r.max_kept {
                retention.max_kept = count("max_kept", v)?;
            }
            if let Some(v) = &r.max_dead {
                retention.max_dead = count("max_dead", v)?;
            }
            if let Some(v) = &r.max_kept_bytes {
                retention.max_kept_bytes = count("max_kept_bytes", v)?;
            }
        }
        let mut rules: Vec<(Rule, usize)> = Vec::with_capacity(self.function.len());
        for f in self.function {
            let at = f.pattern.span().start;
            let rule = f.build()?;
            if let Some((_, first)) = rules.iter().find(|(r, _)| r.pattern == rule.pattern) {
                let (line, _) = line_column(text, *first);
                return bad(
                    at,
                    format!(
                        "`match = {:?}` is already the pattern of line {line}: \
                         the first match wins, so this section would never apply",
                        rule.pattern
                    ),
                );
            }
            rules.push((rule, at));
        }
        let schedules = self
            .schedule
            .into_iter()
            .map(|s| s.build(text))
            .collect::<Result<_, _>>()?;
        Ok(PolicyFile {
            policies: Policies {
                rules: rules.into_iter().map(|(r, _)| r).collect(),
                retention,
            },
            schedules,
        })
    }
}

impl RawFunction {
    fn build(self) -> Result<Rule, Bad> {
        let pattern = self.pattern.get_ref();
        let at = self.pattern.span().start;
        if pattern.is_empty() {
            return bad(at, "`match` is empty; use \"*\" to match every function");
        }
        if let Some(b) = pattern.bytes().find(|b| b.is_ascii_control()) {
            return bad(
                at,
                format!("`match` contains a control character (byte 0x{b:02x})"),
            );
        }
        let mut p = Policy::default();
        if let Some(v) = &self.max_attempts {
            let n = v.get_ref().0;
            if n < 1 {
                return bad(
                    v.span().start,
                    format!("`max_attempts` is {n}; it counts runs, the first included, so it must be at least 1"),
                );
            }
            p.max_attempts = u32::try_from(n).map_err(|_| Bad {
                at: v.span().start,
                message: format!("`max_attempts` is {n}, more than {}", u32::MAX),
            })?;
        }
        if let Some(words) = &self.retry_on {
            let mut reasons = Vec::with_capacity(words.len());
            for w in words {
                match Reason::from_word(w.get_ref()) {
                    Some(r) => reasons.push(r),
                    None => {
                        return bad(
                            w.span().start,
                            format!(
                                "`retry_on`: unknown reason {:?}, expected \"fail\", \
                                 \"exception\", \"timeout\" or \"worker_lost\"",
                                w.get_ref()
                            ),
                        )
                    }
                }
            }
            p.retry_on = Reasons::of(&reasons);
        }
        if let Some(v) = &self.backoff {
            p.backoff = word(
                "backoff",
                v,
                &[
                    ("exponential", Backoff::Exponential),
                    ("fixed", Backoff::Fixed),
                ],
            )?;
        }
        if let Some(v) = &self.initial_delay {
            p.initial_delay = duration("initial_delay", v)?;
        }
        if let Some(v) = &self.max_delay {
            p.max_delay = duration("max_delay", v)?;
        }
        if p.max_delay < p.initial_delay {
            let (at, max) = match (&self.max_delay, &self.initial_delay) {
                (Some(m), _) => (m.span().start, format_ms(p.max_delay)),
                (None, Some(i)) => (
                    i.span().start,
                    format!("{} (the default)", format_ms(p.max_delay)),
                ),
                (None, None) => (at, format_ms(p.max_delay)),
            };
            return bad(
                at,
                format!(
                    "`max_delay` {max} is less than `initial_delay` {}",
                    format_ms(p.initial_delay)
                ),
            );
        }
        if let Some(j) = self.jitter {
            p.jitter = j;
        }
        if let Some(v) = &self.timeout {
            let ms = duration("timeout", v)?;
            if ms == 0 {
                return bad(
                    v.span().start,
                    "`timeout` is 0; leave the key out for no limit",
                );
            }
            p.timeout = Some(ms);
        }
        if let Some(v) = &self.keep_results {
            p.keep_results = duration("keep_results", v)?;
        }
        if let Some(r) = self.require_worker {
            p.require_worker = r;
        }
        if let Some(v) = &self.can_do_timeout_unit {
            p.timeout_unit = word(
                "can_do_timeout_unit",
                v,
                &[
                    ("auto", TimeoutUnit::Auto),
                    ("seconds", TimeoutUnit::Seconds),
                    ("milliseconds", TimeoutUnit::Milliseconds),
                ],
            )?;
        }
        Ok(Rule {
            pattern: pattern.clone(),
            policy: Arc::new(p),
        })
    }
}

impl RawSchedule {
    fn build(self, text: &str) -> Result<ScheduleDecl, Bad> {
        let cron = self.cron.get_ref();
        if let Err((offset, message)) = check_cron(cron) {
            // Point into the string when it is written as it reads.
            let span = self.cron.span();
            let quoted = text.get(span.clone()).is_some_and(|raw| {
                raw.len() == cron.len() + 2 && raw.get(1..raw.len() - 1) == Some(cron.as_str())
            });
            let at = if quoted {
                span.start + 1 + offset
            } else {
                span.start
            };
            return bad(at, format!("`cron`: {message}"));
        }
        let function = self.function.get_ref();
        if function.is_empty() {
            return bad(self.function.span().start, "`function` is empty");
        }
        if let Some(b) = function.bytes().find(|b| b.is_ascii_control()) {
            return bad(
                self.function.span().start,
                format!("`function` contains a control character (byte 0x{b:02x})"),
            );
        }
        if let Some(u) = &self.unique {
            if u.get_ref().len() > MAX_UNIQUE {
                return bad(
                    u.span().start,
                    format!(
                        "`unique` is {} bytes long, more than {MAX_UNIQUE}",
                        u.get_ref().len()
                    ),
                );
            }
            if u.get_ref().contains('\0') {
                return bad(u.span().start, "`unique` contains a NUL byte");
            }
        }
        let priority = match &self.priority {
            Some(v) => word(
                "priority",
                v,
                &[("high", "high"), ("normal", "normal"), ("low", "low")],
            )?,
            None => "normal",
        };
        Ok(ScheduleDecl {
            cron: cron.clone(),
            function: function.clone(),
            workload: self.workload,
            unique: self.unique.map(Spanned::into_inner),
            priority: priority.to_owned(),
        })
    }
}

/// The value one of `choices` names.
fn word<T: Copy>(key: &str, v: &Spanned<String>, choices: &[(&str, T)]) -> Result<T, Bad> {
    if let Some((_, t)) = choices.iter().find(|(w, _)| w == v.get_ref()) {
        return Ok(*t);
    }
    let names: Vec<String> = choices.iter().map(|(w, _)| format!("{w:?}")).collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    bad(
        v.span().start,
        format!("`{key}` is {:?}, expected {expected}", v.get_ref()),
    )
}

fn count(key: &str, v: &Spanned<Whole>) -> Result<usize, Bad> {
    let n = v.get_ref().0;
    usize::try_from(n).map_err(|_| Bad {
        at: v.span().start,
        message: format!("`{key}` is {n}; it must be 0 or more"),
    })
}

fn duration(key: &str, v: &Spanned<RawDuration>) -> Result<u64, Bad> {
    let parsed = match v.get_ref() {
        RawDuration::Seconds(n) if *n < 0 => Err("it is negative".to_owned()),
        RawDuration::Seconds(n) => (*n as u64)
            .checked_mul(1000)
            .ok_or_else(|| "it is too large".to_owned()),
        RawDuration::Text(s) => parse_duration(s),
    };
    parsed.map_err(|why| {
        let shown = match v.get_ref() {
            RawDuration::Seconds(n) => n.to_string(),
            RawDuration::Text(s) => format!("{s:?}"),
        };
        Bad {
            at: v.span().start,
            message: format!(
                "`{key}` = {shown} is not a duration: {why}; write e.g. \
                 \"1500ms\", \"30s\", \"10m\", \"1h30m\", \"7d\", or whole seconds"
            ),
        }
    })
}

/// Milliseconds in a duration string: numbers with units `d`, `h`, `m`,
/// `s`, `ms`, largest first, each at most once; or digits alone (seconds).
fn parse_duration(s: &str) -> Result<u64, String> {
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
fn format_ms(ms: u64) -> String {
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
fn check_cron(line: &str) -> Result<(), (usize, String)> {
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

    /// The line, column and message of a refused text.
    fn refused(text: &str) -> (usize, usize, String) {
        match parse(text) {
            Err(PolicyFileError::Invalid {
                line,
                column,
                message,
                ..
            }) => (line, column, message),
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    fn only_policy(text: &str) -> Policy {
        let file = parse(text).expect("parses");
        assert_eq!(file.policies.rules.len(), 1);
        (*file.policies.rules[0].policy).clone()
    }

    const FULL: &str = r#"# a comment
[retention]
dead_ttl = "7d"
max_kept = 5000
max_dead = 200
max_kept_bytes = 1048576

[[function]]
match = "resize_*"
max_attempts = 5
retry_on = ["fail", "exception", "timeout", "worker_lost"]
backoff = "fixed"
initial_delay = "1500ms"
max_delay = "1h30m"
jitter = false
timeout = "30s"
keep_results = "24h"
require_worker = true
can_do_timeout_unit = "milliseconds"

[[function]]
match = "mail_?"
retry_on = ["worker_lost", "worker_lost"]
timeout = 90
can_do_timeout_unit = "seconds"

[[schedule]]
cron = "*/5 * * * *"
function = "resize_thumbs"
workload = "all"
unique = "thumbs"
priority = "high"
"#;

    #[test]
    fn full_example() {
        let file = parse(FULL).expect("parses");
        let resize = Policy {
            max_attempts: 5,
            retry_on: Reasons::ALL,
            backoff: Backoff::Fixed,
            initial_delay: 1_500,
            max_delay: 5_400_000,
            jitter: false,
            timeout: Some(30_000),
            keep_results: 86_400_000,
            require_worker: true,
            timeout_unit: TimeoutUnit::Milliseconds,
        };
        let mail = Policy {
            retry_on: Reasons::of(&[Reason::WorkerLost]),
            timeout: Some(90_000),
            timeout_unit: TimeoutUnit::Seconds,
            ..Policy::default()
        };
        let expected = PolicyFile {
            policies: Policies {
                rules: vec![
                    Rule {
                        pattern: "resize_*".into(),
                        policy: Arc::new(resize),
                    },
                    Rule {
                        pattern: "mail_?".into(),
                        policy: Arc::new(mail),
                    },
                ],
                retention: Retention {
                    dead_ttl: 7 * 86_400_000,
                    max_kept: 5000,
                    max_dead: 200,
                    max_kept_bytes: 1 << 20,
                },
            },
            schedules: vec![ScheduleDecl {
                cron: "*/5 * * * *".into(),
                function: "resize_thumbs".into(),
                workload: "all".into(),
                unique: Some("thumbs".into()),
                priority: "high".into(),
            }],
        };
        assert_eq!(file, expected);
    }

    #[test]
    fn defaults() {
        assert_eq!(parse("").expect("empty parses"), PolicyFile::default());
        assert_eq!(
            parse("# nothing but a comment\n\n[retention]\n")
                .expect("parses")
                .policies
                .retention,
            Retention::default()
        );
        assert_eq!(
            only_policy("[[function]]\nmatch = \"*\"\n"),
            Policy::default()
        );
        let d = Policy::default();
        assert_eq!(d.max_attempts, 1);
        assert_eq!(
            d.retry_on,
            Reasons::of(&[Reason::Fail, Reason::Exception, Reason::Timeout])
        );
        assert_eq!((d.initial_delay, d.max_delay), (1_000, 600_000));
        assert_eq!(Retention::default().dead_ttl, 30 * 86_400_000);
        let s = parse("[[schedule]]\ncron = \"0 3 * * 7\"\nfunction = \"f\"\nworkload = \"\"\n")
            .expect("parses")
            .schedules;
        assert_eq!(
            s,
            vec![ScheduleDecl {
                cron: "0 3 * * 7".into(),
                function: "f".into(),
                workload: String::new(),
                unique: None,
                priority: "normal".into(),
            }]
        );
        // An empty retry_on retries nothing.
        let p = only_policy("[[function]]\nmatch = \"x\"\nretry_on = []\nmax_attempts = 3\n");
        assert_eq!(p.retry_on, Reasons::default());
    }

    #[test]
    fn first_match_order_is_kept() {
        let text = "[[function]]\nmatch = \"img_fast*\"\nmax_attempts = 2\n\n\
                    [[function]]\nmatch = \"img_*\"\nmax_attempts = 9\n\n\
                    [[function]]\nmatch = \"*\"\nmax_attempts = 4\n";
        let p = parse(text).expect("parses").policies;
        let patterns: Vec<_> = p.rules.iter().map(|r| r.pattern.as_str()).collect();
        assert_eq!(patterns, ["img_fast*", "img_*", "*"]);
        let attempts = |name: &str| p.lookup(name.as_bytes()).map(|p| p.max_attempts);
        assert_eq!(attempts("img_fast_png"), Some(2));
        assert_eq!(attempts("img_png"), Some(9));
        assert_eq!(attempts("mail"), Some(4));
    }

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
        let p = only_policy("[[function]]\nmatch = \"x\"\ntimeout = 7\nkeep_results = \"7\"\n");
        assert_eq!((p.timeout, p.keep_results), (Some(7_000), 7_000));
        assert_eq!(format_ms(5_400_000), "\"1h30m\"");
        assert_eq!(format_ms(1_500), "\"1s500ms\"");
    }

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

    #[test]
    fn unknown_key_names_its_line() {
        let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\n\n\n\n\nmax_atempts = 3\n");
        assert_eq!((line, column), (7, 1));
        assert!(msg.contains("unknown field `max_atempts`"), "{msg}");
        assert!(msg.contains("max_attempts"), "{msg}");
        let (line, _, msg) = refused("[retention]\nmax_kept = 1\nkeep = 2\n");
        assert_eq!(line, 3);
        assert!(msg.contains("`keep`"), "{msg}");
        let (line, _, msg) = refused("\n[retension]\ndead_ttl = \"1d\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("`retension`"), "{msg}");
        let (line, _, msg) = refused("[[schedule]]\ncron = \"* * * * *\"\nfunction = \"f\"\nworkload = \"\"\nprio = \"high\"\n");
        assert_eq!(line, 5);
        assert!(msg.contains("`prio`"), "{msg}");
    }

    #[test]
    fn the_full_message_reads_well() {
        let e = parse("[[function]]\nmatch = \"a\"\nmax_atempts = 3\n").expect_err("refused");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "policy file line 3, column 1: unknown field `max_atempts`, expected one of"
            ),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn bad_duration_names_key_and_line() {
        let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\ninitial_delay = \"1x\"\n");
        assert_eq!((line, column), (3, 17));
        assert!(msg.contains("`initial_delay`"), "{msg}");
        assert!(msg.contains("unknown unit"), "{msg}");
        let (line, _, msg) = refused("[retention]\n\ndead_ttl = \"-3d\"\n");
        assert_eq!(line, 3);
        assert!(
            msg.contains("`dead_ttl`") && msg.contains("negative"),
            "{msg}"
        );
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\ntimeout = -4\n");
        assert_eq!(line, 3);
        assert!(
            msg.contains("`timeout`") && msg.contains("negative"),
            "{msg}"
        );
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\nkeep_results = 1.5\n");
        assert_eq!(line, 4);
        assert!(msg.contains("expected a duration"), "{msg}");
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\ntimeout = \"0s\"\n");
        assert_eq!(line, 3);
        assert!(msg.contains("`timeout` is 0"), "{msg}");
    }

    #[test]
    fn bad_retry_word_names_its_line() {
        let (line, column, msg) = refused(
            "[[function]]\nmatch = \"a\"\nretry_on = [\n  \"fail\",\n  \"worker_gone\",\n]\n",
        );
        assert_eq!((line, column), (5, 3));
        assert!(
            msg.contains("\"worker_gone\"") && msg.contains("worker_lost"),
            "{msg}"
        );
    }

    #[test]
    fn max_attempts_zero_names_its_line() {
        let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = 0\n");
        assert_eq!((line, column), (3, 16));
        assert!(msg.contains("at least 1"), "{msg}");
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = \"5\"\n");
        assert_eq!(line, 3);
        assert!(msg.contains("expected a whole number"), "{msg}");
        let (line, _, _) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = 4294967296\n");
        assert_eq!(line, 3);
        let (line, _, msg) = refused("[retention]\nmax_dead = -1\n");
        assert_eq!(line, 2);
        assert!(msg.contains("`max_dead`"), "{msg}");
    }

    #[test]
    fn max_delay_below_initial_delay() {
        let (line, _, msg) =
            refused("[[function]]\nmatch = \"a\"\ninitial_delay = \"2m\"\nmax_delay = \"1m\"\n");
        assert_eq!(line, 4);
        assert!(
            msg.contains("`max_delay` \"1m\" is less than `initial_delay` \"2m\""),
            "{msg}"
        );
        // Against the default max_delay: the line of initial_delay.
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\ninitial_delay = \"1h\"\n");
        assert_eq!(line, 4);
        assert!(msg.contains("\"10m\" (the default)"), "{msg}");
        // Equal is fine.
        let p = only_policy("[[function]]\nmatch = \"a\"\ninitial_delay = 5\nmax_delay = \"5s\"\n");
        assert_eq!((p.initial_delay, p.max_delay), (5_000, 5_000));
    }

    #[test]
    fn bad_cron_names_line_and_field() {
        let text = "[[schedule]]\nfunction = \"f\"\nworkload = \"w\"\ncron = \"0 24 * * *\"\n";
        let (line, column, msg) = refused(text);
        assert_eq!((line, column), (4, 11));
        assert!(
            msg.contains("field 2 (hour)") && msg.contains("0-23"),
            "{msg}"
        );
        let (line, column, msg) =
            refused("[[schedule]]\ncron = \"* * *\"\nfunction = \"f\"\nworkload = \"w\"\n");
        assert_eq!((line, column), (2, 9));
        assert!(msg.contains("5"), "{msg}");
        // A string written with escapes: the value's start.
        let (line, column, _) = refused(
            "[[schedule]]\ncron = \"\\u0030 * * * 9\"\nfunction = \"f\"\nworkload = \"w\"\n",
        );
        assert_eq!((line, column), (2, 8));
    }

    #[test]
    fn bad_schedule_fields() {
        let base = "[[schedule]]\ncron = \"* * * * *\"\n";
        let (line, _, msg) = refused(&format!("{base}function = \"f\"\n"));
        assert!(msg.contains("missing field `workload`"), "{msg}");
        assert_eq!(line, 1);
        let (line, _, msg) = refused(&format!(
            "{base}function = \"f\"\nworkload = \"\"\npriority = \"urgent\"\n"
        ));
        assert_eq!(line, 5);
        assert!(msg.contains("\"high\", \"normal\" or \"low\""), "{msg}");
        let (line, _, msg) = refused(&format!("{base}function = \"\"\nworkload = \"\"\n"));
        assert_eq!(line, 3);
        assert!(msg.contains("`function` is empty"), "{msg}");
        let long = "u".repeat(65);
        let (line, _, msg) = refused(&format!(
            "{base}function = \"f\"\nworkload = \"\"\nunique = \"{long}\"\n"
        ));
        assert_eq!(line, 5);
        assert!(msg.contains("65 bytes"), "{msg}");
    }

    #[test]
    fn bad_match() {
        let (line, _, msg) = refused("[[function]]\nmax_attempts = 2\n");
        assert_eq!(line, 1);
        assert!(msg.contains("missing field `match`"), "{msg}");
        let (line, _, msg) = refused("[[function]]\nmatch = \"\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("empty"), "{msg}");
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\\tb\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("control character"), "{msg}");
        let (line, _, msg) = refused(
            "[[function]]\nmatch = \"a*\"\n[[function]]\nmatch = \"b\"\n[[function]]\nmatch = \"a*\"\n",
        );
        assert_eq!(line, 6);
        assert!(msg.contains("line 2"), "{msg}");
        let (_, _, msg) = refused("[[function]]\nmatch = \"a\"\nbackoff = \"linear\"\n");
        assert!(msg.contains("\"exponential\" or \"fixed\""), "{msg}");
        let (_, _, msg) = refused("[[function]]\nmatch = \"a\"\ncan_do_timeout_unit = \"ms\"\n");
        assert!(
            msg.contains("\"auto\", \"seconds\" or \"milliseconds\""),
            "{msg}"
        );
    }

    #[test]
    fn messages_speak_of_the_file() {
        let (line, _, msg) =
            refused("[[function]]\nmatch = \"a\"\n\n[schedule]\ncron = \"* * * * *\"\n");
        assert_eq!(line, 4);
        assert!(
            msg.contains("write `[[schedule]]`, not `[schedule]`"),
            "{msg}"
        );
        let (_, _, msg) = refused("[function]\nmatch = \"a\"\n");
        assert!(msg.contains("write `[[function]]`"), "{msg}");
        let (line, _, msg) = refused("\nfunction = [1]\n");
        assert_eq!(line, 2);
        assert!(!msg.contains("Raw"), "{msg}");
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\n[[function]]\ntimeout = 3\n");
        assert_eq!(line, 4);
        assert!(msg.contains("missing field `match`"), "{msg}");
    }

    #[test]
    fn toml_syntax_error_names_its_line() {
        let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = = 3\n");
        assert_eq!(line, 3);
        assert!(!msg.is_empty());
        let (line, _, _) = refused("[[function]]\nmatch = \"a\n");
        assert_eq!(line, 2);
        let (line, _, _) = refused("[retention]\nmax_kept = 1\n[retention]\n");
        assert_eq!(line, 3);
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nxé=", 6), (2, 3));
        assert_eq!(line_column("é\nxé=", 5), (2, 2));
        assert_eq!(line_column("é", 1), (1, 1));
        assert_eq!(line_column("a\r\nb", 3), (2, 1));
        assert_eq!(line_column("ab", 99), (1, 3));
    }

    #[test]
    fn load_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("policies.toml");
        let missing = load(&path).expect_err("missing file").to_string();
        assert!(
            missing.starts_with("cannot read policy file ") && missing.contains("policies.toml"),
            "{missing}"
        );
        std::fs::write(&path, "[[function]]\nmatch = \"a\"\njitter = 1\n").expect("write");
        let e = load(&path).expect_err("refused").to_string();
        let want = format!("policy file {} line 3, column 10: ", path.display());
        assert!(e.starts_with(&want), "{e}");
        std::fs::write(&path, FULL).expect("write");
        assert_eq!(load(&path).expect("loads"), parse(FULL).expect("parses"));
    }

    #[test]
    fn unplaced_errors_read_well() {
        let e = PolicyFileError::Unplaced {
            path: None,
            message: "m".into(),
        };
        assert_eq!(e.to_string(), "policy file: m");
        let e = e.in_path(Path::new("/etc/g.toml"));
        assert_eq!(e.to_string(), "policy file /etc/g.toml: m");
    }

    #[test]
    fn shipped_example_parses() {
        let file = parse(include_str!("../../../docs/gearshift.example.toml"))
            .expect("docs/gearshift.example.toml parses");
        assert_eq!(file.policies.rules.len(), 2);
        assert_eq!(file.schedules.len(), 1);
    }
}
