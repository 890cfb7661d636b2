//! `gearshift serve`'s log: to stderr, a file or nowhere; text or JSON
//! lines; colours only on a terminal; a log file reopened on SIGHUP (so
//! logrotate can move it away). Also the client tools' log ([`init_tool`]),
//! coloured by the same rule ([`colour`]).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriter};

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (timestamp, level, fields, message).
    Json,
}

/// A log file that can be reopened at its path.
#[derive(Debug, Clone)]
pub struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
}

impl LogFile {
    fn open(path: &Path) -> std::io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_owned(),
            file: Arc::new(Mutex::new(append(path)?)),
        })
    }

    /// Opens the path again (creating it if it was moved away); lines
    /// written from now on go to the new file.
    pub fn reopen(&self) -> std::io::Result<()> {
        let fresh = append(&self.path)?;
        if let Ok(mut f) = self.file.lock() {
            *f = fresh;
        }
        Ok(())
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Writes one formatted event to the current file.
pub struct LogWriter(Arc<Mutex<std::fs::File>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut f) => f.write(buf),
            Err(_) => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.0.lock() {
            Ok(mut f) => f.flush(),
            Err(_) => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter(self.file.clone())
    }
}

/// Installs the global subscriber: `destination` is `stderr`, `none` or a
/// file path. Returns the file, for reopening, when logging to one.
pub fn init(
    destination: &str,
    format: LogFormat,
    filter: LevelFilter,
) -> Result<Option<LogFile>, String> {
    let (writer, ansi, file) = match destination {
        "none" => return Ok(None),
        "stderr" => (
            BoxMakeWriter::new(std::io::stderr),
            colour(std::io::stderr().is_terminal()),
            None,
        ),
        path => {
            let file = LogFile::open(Path::new(path))
                .map_err(|e| format!("cannot open log file {path}: {e}"))?;
            (BoxMakeWriter::new(file.clone()), false, Some(file))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(filter)
        .with_target(false)
        .with_writer(writer);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(ansi).init(),
    }
    Ok(file)
}

/// Whether log lines to a stream get colour codes: only on a terminal, and
/// not when `NO_COLOR` is set to anything but the empty string (no-color.org).
pub fn colour(is_terminal: bool) -> bool {
    wants_colour(is_terminal, std::env::var_os("NO_COLOR"))
}

fn wants_colour(is_terminal: bool, no_color: Option<OsString>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The client tools' log (`work`: reconnects, lost connections) on stderr
/// at `default` level and up; `RUST_LOG` overrides the level.
pub fn init_tool(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(colour(std::io::stderr().is_terminal()))
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(wants_colour(true, None));
        assert!(wants_colour(true, Some("".into())));
        assert!(!wants_colour(true, Some("1".into())));
        assert!(!wants_colour(false, None));
        assert!(!wants_colour(false, Some("".into())));
    }
}
