//! `gearshift check`: reads the embedded store's queue file offline, says
//! whether the server opens it, and with `--repair` saves what a damaged
//! one still holds (`gearshift_store::log::salvage`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use gearshift_core::ids::RESERVE_AHEAD;
use gearshift_server::{ServerError, StoreConfig};
use gearshift_store::log::salvage::{self, Report};
use gearshift_store::StoreError;

use crate::serve::default_data_dir;

/// Exit status of a file the server refuses, not repaired.
const DAMAGED: u8 = 1;
/// Exit status when the file could not be read or written.
const TROUBLE: u8 = 2;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 the server opens the file (or it was repaired), 1 it refuses it, 2 the file could not be read or repaired."
)]
pub struct CheckArgs {
    /// Data directory of the embedded store (default as for `serve`). No
    /// server may be running on it.
    #[arg(long, env = "GEARSHIFT_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// If the server refuses the file, write every readable frame to a new
    /// one (the damaged file is kept beside it as
    /// queue.gslog.damaged-<unix seconds>). What the damaged stretches held
    /// is lost: jobs submitted in them, and the ends recorded in them (those
    /// jobs run again).
    #[arg(long)]
    repair: bool,
}

/// Exit status: 0 the server opens the file (or it was repaired), 1 it
/// refuses it, 2 the file could not be read or repaired.
pub fn main(args: CheckArgs) -> ExitCode {
    let dir = args.data_dir.unwrap_or_else(default_data_dir);
    let fail = |what: &str, e: StoreError| {
        eprintln!(
            "gearshift: cannot {what} the queue file in {}: {e}",
            dir.display()
        );
        ExitCode::from(TROUBLE)
    };
    if args.repair {
        match salvage::repair(&dir, RESERVE_AHEAD) {
            Ok(Some(done)) => {
                print!("{}", describe(&done.report));
                println!(
                    "repaired: the damaged file is kept as {}; new job handles start at {}",
                    done.kept_as.display(),
                    done.reserved
                );
                return ExitCode::SUCCESS;
            }
            // Sound: reported below.
            Ok(None) => {}
            Err(e) => return fail("repair", e),
        }
    }
    let report = match salvage::check(&dir) {
        Ok(r) => r,
        Err(e) => return fail("check", e),
    };
    print!("{}", describe(&report));
    if !report.refused {
        return ExitCode::SUCCESS;
    }
    println!(
        "to keep what can be read: gearshift check --repair --data-dir {}",
        dir.display()
    );
    ExitCode::from(DAMAGED)
}

/// A server's start-up error; one the embedded store refused as damaged
/// names the way out.
pub fn explain(e: ServerError, store: &StoreConfig) -> String {
    match (&e, store) {
        (
            ServerError::Store {
                source: StoreError::Corrupt(_),
                ..
            },
            StoreConfig::Log { dir, .. },
        ) => format!("{e}\n{}", repair_hint(dir)),
        _ => e.to_string(),
    }
}

/// The way out of a damaged queue file in `dir`, for the commands that
/// stop on one.
pub fn repair_hint(dir: &std::path::Path) -> String {
    format!(
        "`gearshift check --data-dir {}` says what can still be read; with --repair it keeps that and sets the damaged file aside",
        dir.display()
    )
}

/// What the report says, one finding a line.
fn describe(r: &Report) -> String {
    let mut out = format!("{} bytes, {} readable frames\n", r.file_len, r.frames);
    let holds = format!(
        "{} jobs waiting, {} dead, {} schedules, {} kept results",
        r.jobs, r.dead, r.schedules, r.kept
    );
    if !r.refused {
        out += &format!("sound: the server opens it and holds {holds}\n");
        if let Some(at) = r.cut_after_sync {
            out += &format!(
                "a frame written after the last sync is damaged (a power loss under interval durability tore writes not yet on disk): the server cuts the file at byte {at}, with the {} bytes after it\n",
                r.file_len - at
            );
        } else if r.tail > 0 {
            out += &format!(
                "it ends in a torn write ({} bytes of a flush a crash cut short), which the server cuts off\n",
                r.tail
            );
        }
        return out;
    }
    out += "damaged: the server refuses it\n";
    for d in &r.damaged {
        out += &format!("  bytes {}..{} cannot be read\n", d.start, d.end);
    }
    if r.tail > 0 {
        out += &format!(
            "  {} bytes after the last readable frame cannot be read\n",
            r.tail
        );
    }
    out += &format!(
        "a repair keeps every readable frame: {holds}; jobs submitted in the damaged stretches are lost, and jobs that ended in them run again\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(refused: bool, damaged: Vec<std::ops::Range<u64>>, tail: u64) -> Report {
        Report {
            file_len: 1000,
            frames: 7,
            refused,
            damaged,
            tail,
            cut_after_sync: None,
            jobs: 3,
            dead: 1,
            schedules: 0,
            kept: 2,
        }
    }

    #[test]
    fn a_sound_file_says_what_it_holds() {
        let text = describe(&report(false, vec![], 0));
        assert_eq!(
            text,
            "1000 bytes, 7 readable frames\nsound: the server opens it and holds 3 jobs waiting, 1 dead, 0 schedules, 2 kept results\n"
        );
        assert!(describe(&report(false, vec![], 12)).contains("torn write (12 bytes"));
        let torn_after_sync = Report {
            cut_after_sync: Some(600),
            ..report(false, vec![], 0)
        };
        let text = describe(&torn_after_sync);
        assert!(
            text.contains("the server cuts the file at byte 600, with the 400 bytes after it"),
            "{text}"
        );
    }

    #[test]
    fn a_damaged_file_names_each_stretch() {
        let text = describe(&report(true, vec![16..40, 90..100], 5));
        assert!(text.contains("damaged: the server refuses it\n"), "{text}");
        let stretches = "  bytes 16..40 cannot be read\n  bytes 90..100 cannot be read\n";
        assert!(text.contains(stretches), "{text}");
        assert!(
            text.contains("  5 bytes after the last readable frame"),
            "{text}"
        );
    }
}
