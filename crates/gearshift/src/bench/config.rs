//! The flags of `gearshift bench` and the settings they resolve to: which
//! scenarios, how many jobs, clients, requests in flight per client,
//! workers, payload size and run time, and the function names of the run.
//!
//! Unless `--function` is given, every run uses a function name of its own
//! (`gearshift-bench-<pid>-<ms>`), so it never sees an earlier run's jobs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use gearshift_client::{AdminClient, Client, ClientBuilder, Error, ServerAddr, TlsConfig};

use crate::servers::{self, ServerArgs, TlsArgs};
use crate::when;

/// Jobs of `submit` and `drain` when `--jobs` is not given.
pub const DEFAULT_JOBS: u64 = 100_000;
/// Run time of `roundtrip` and `echo` when neither `--jobs` nor `--duration` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);
/// Limit on each client call (a submission until JOB_CREATED, a foreground
/// job until its result, an echo until its reply).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest `--size` accepted.
const MAX_SIZE: usize = 1 << 30;

/// Flags of `gearshift bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub servers: ServerArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Scenarios to run (comma-separated or repeated; they always run in
    /// the order submit, drain, roundtrip, echo).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub scenario: Vec<ScenarioArg>,
    /// Jobs: for submit and drain the count (default 100000); for roundtrip
    /// and echo a limit (default: run for --duration).
    #[arg(short = 'n', long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: Option<u64>,
    /// Client connections (each to every server).
    #[arg(short = 'c', long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,
    /// Requests in flight on each client connection (1: back to back).
    #[arg(short = 'i', long, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub inflight: u32,
    /// Workers for drain and roundtrip (one connection to every server each).
    #[arg(short = 'w', long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub workers: u32,
    /// Payload size in bytes (K and M suffixes allowed; at least the
    /// `seq:N;` tag is sent).
    #[arg(long, default_value = "100", value_name = "BYTES", value_parser = parse_size)]
    pub size: usize,
    /// Run time of roundtrip and echo (default 5s unless --jobs is given);
    /// also caps submit when given.
    #[arg(long, value_name = "DURATION", value_parser = when::parse_timeout)]
    pub duration: Option<Duration>,
    /// Function name (default: one of its own per run); roundtrip uses
    /// FN.rt. Use a name no one else uses: drain takes every job it holds.
    #[arg(short = 'f', long, value_name = "FN", value_parser = servers::function_name)]
    pub function: Option<String>,
    /// Threads of the load generator: 0 runs clients and workers on one
    /// thread (the most efficient when the server shares the machine);
    /// N > 0 a multi-threaded runtime.
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub threads: u32,
    /// One JSON object per scenario on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--scenario`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioArg {
    /// Background submits, no worker; admin `status` must show them queued.
    Submit,
    /// Workers drain what submit queued; each job must run exactly once.
    Drain,
    /// Foreground jobs through echo workers; every result must equal its payload.
    Roundtrip,
    /// ECHO_REQ round trips; every reply must equal its payload.
    Echo,
    /// All of the above, in order.
    All,
}

/// A scenario to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// See [`ScenarioArg::Submit`].
    Submit,
    /// See [`ScenarioArg::Drain`].
    Drain,
    /// See [`ScenarioArg::Roundtrip`].
    Roundtrip,
    /// See [`ScenarioArg::Echo`].
    Echo,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ORDER: [Scenario; 4] = [
        Scenario::Submit,
        Scenario::Drain,
        Scenario::Roundtrip,
        Scenario::Echo,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Submit => "submit",
            Scenario::Drain => "drain",
            Scenario::Roundtrip => "roundtrip",
            Scenario::Echo => "echo",
        }
    }

    fn chosen_by(self, arg: ScenarioArg) -> bool {
        matches!(
            (arg, self),
            (ScenarioArg::All, _)
                | (ScenarioArg::Submit, Scenario::Submit)
                | (ScenarioArg::Drain, Scenario::Drain)
                | (ScenarioArg::Roundtrip, Scenario::Roundtrip)
                | (ScenarioArg::Echo, Scenario::Echo)
        )
    }
}

