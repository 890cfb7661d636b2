//! `gearshift pin`: places a function of a partitioned cluster in a
//! partition by hand (`gearshift_store::postgres::pins`), for a hot
//! function that should not share its node's work with others.

use std::process::ExitCode;

use clap::Args;
use gearshift_store::postgres::pins::{Pinned, Pins};
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
        return Ok(format!(
            "{function}: partition {p} ({how}), {}\n",
            owned(pins.owner_of(p).map_err(err)?)
        ));
    }
    let Pinned {
        from,
        to,
        moved,
        fenced,
    } = pins.pin(f, args.partition).map_err(err)?;
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
    out += &format!(
        "nodes place it from their next beat; partition {to}: {}\n",
        owned(pins.owner_of(to).map_err(err)?)
    );
    Ok(out)
}

fn owned(node: Option<String>) -> String {
    node.map_or("owned by no live node".to_owned(), |n| {
        format!("owned by node {n}")
    })
}
