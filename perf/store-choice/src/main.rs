//! Measures gearshift-store's append-only log, redb and SQLite (WAL) doing
//! the same group-commit work on the real disk. See docs/store-choice.md.
//!
//! cargo run --release --manifest-path perf/store-choice/Cargo.toml -- [options]
//!   --dir PATH       where the stores live (default: <this crate>/target/bench-data)
//!   --rounds N       interleaved repetitions (default 5)
//!   --engine NAME    only log | redb | sqlite-full | sqlite-normal (repeatable)
//!   --group G        only this group size (repeatable)
//!   --jobs N         jobs per steady-state run, overriding the defaults
//!   --cap SECS       time cap per steady-state run (default 10)
//!   --live N         live jobs for the replay test (default 100000; 0 skips it)

mod engines;
mod report;
mod sys;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engines::{Kind, Result};
use gearshift_store::JobRecord;

const GROUPS: [usize; 3] = [1, 16, 256];
/// A group marks done the jobs added this many groups earlier.
const DONE_LAG: usize = 4;
const PAYLOAD: usize = 100;

/// One steady-state run.
#[derive(Debug, Clone, Copy)]
pub struct Steady {
    pub jobs: usize,
    pub commits: usize,
    pub secs: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub disk_bytes: u64,
    pub disk_alloc: u64,
    pub wchar: u64,
    pub write_bytes: u64,
}

/// One replay run.
#[derive(Debug, Clone, Copy)]
pub struct Replay {
    pub cold_ms: f64,
    pub warm_ms: f64,
    pub disk_bytes: u64,
    pub build_secs: f64,
}

struct Args {
    dir: PathBuf,
    rounds: usize,
    engines: Vec<Kind>,
    groups: Vec<usize>,
    jobs: Option<usize>,
    cap: Duration,
    live: usize,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"),
        rounds: 5,
        engines: Vec::new(),
        groups: Vec::new(),
        jobs: None,
        cap: Duration::from_secs(10),
        live: 100_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => a.dir = PathBuf::from(val()?),
            "--rounds" => a.rounds = val()?.parse()?,
            "--engine" => {
                let v = val()?;
                let k = Kind::ALL.into_iter().find(|k| k.short() == v);
                a.engines
                    .push(k.ok_or_else(|| format!("unknown engine {v}"))?);
            }
            "--group" => a.groups.push(val()?.parse()?),
            "--jobs" => a.jobs = Some(val()?.parse()?),
            "--cap" => a.cap = Duration::from_secs_f64(val()?.parse()?),
            "--live" => a.live = val()?.parse()?,
            _ => return Err(format!("unknown option {flag} (see the top of main.rs)").into()),
        }
    }
    if a.engines.is_empty() {
        a.engines = Kind::ALL.to_vec();
    }
    if a.groups.is_empty() {
        a.groups = GROUPS.to_vec();
    }
    Ok(a)
}

/// A background job: 100 bytes of payload, 40 bytes of function, unique and
/// handle (12 + 12 + 16).
fn job(id: u64) -> JobRecord {
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (id as usize + i) as u8).collect();
    JobRecord {
        id,
        handle: Bytes::from(format!("H:gs:{id:011}")),
        function: Bytes::from_static(b"bench.resize"),
        unique: Bytes::from(format!("u-{id:010}")),
        priority: 1,
        data: Bytes::from(payload),
        reducer: None,
        due_ms: None,
        attempts: 0,
        created_ms: 1_790_000_000_000 + id,
    }
}

