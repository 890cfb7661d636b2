//! `gearshift top`: a live terminal view of one server's functions (queued
//! by priority, running, workers, how fast each queue moves) and of its
//! workers (what each is running). Built on the admin text protocol, so it
//! also watches gearmand (which has no worker registry: its `workers` list
//! is shown instead).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use gearshift_client::{AdminClient, Error, ServerAddr, TlsConfig};

use crate::servers::{self, ServerArgs, TlsArgs, EXIT_UNREACHABLE};
use crate::table::Table;
use crate::when;

/// Flags of `gearshift top`.
#[derive(Args, Debug)]
pub struct TopArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    tls: TlsArgs,
    /// Time between refreshes.
    #[arg(long, short = 'i', value_name = "DURATION", default_value = "1s",
          value_parser = when::parse_timeout)]
    interval: Duration,
    /// Print one view and exit (no screen clearing; for scripts and logs).
    #[arg(long)]
    once: bool,
    /// Most function and worker rows shown.
    #[arg(long, default_value_t = 40)]
    rows: usize,
}

/// Runs `gearshift top` until interrupted (or once).
pub fn main(args: TopArgs) -> ExitCode {
    let Some(addr) = args.servers.list().into_iter().next() else {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    };
    let tls = match args.tls.config() {
        Ok(tls) => tls,
        Err(code) => return code,
    };
    let rt = match servers::runtime(0) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(run(args, addr, tls))
}

async fn run(args: TopArgs, addr: ServerAddr, tls: Option<TlsConfig>) -> ExitCode {
    let clear = !args.once && std::io::stdout().is_terminal();
    let mut admin = match AdminClient::connect_with(&addr, tls.as_ref()).await {
        Ok(a) => a,
        Err(e) => {
            let msg = servers::explain(&e, std::slice::from_ref(&addr)).await;
            return servers::fail(servers::exit_code_for(&e), &msg);
        }
    };
    admin.set_timeout(Some(Duration::from_secs(10)));
    let mut last: Option<(Instant, HashMap<String, u64>)> = None;
    loop {
        let view = match sample(&mut admin).await {
            Ok(v) => v,
            Err(e) => {
                let msg = servers::explain(&e, std::slice::from_ref(&addr)).await;
                return servers::fail(servers::exit_code_for(&e), &msg);
            }
        };
        let now = Instant::now();
        let text = render(&addr, &view, last.as_ref(), now, args.rows);
        let mut out = std::io::stdout().lock();
        if clear {
            // Home and clear, then the frame: no flicker of a scrolled screen.
            let _ = out.write_all(b"\x1b[H\x1b[2J");
        }
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        drop(out);
        if args.once {
            return ExitCode::SUCCESS;
        }
        let queued = view
            .functions
            .iter()
            .map(|f| (f.name.clone(), f.queued()))
            .collect();
        last = Some((now, queued));
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        }
    }
}

/// One function's row.
struct FunctionRow {
    name: String,
    high: u64,
    normal: u64,
    low: u64,
    running: u64,
    workers: u64,
}

impl FunctionRow {
    fn queued(&self) -> u64 {
        self.high + self.normal + self.low
    }
}

/// One worker's row.
struct WorkerRow {
    name: String,
    address: String,
    done: Option<(u64, u64)>,
    running: Vec<String>,
    functions: Vec<String>,
}

/// What one refresh read.
struct View {
    functions: Vec<FunctionRow>,
    workers: Vec<WorkerRow>,
}

async fn sample(admin: &mut AdminClient) -> Result<View, Error> {
    let running: HashMap<String, u64> = admin
        .status()
        .await?
        .into_iter()
        .map(|s| (s.function, s.running))
        .collect();
    let mut functions: Vec<FunctionRow> = admin
        .priority_status()
        .await?
        .into_iter()
        .map(|p| FunctionRow {
            running: running.get(&p.function).copied().unwrap_or(0),
            name: p.function,
            high: p.high,
            normal: p.normal,
            low: p.low,
            workers: p.workers,
        })
        .collect();
    functions.sort_by(|a, b| {
        (b.queued() + b.running)
            .cmp(&(a.queued() + a.running))
            .then_with(|| a.name.cmp(&b.name))
    });
    // The worker registry where the server has one (Gearshift), else gearmand's list.
    let workers = match admin.show_workers().await {
        Ok(list) => list
            .into_iter()
            .map(|w| WorkerRow {
                name: if w.client_id == "-" {
                    format!("fd {}", w.fd)
                } else {
                    w.client_id
                },
                address: w.address,
                done: Some((w.done, w.failed)),
                running: w.held,
                functions: w.functions,
            })
            .collect(),
        Err(Error::Admin { .. }) => admin
            .workers()
            .await?
            .into_iter()
            .filter(|w| !w.functions.is_empty())
            .map(|w| WorkerRow {
                name: if w.client_id == "-" {
                    format!("fd {}", w.fd)
                } else {
                    w.client_id
                },
                address: w.ip,
                done: None,
                running: Vec::new(),
                functions: w.functions,
            })
            .collect(),
        Err(e) => return Err(e),
    };
    Ok(View { functions, workers })
}

fn render(
    addr: &ServerAddr,
    view: &View,
    last: Option<&(Instant, HashMap<String, u64>)>,
    now: Instant,
    rows: usize,
) -> String {
    let queued: u64 = view.functions.iter().map(FunctionRow::queued).sum();
    let running: u64 = view.functions.iter().map(|f| f.running).sum();
    let mut out = format!(
        "gearshift top — {addr}   functions {}   queued {queued}   running {running}   workers {}\n\n",
        view.functions.len(),
        view.workers.len()
    );
    let mut t = Table::new(&[
        ("FUNCTION", false),
        ("HIGH", true),
        ("NORMAL", true),
        ("LOW", true),
        ("RUNNING", true),
        ("WORKERS", true),
        ("QUEUE/S", true),
    ]);
    for f in view.functions.iter().take(rows) {
        // How fast the queue grows (+) or drains (-) since the last refresh.
        let rate = last
            .and_then(|(at, prev)| {
                let secs = now.duration_since(*at).as_secs_f64();
                let before = *prev.get(&f.name)? as f64;
                (secs > 0.0).then(|| (f.queued() as f64 - before) / secs)
            })
            .map_or_else(|| "-".to_owned(), |r| format!("{r:+.0}"));
        t.row(vec![
            f.name.clone(),
            f.high.to_string(),
            f.normal.to_string(),
            f.low.to_string(),
            f.running.to_string(),
            f.workers.to_string(),
            rate,
        ]);
    }
    out.push_str(&t.render());
    if view.functions.len() > rows {
        out.push_str(&format!(
            "… {} more functions\n",
            view.functions.len() - rows
        ));
    }
    out.push('\n');
    let mut t = Table::new(&[
        ("WORKER", false),
        ("ADDRESS", false),
        ("DONE", true),
        ("FAILED", true),
        ("RUNNING", false),
        ("FUNCTIONS", false),
    ]);
    for w in view.workers.iter().take(rows) {
        let (done, failed) = w.done.map_or(("-".to_owned(), "-".to_owned()), |(d, f)| {
            (d.to_string(), f.to_string())
        });
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(" ")
            }
        };
        t.row(vec![
            w.name.clone(),
            w.address.clone(),
            done,
            failed,
            list(&w.running),
            list(&w.functions),
        ]);
    }
    out.push_str(&t.render());
    if view.workers.len() > rows {
        out.push_str(&format!("… {} more workers\n", view.workers.len() - rows));
    }
    out
}
