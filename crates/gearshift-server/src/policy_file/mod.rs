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
//!
//! [access]                    # optional, once: who may do what
//! submit = ["10.0.0.0/8", "cert:CN=app"]  # submit jobs, ask their status
//! work = ["cert:*"]           # register functions, take jobs
//! admin_read = ["loopback"]   # read-only admin commands, HTTP reads
//! admin_change = ["cert:CN=ops"] # admin changes (loopback always may)
//! ```
//!
//! An access list holds `"*"`, `"loopback"`, networks (`"10.0.0.0/8"`),
//! `"cert:*"` (any verified TLS client certificate) and `"cert:SUBJECT"`
//! (a whole certificate subject, or one `KEY=VALUE` of it). A list left out
//! lets anyone; `admin_change` then means loopback and `--admin-allow`.
//!
//! Durations are strings of numbers with units `ms`, `s`, `m`, `h`, `d`,
//! largest first (`"1500ms"`, `"10m"`, `"1h30m"`), or a bare whole number
//! of seconds (`30` or `"30"`). Cron fields are made of `*`, numbers, `,`,
//! `-` and `/` (`*/5`, `1-5`, `0-30/10`, `1,15`) within minute 0-59, hour
//! 0-23, day of month 1-31, month 1-12, day of week 0-7 (0 and 7 are
//! Sunday). Unknown keys and sections are errors, as are two `[[function]]`
//! sections with the same `match` (the second could never apply).

mod cron;
mod duration;
mod etcd;
mod gearmonkey;
mod raw;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use gearshift_core::policy::Policies;

pub use etcd::EtcdDecl;
pub use gearmonkey::GearmonkeyDecl;
use raw::RawFile;

/// Everything a policy file declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFile {
    /// The `[[function]]` rules, in file order, and `[retention]`.
    pub policies: Policies,
    /// The `[[schedule]]` sections, in file order.
    pub schedules: Vec<ScheduleDecl>,
    /// The `[access]` section, if any (without `--admin-allow`).
    pub access: Option<crate::access::AccessRules>,
    /// The `[[gearmonkey]]` sections together, if any.
    pub gearmonkey: Option<GearmonkeyDecl>,
    /// The `[etcd]` table, if any.
    pub etcd: Option<EtcdDecl>,
}

/// One `[[schedule]]` section: a job to submit on a cron schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleDecl {
    /// Five checked cron fields: minute hour day-of-month month day-of-week.
    pub cron: String,
    /// The function to submit to (non-empty, no control character but TAB).
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
        .replace("struct RawGearmonkey", "a [[gearmonkey]] table")
        .replace("struct RawEtcd", "the [etcd] table")
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
