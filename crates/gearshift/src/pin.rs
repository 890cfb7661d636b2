//! `gearshift pin`: places a function of a partitioned cluster in a
//! partition by hand (`gearshift_store::postgres::pins`), for a hot
//! function that should not share its node's work with others.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use gearshift_store::postgres::pins::{Asked, PinMove, Pinned, Pins};
use gearshift_store::PgOptions;

use crate::serve::is_postgres_url;

#[derive(Args, Debug)]
#[command(after_help = "Without FUNCTION: the pins. With FUNCTION alone: where it lives.")]
pub struct PinArgs {
    /// The cluster's database (as `serve --store` names it).
    #[arg(long, env = "GEARSHIFT_STORE", hide_env_values = true)]
    store: String,
    /// The function to place (or show).
    function: Option<String>,
    /// The partition to place it in (0 to the count less one).
    partition: Option<u32>,
    /// Put the function back where its name places it.
    #[arg(long, requires = "function", conflicts_with = "partition")]
    unpin: bool,
    /// Move it now, without waiting for its running jobs: the partition
    /// it leaves is taken from its owner, whose running jobs run again.
    #[arg(long, requires = "function")]
    at_once: bool,
    /// How long to wait for the owner to move it (seconds; 0: do not wait).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    wait: u64,
}

pub fn main(args: PinArgs) -> ExitCode {
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gearshift pin: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &PinArgs) -> Result<String, String> {
    if !is_postgres_url(&args.store) {
        return Err("--store must name the cluster's PostgreSQL (postgres://...)".into());
    }
    let mut pins = Pins::open(&args.store, &PgOptions::default()).map_err(|e| e.to_string())?;
    let err = |e: gearshift_store::StoreError| e.to_string();
    let Some(function) = &args.function else {
        let placement = pins.placement().map_err(err)?;
        let mut out = format!("{} partitions\n", placement.count);
        if placement.pins.is_empty() {
            out += "no function is pinned\n";
        }
        for (f, p) in &placement.pins {
            out += &format!("{}\tpartition {p}\n", String::from_utf8_lossy(f));
        }
        for m in pins.asked().map_err(err)? {
            out += &format!(
                "{}\tasked: {}, moved by the owner of where it lives\n",
                String::from_utf8_lossy(&m.function),
                asked_to(&m)
            );
        }
        return Ok(out);
    };
    let f = function.as_bytes();
    if args.partition.is_none() && !args.unpin {
        let placement = pins.placement().map_err(err)?;
        let p = placement.partition_of(f);
        let how = if placement.pins.contains_key(f) {
            "pinned"
        } else {
            "its name's hash"
        };
        let mut out = format!(
            "{function}: partition {p} ({how}), {}\n",
            owned(pins.owner_of(p).map_err(err)?)
        );
        if let Some(m) = pins.asked().map_err(err)?.iter().find(|m| m.function == f) {
            out += &format!(
                "asked: {} (its owner moves it once its running jobs are done)\n",
                asked_to(m)
            );
        }
        return Ok(out);
    }
    let asked = match args.at_once {
        true => Asked::Moved(pins.pin(f, args.partition).map_err(err)?),
        false => pins.ask(f, args.partition).map_err(err)?,
    };
    let (from, to, owner) = match asked {
        Asked::Moved(pinned) => {
            let to = pinned.to;
            let mut out = moved_at_once(function, pinned);
            out += &format!(
                "nodes place it from their next beat; partition {to}: {}\n",
                owned(pins.owner_of(to).map_err(err)?)
            );
            return Ok(out);
        }
        Asked::Waiting { from, to, owner } => (from, to, owner),
    };
    let mut out = format!(
        "{function}: partition {from} -> {to}, asked of node {owner}, which moves it once the \
         function's running jobs are done (up to 10 s); its submissions wait meanwhile\n"
    );
    if args.wait == 0 {
        return Ok(out);
    }
    let until = Instant::now() + Duration::from_secs(args.wait);
    loop {
        if !pins.asked().map_err(err)?.iter().any(|m| m.function == f) {
            let now = pins.placement().map_err(err)?.partition_of(f);
            out += &format!(
                "moved: partition {now}, {}; nodes place it from their next beat\n",
                owned(pins.owner_of(now).map_err(err)?)
            );
            return Ok(out);
        }
        if Instant::now() >= until {
            print!("{out}");
            return Err(format!(
                "not moved after {} s: the pin stays asked for, and node {owner} moves it once \
                 it can (`--at-once` moves it now, and jobs running there run again)",
                args.wait
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What a pin moved at once says.
fn moved_at_once(function: &str, pinned: Pinned) -> String {
    let Pinned {
        from,
        to,
        moved,
        fenced,
    } = pinned;
    let mut out = if from == to {
        format!("{function} stays in partition {to}\n")
    } else {
        format!("{function}: partition {from} -> {to}\n")
    };
    out += &format!("stored rows moved: {moved}\n");
    if !fenced.is_empty() {
        let list: Vec<String> = fenced.iter().map(|p| p.to_string()).collect();
        out += &format!(
            "taken from their owners and served again from the database: partition {} \
             (an owner stores nothing until its job server starts again at its next beat: \
             jobs running on it run again, as after a takeover)\n",
            list.join(", ")
        );
    }
    out
}

/// Where a pin asked for places its function.
fn asked_to(m: &PinMove) -> String {
    m.partition
        .map_or("unpinned".to_owned(), |p| format!("partition {p}"))
}

fn owned(node: Option<String>) -> String {
    node.map_or("owned by no live node".to_owned(), |n| {
        format!("owned by node {n}")
    })
}
