//! `gearshift serve`'s log: to stderr, a file or nowhere; text or JSON
//! lines; colours only on a terminal; a log file reopened on SIGHUP (so
//! logrotate can move it away).

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
            std::io::stderr().is_terminal(),
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
