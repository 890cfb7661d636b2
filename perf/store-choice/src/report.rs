//! Markdown tables of medians (with min..max over the rounds) on stdout.

use crate::engines::Kind;
use crate::{Replay, Steady};

/// "median (min..max)" of the values, formatted with `f`.
fn stat(mut v: Vec<f64>, f: impl Fn(f64) -> String) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    if n == 1 {
        f(median)
    } else {
        format!("{} ({}..{})", f(median), f(v[0]), f(v[n - 1]))
    }
}

fn int(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn kib(x: f64) -> String {
    format!("{:.0} KiB", x / 1024.0)
}

fn ms(x: f64) -> String {
    format!("{x:.0}")
}

pub fn print(
    engines: &[Kind],
    groups: &[usize],
    steady: &[(Kind, usize, Steady)],
    replay: &[(Kind, Replay)],
    live: usize,
) {
    for &g in groups {
        let runs = |k: Kind| {
            steady
                .iter()
                .filter(move |r| r.0 == k && r.1 == g)
                .map(|r| r.2)
        };
        let n = runs(engines[0]).count();
        println!("\n### G = {g} ({n} runs each; median (min..max))\n");
        println!("| engine | jobs/run | jobs/s | commits/s | commit p50 µs | commit p99 µs |");
        println!("|---|---|---|---|---|---|");
        for &k in engines {
            let col = |f: &dyn Fn(&Steady) -> f64| runs(k).map(|s| f(&s)).collect::<Vec<_>>();
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                k.name(),
                stat(col(&|s| s.jobs as f64), int),
                stat(col(&|s| s.jobs as f64 / s.secs), int),
                stat(col(&|s| s.commits as f64 / s.secs), int),
                stat(col(&|s| s.p50_us), int),
                stat(col(&|s| s.p99_us), int),
            );
        }
        println!("\n| engine | on disk at end (apparent) | allocated | written to write() per job, B | sent to storage per job, B |");
        println!("|---|---|---|---|---|");
        for &k in engines {
            let col = |f: &dyn Fn(&Steady) -> f64| runs(k).map(|s| f(&s)).collect::<Vec<_>>();
            println!(
                "| {} | {} | {} | {} | {} |",
                k.name(),
                stat(col(&|s| s.disk_bytes as f64), kib),
                stat(col(&|s| s.disk_alloc as f64), kib),
                stat(col(&|s| s.wchar as f64 / s.jobs as f64), int),
                stat(col(&|s| s.write_bytes as f64 / s.jobs as f64), int),
            );
        }
    }
    if replay.is_empty() {
        return;
    }
    let n = replay.iter().filter(|r| r.0 == engines[0]).count();
    println!(
        "\n### Replay of {} live jobs ({n} runs each; median (min..max))\n",
        int(live as f64)
    );
    println!("| engine | open + read all, cold cache, ms | same, warm cache, ms | on disk | bytes per live job | build (1,000 jobs/commit), s |");
    println!("|---|---|---|---|---|---|");
    for &k in engines {
        let col = |f: &dyn Fn(&Replay) -> f64| {
            replay
                .iter()
                .filter(|r| r.0 == k)
                .map(|r| f(&r.1))
                .collect::<Vec<_>>()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            k.name(),
            stat(col(&|r| r.cold_ms), ms),
            stat(col(&|r| r.warm_ms), ms),
            stat(col(&|r| r.disk_bytes as f64), kib),
            stat(col(&|r| r.disk_bytes as f64 / live as f64), int),
            stat(col(&|r| r.build_secs), |x| format!("{x:.2}")),
        );
    }
}
