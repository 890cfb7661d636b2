//! The import marker: one line per import in the data directory, so the
//! same gearmand queue is not queued twice by accident.

use std::io::Write;
use std::path::Path;
use std::time::UNIX_EPOCH;

use super::{utc, MARKER};

/// What identifies an imported queue: where it is, and two figures that
/// change when its content does. For a sqlite file: its path, size and
/// mtime; for a PostgreSQL table: its address, row count and a hash of
/// its rows.
#[derive(Debug)]
pub(super) struct Source {
    path: String,
    size: u64,
    stamp: u128,
}

impl Source {
    pub(super) fn of(file: &Path) -> Result<Source, String> {
        let meta =
            std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        if !meta.is_file() {
            return Err(format!("{} is not a file", file.display()));
        }
        let path = std::fs::canonicalize(file)
            .map_err(|e| format!("cannot resolve {}: {e}", file.display()))?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(Source {
            path: escape(&path.to_string_lossy()),
            size: meta.len(),
            stamp: mtime_ns,
        })
    }

    /// A PostgreSQL queue: `name` (its address and table), its row count
    /// and the hash of its rows.
    pub(super) fn table(name: &str, rows: usize, fingerprint: u64) -> Source {
        Source {
            path: escape(name),
            size: rows as u64,
            stamp: u128::from(fingerprint),
        }
    }
}

/// Keeps a path on one tab-separated line.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// Marker lines: size, mtime (ns), import time (Unix ms), jobs, path (for
/// a PostgreSQL queue: rows, hash of the rows, ..., its address).
pub(super) fn check_marker(
    dir: &Path,
    source: &Source,
    force: bool,
) -> Result<Option<String>, String> {
    let path = dir.join(MARKER);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut changed = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.splitn(5, '\t').collect();
        let [size, mtime, at, jobs, p] = f[..] else {
            continue;
        };
        let at = at.parse().map_or_else(|_| at.to_owned(), utc);
        if p != source.path {
            continue;
        }
        if size == source.size.to_string() && mtime == source.stamp.to_string() {
            if force {
                return Ok(Some(format!(
                    "{} was imported before ({jobs} jobs on {at}); --force imported \
                     its jobs again",
                    source.path
                )));
            }
            return Err(format!(
                "{} was already imported into {} ({jobs} jobs on {at}, see {MARKER}); \
                 importing it again would queue every job twice. Pass --force to do it anyway",
                source.path,
                dir.display()
            ));
        }
        changed = Some(format!(
            "{} was imported before ({jobs} jobs on {at}) and has changed since: \
             any job it still held from then is now queued twice",
            source.path
        ));
    }
    Ok(changed)
}

pub(super) fn record_import(
    dir: &Path,
    source: &Source,
    jobs: usize,
    now: u64,
) -> std::io::Result<()> {
    let path = dir.join(MARKER);
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let mut text = String::new();
    if new {
        text.push_str(
            "# gearshift import: size (or rows)\tmtime_ns (or row hash)\timported_at_ms\tjobs\tpath\n",
        );
    }
    text.push_str(&format!(
        "{}\t{}\t{now}\t{jobs}\t{}\n",
        source.size, source.stamp, source.path
    ));
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    if new {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