/// The settings of one run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The servers under test.
    pub servers: Vec<ServerAddr>,
    /// Scenarios to run, in order.
    pub scenarios: Vec<Scenario>,
    /// Function of submit and drain; roundtrip adds `.rt`.
    pub function: String,
    /// Jobs of submit and drain.
    pub jobs: u64,
    /// Job limit of roundtrip and echo.
    pub timed_jobs: Option<u64>,
    /// Run time of roundtrip and echo.
    pub timed_duration: Option<Duration>,
    /// Time cap of submit (only when `--duration` was given).
    pub submit_cap: Option<Duration>,
    /// Client connections.
    pub clients: usize,
    /// Requests in flight per client.
    pub inflight: usize,
    /// Workers of drain and roundtrip.
    pub workers: usize,
    /// Payload bytes.
    pub size: usize,
    /// Runtime threads (0: current-thread).
    pub threads: usize,
    /// JSON output.
    pub json: bool,
    /// TLS for every connection (clients, workers, admin), or plain TCP.
    pub tls: Option<TlsConfig>,
}

impl Config {
    /// Resolves the flags (`tls` from [`TlsArgs::config`]).
    pub fn from_args(args: &BenchArgs, tls: Option<TlsConfig>) -> Config {
        let function = args.function.clone().unwrap_or_else(|| {
            let ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("gearshift-bench-{}-{ms}", std::process::id())
        });
        let timed_duration = match (args.jobs, args.duration) {
            (_, Some(d)) => Some(d),
            (Some(_), None) => None,
            (None, None) => Some(DEFAULT_DURATION),
        };
        Config {
            servers: args.servers.list(),
            scenarios: Scenario::ORDER
                .into_iter()
                .filter(|s| args.scenario.iter().any(|&a| s.chosen_by(a)))
                .collect(),
            function,
            jobs: args.jobs.unwrap_or(DEFAULT_JOBS),
            timed_jobs: args.jobs,
            timed_duration,
            submit_cap: args.duration,
            clients: usize::try_from(args.clients).unwrap_or(1),
            inflight: usize::try_from(args.inflight).unwrap_or(1),
            workers: usize::try_from(args.workers).unwrap_or(1),
            size: args.size,
            threads: usize::try_from(args.threads).unwrap_or(0),
            json: args.json,
            tls,
        }
    }

    /// The function a scenario uses (`None` for echo, which has none).
    pub fn function_for(&self, scenario: Scenario) -> Option<String> {
        match scenario {
            Scenario::Submit | Scenario::Drain => Some(self.function.clone()),
            Scenario::Roundtrip => Some(format!("{}.rt", self.function)),
            Scenario::Echo => None,
        }
    }

    /// The workers a scenario runs.
    pub fn workers_for(&self, scenario: Scenario) -> usize {
        match scenario {
            Scenario::Drain | Scenario::Roundtrip => self.workers,
            Scenario::Submit | Scenario::Echo => 0,
        }
    }

    /// A client builder for the servers, with TLS if set.
    pub fn client_builder(&self) -> ClientBuilder {
        let b = Client::builder().servers(&self.servers);
        match &self.tls {
            Some(tls) => b.tls(tls.clone()),
            None => b,
        }
    }

    /// An admin connection to `addr`, with TLS if set.
    pub async fn admin(&self, addr: &ServerAddr) -> Result<AdminClient, Error> {
        AdminClient::connect_with(addr, self.tls.as_ref()).await
    }

    /// One client per `--clients`, each with its own connections.
    pub fn clients(&self) -> Result<Vec<Client>, Error> {
        (0..self.clients)
            .map(|_| self.client_builder().timeout(CALL_TIMEOUT).build())
            .collect()
    }
}

/// A byte count: digits with an optional `K` / `M` suffix (×1024, ×1024²).
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let (digits, mult) = if let Some(d) = upper.strip_suffix('K') {
        (d.to_owned(), 1usize << 10)
    } else if let Some(d) = upper.strip_suffix('M') {
        (d.to_owned(), 1 << 20)
    } else {
        (upper, 1)
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| format!("not a size: {t:?} (try 100, 1K, 64K, 1M)"))?;
    n.checked_mul(mult)
        .filter(|&v| v <= MAX_SIZE)
        .ok_or_else(|| format!("size {t:?} is over 1 GiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("64k"), Ok(65_536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("x").is_err());
        assert!(parse_size("2048M").is_err());
    }
}
