//! What one scenario measured and whether its check passed, and the two
//! ways to show it: one JSON object per scenario (`--json`, one per line)
//! or a table of every scenario followed by one line per check.

use serde_json::{json, Map, Value};

use crate::bench::config::{Config, Scenario};
use crate::bench::histogram::Histogram;
use crate::bench::load::Tally;
use crate::table::Table;

/// The outcome of one scenario.
#[derive(Debug)]
pub struct Report {
    /// The scenario.
    pub scenario: Scenario,
    /// Jobs (or echoes) that succeeded.
    pub jobs: u64,
    /// Wall-clock seconds of the measured phase.
    pub seconds: f64,
    /// Operations that failed.
    pub errors: u64,
    /// The first distinct error messages.
    pub messages: Vec<String>,
    /// Per-job latency, where it means something.
    pub latency: Option<Histogram>,
    /// What the check found, in words ("100000 queued per admin status").
    pub check: String,
    /// Why the check failed; empty when it passed.
    pub failures: Vec<String>,
    /// Scenario-specific counts for the JSON object.
    pub details: Vec<(&'static str, Value)>,
}

impl Report {
    /// Takes the counts, time and latencies of a load run.
    pub fn record(&mut self, tally: Tally) {
        self.jobs = tally.done;
        self.seconds = tally.elapsed.as_secs_f64();
        self.errors = tally.errors;
        self.messages = tally.messages;
        self.latency = Some(tally.latency);
    }

    /// A report with nothing measured yet.
    pub fn new(scenario: Scenario) -> Report {
        Report {
            scenario,
            jobs: 0,
            seconds: 0.0,
            errors: 0,
            messages: Vec::new(),
            latency: None,
            check: String::new(),
            failures: Vec::new(),
            details: Vec::new(),
        }
    }

    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Jobs per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.jobs as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Records a failed check.
    pub fn fail(&mut self, why: impl Into<String>) {
        self.failures.push(why.into());
    }

    /// Fails the check if any operation failed, quoting the first error.
    pub fn fail_on_errors(&mut self) {
        if self.errors > 0 {
            let first = self.messages.first().map_or("", String::as_str);
            self.fail(format!("{} errors (first: {first})", self.errors));
        }
    }

    /// Latency percentiles in µs: p50, p90, p99, p99.9, max.
    fn percentiles(&self) -> Option<[u64; 5]> {
        let h = self.latency.as_ref().filter(|h| h.len() > 0)?;
        let us = |ns: u64| (ns + 500) / 1000;
        Some([
            us(h.quantile_ns(0.50)),
            us(h.quantile_ns(0.90)),
            us(h.quantile_ns(0.99)),
            us(h.quantile_ns(0.999)),
            us(h.max_ns()),
        ])
    }

    /// The JSON object of this scenario, with the run's settings.
    pub fn to_json(&self, cfg: &Config) -> Value {
        let mut o = Map::new();
        o.insert("scenario".into(), json!(self.scenario.name()));
        o.insert("ok".into(), json!(self.ok()));
        o.insert("jobs".into(), json!(self.jobs));
        o.insert("seconds".into(), json!(round(self.seconds, 4)));
        o.insert("rate".into(), json!(round(self.rate(), 1)));
        let p = self.percentiles();
        for (i, key) in ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"]
            .into_iter()
            .enumerate()
        {
            o.insert(key.into(), p.map_or(Value::Null, |p| json!(p[i])));
        }
        o.insert("errors".into(), json!(self.errors));
        o.insert("check".into(), json!(self.check));
        o.insert("failures".into(), json!(self.failures));
        o.insert("error_messages".into(), json!(self.messages));
        for (k, v) in &self.details {
            o.insert((*k).into(), v.clone());
        }
        let servers: Vec<String> = cfg.servers.iter().map(ToString::to_string).collect();
        o.insert("servers".into(), json!(servers));
        o.insert("function".into(), json!(cfg.function_for(self.scenario)));
        o.insert("clients".into(), json!(cfg.clients));
        o.insert("inflight".into(), json!(cfg.inflight));
        o.insert("workers".into(), json!(cfg.workers_for(self.scenario)));
        o.insert("size".into(), json!(cfg.size));
        o.insert("threads".into(), json!(cfg.threads));
        Value::Object(o)
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// The summary: a table with a row per scenario, then what each check
/// found (and, for a failed one, why).
pub fn render(reports: &[Report]) -> String {
    let mut t = Table::new(&[
        ("SCENARIO", false),
        ("JOBS", true),
        ("SECONDS", true),
        ("JOBS/S", true),
        ("P50 µs", true),
        ("P90 µs", true),
        ("P99 µs", true),
        ("P99.9 µs", true),
        ("MAX µs", true),
        ("ERRORS", true),
        ("CHECK", false),
    ]);
    for r in reports {
        let mut row = vec![
            r.scenario.name().to_owned(),
            r.jobs.to_string(),
            format!("{:.3}", r.seconds),
            format!("{:.0}", r.rate()),
        ];
        match r.percentiles() {
            Some(p) => row.extend(p.iter().map(u64::to_string)),
            None => row.extend(std::iter::repeat_n("-".to_owned(), 5)),
        }
        row.push(r.errors.to_string());
        row.push(if r.ok() { "ok" } else { "FAILED" }.to_owned());
        t.row(row);
    }
    let mut out = t.render();
    out.push('\n');
    for r in reports {
        let verdict = if r.ok() { "ok" } else { "FAILED" };
        let name = r.scenario.name();
        out.push_str(&format!("{name}: {verdict}: {}\n", r.check));
        for f in &r.failures {
            out.push_str(&format!("{name}:   {f}\n"));
        }
    }
    out
}
