//! The file's TOML shape as serde reads it (with spans), and its build into
//! [`Policies`] and [`ScheduleDecl`]s, each rule broken reported at the
//! byte it is about.

use std::fmt;
use std::sync::Arc;

use gearshift_core::policy::{
    Backoff, Policies, Policy, Reason, Reasons, Retention, Rule, TimeoutUnit,
};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::cron::check_cron;
use super::duration::{format_ms, parse_duration};
use super::{line_column, PolicyFile, ScheduleDecl};
use crate::access::{AccessRules, Who};

/// Longest unique id a submission may carry (gearmand's 64 bytes).
const MAX_UNIQUE: usize = gearshift_core::config::MAX_UNIQUE;

/// A rule broken at byte `at` of the text.
pub(super) struct Bad {
    pub(super) at: usize,
    pub(super) message: String,
}

pub(super) fn bad<T>(at: usize, message: impl Into<String>) -> Result<T, Bad> {
    Err(Bad {
        at,
        message: message.into(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    retention: Option<RawRetention>,
    #[serde(default)]
    function: Vec<RawFunction>,
    #[serde(default)]
    schedule: Vec<RawSchedule>,
    access: Option<RawAccess>,
    #[serde(default)]
    gearmonkey: Vec<super::gearmonkey::RawGearmonkey>,
    etcd: Option<super::etcd::RawEtcd>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    submit: Option<Vec<Spanned<String>>>,
    work: Option<Vec<Spanned<String>>>,
    admin_read: Option<Vec<Spanned<String>>>,
    admin_change: Option<Vec<Spanned<String>>>,
}

impl RawAccess {
    fn build(self) -> Result<AccessRules, Bad> {
        let list = |items: Option<Vec<Spanned<String>>>| -> Result<Option<Vec<Who>>, Bad> {
            let Some(items) = items else {
                return Ok(None);
            };
            items
                .iter()
                .map(|i| Who::parse(i.get_ref()).or_else(|e| bad(i.span().start, e)))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        };
        Ok(AccessRules {
            submit: list(self.submit)?,
            work: list(self.work)?,
            admin_read: list(self.admin_read)?,
            admin_change: list(self.admin_change)?,
            admin_allow: Default::default(),
        })
    }
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
    pub(super) fn build(self, text: &str) -> Result<PolicyFile, Bad> {
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
            access: self.access.map(RawAccess::build).transpose()?,
            gearmonkey: super::gearmonkey::build(self.gearmonkey)?,
            etcd: super::etcd::build(self.etcd)?,
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
        if let Some(b) = pattern.bytes().find(|&b| refused_control(b)) {
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
        if let Some(b) = function.bytes().find(|&b| refused_control(b)) {
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

/// A control byte a name in the file may not hold; TAB may, since Perl's
/// `prefix` option puts one between the prefix and the function name.
fn refused_control(b: u8) -> bool {
    b.is_ascii_control() && b != b'\t'
}