fn fresh_dir(base: &Path, name: &str) -> Result<PathBuf> {
    let dir = base.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Group k adds jobs [kG, (k+1)G) and marks done the jobs of group k-4.
fn steady(kind: Kind, g: usize, max_jobs: usize, cap: Duration, base: &Path) -> Result<Steady> {
    let dir = fresh_dir(base, &format!("steady-{}-{g}", kind.short()))?;
    let all: Vec<JobRecord> = (0..max_jobs as u64).map(job).collect();
    let mut eng = kind.open(&dir)?;
    let mut lat = Vec::with_capacity(max_jobs / g);
    let io0 = sys::proc_io();
    let t0 = Instant::now();
    let mut k = 0;
    while (k + 1) * g <= max_jobs && t0.elapsed() < cap {
        let adds = &all[k * g..(k + 1) * g];
        let dones: Vec<u64> = match k.checked_sub(DONE_LAG) {
            Some(d) => (d * g..(d + 1) * g).map(|i| i as u64).collect(),
            None => Vec::new(),
        };
        let t = Instant::now();
        eng.commit(adds, &dones)?;
        lat.push(t.elapsed());
        k += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    let io1 = sys::proc_io();
    // Size in the steady state, before closing lets SQLite checkpoint and
    // remove its WAL.
    let (disk_bytes, disk_alloc) = sys::dir_size(&dir)?;
    drop(eng);
    std::fs::remove_dir_all(&dir)?;
    lat.sort_unstable();
    Ok(Steady {
        jobs: k * g,
        commits: k,
        secs,
        p50_us: percentile(&lat, 0.50),
        p99_us: percentile(&lat, 0.99),
        disk_bytes,
        disk_alloc,
        wchar: io1.0 - io0.0,
        write_bytes: io1.1 - io0.1,
    })
}

/// Writes `live` jobs (1,000 per commit), closes, then times open + reading
/// every job back: first with the files dropped from the page cache, then warm.
fn replay(kind: Kind, live: usize, base: &Path) -> Result<Replay> {
    let dir = fresh_dir(base, &format!("replay-{}", kind.short()))?;
    let t = Instant::now();
    {
        let mut eng = kind.open(&dir)?;
        let ids: Vec<u64> = (0..live as u64).collect();
        for chunk in ids.chunks(1000) {
            let jobs: Vec<JobRecord> = chunk.iter().map(|&id| job(id)).collect();
            eng.commit(&jobs, &[])?;
        }
    }
    let build_secs = t.elapsed().as_secs_f64();
    let (disk_bytes, _) = sys::dir_size(&dir)?;
    let timed = || -> Result<f64> {
        let t = Instant::now();
        let jobs = kind.replay(&dir)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if jobs.len() != live || jobs.last().map(|j| j.id) != Some(live as u64 - 1) {
            return Err(format!(
                "{}: replayed {} jobs, wanted {live}",
                kind.name(),
                jobs.len()
            )
            .into());
        }
        Ok(ms)
    };
    sys::drop_cache(&dir)?;
    let cold_ms = timed()?;
    let warm_ms = timed()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(Replay {
        cold_ms,
        warm_ms,
        disk_bytes,
        build_secs,
    })
}

fn main() -> Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.dir)?;
    eprintln!("data dir: {}", args.dir.display());
    let mut steady_runs: Vec<(Kind, usize, Steady)> = Vec::new();
    let mut replay_runs: Vec<(Kind, Replay)> = Vec::new();
    let started = Instant::now();
    // Interleaved (a b c a b c ...), and each round starts one engine later,
    // so a noisy neighbour does not always hit the same engine.
    for round in 1..=args.rounds {
        let mut order = args.engines.clone();
        let shift = (round - 1) % order.len();
        order.rotate_left(shift);
        for &g in &args.groups {
            let n = args.jobs.unwrap_or(if g == 1 { 20_000 } else { 200_000 });
            for &kind in &order {
                let s = steady(kind, g, n, args.cap, &args.dir)?;
                eprintln!(
                    "[{:>5.0}s] round {round} G={g:<3} {:<24} {:>9.0} jobs/s {:>7.0} commits/s  p50 {:>7.0} us  p99 {:>7.0} us  disk {:>10} B",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    s.jobs as f64 / s.secs,
                    s.commits as f64 / s.secs,
                    s.p50_us,
                    s.p99_us,
                    s.disk_bytes
                );
                steady_runs.push((kind, g, s));
            }
        }
        if args.live > 0 {
            for &kind in &order {
                let r = replay(kind, args.live, &args.dir)?;
                eprintln!(
                    "[{:>5.0}s] round {round} replay {} live {:<24} cold {:>8.1} ms  warm {:>8.1} ms  disk {:>10} B",
                    started.elapsed().as_secs_f64(),
                    args.live,
                    kind.name(),
                    r.cold_ms,
                    r.warm_ms,
                    r.disk_bytes
                );
                replay_runs.push((kind, r));
            }
        }
    }
    report::print(
        &args.engines,
        &args.groups,
        &steady_runs,
        &replay_runs,
        args.live,
    );
    Ok(())
}
