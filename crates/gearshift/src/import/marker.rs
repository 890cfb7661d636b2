//! The import marker: one line per import in the data directory (for a
//! PostgreSQL store, a row of its `gearshift_imports`), so the same
//! gearmand queue is not queued twice by accident.

use std::io::Write;
use std::path::Path;
use std::time::UNIX_EPOCH;

use gearshift_store::PgStore;

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

    /// Where the queue is: the marker's path column, and the `source` of
    /// its `gearshift_imports` row.
    pub(super) fn key(&self) -> &str {
        &self.path
    }

    /// What identifies its content, for `gearshift_imports`: the marker's
    /// two figures as `size:stamp`.
    pub(super) fn fingerprint(&self) -> String {
        format!("{}:{}", self.size, self.stamp)
    }
}

/// An earlier import of a queue at the same place as the one imported now.
struct Prior {
    /// Its content was the same (an import of it again queues it twice).
    same: bool,
    jobs: String,
    /// When, as [`utc`] prints it.
    at: String,
}

/// Refuses to import `source` again into the store `into` (unless
/// `force`), or says that it was imported before; `see` names where the
/// record of the earlier imports is.
fn judge(
    source: &Source,
    priors: impl IntoIterator<Item = Prior>,
    force: bool,
    into: &str,
    see: &str,
) -> Result<Option<String>, String> {
    let mut changed = None;
    for Prior { same, jobs, at } in priors {
        if same {
            if force {
                return Ok(Some(format!(
                    "{} was imported before ({jobs} jobs on {at}); --force imported \
                     its jobs again",
                    source.path
                )));
            }
            return Err(format!(
                "{} was already imported into {into} ({jobs} jobs on {at}, see {see}); \
                 importing it again would queue every job twice. Pass --force to do it anyway",
                source.path
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

/// [`check_marker`] for a PostgreSQL store (`server` names it), from its
/// `gearshift_imports` row.
pub(super) fn check_imports(
    store: &mut PgStore,
    server: &str,
    source: &Source,
    force: bool,
) -> Result<Option<String>, String> {
    let prior = store
        .imported(source.key())
        .map_err(|e| format!("cannot read the earlier imports: {e}"))?
        .map(|r| Prior {
            same: r.fingerprint == source.fingerprint(),
            jobs: r.jobs.to_string(),
            at: u64::try_from(r.imported_at_ms).map_or_else(|_| "?".to_owned(), utc),
        });
    judge(source, prior, force, server, "its table gearshift_imports")
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
    let priors = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let f: Vec<&str> = line.splitn(5, '\t').collect();
            let [size, mtime, at, jobs, p] = f[..] else {
                return None;
            };
            (p == source.path).then(|| Prior {
                same: size == source.size.to_string() && mtime == source.stamp.to_string(),
                jobs: jobs.to_owned(),
                at: at.parse().map_or_else(|_| at.to_owned(), utc),
            })
        });
    judge(source, priors, force, &dir.display().to_string(), MARKER)
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
