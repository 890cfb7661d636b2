//! The bridge's counters: every bad input and every failed call to Redis or
//! Gearshift is logged once and counted here (reported in a log line).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by the bridge's tasks.
#[derive(Debug, Default)]
pub struct Stats {
    /// GearMonkey jobs taken from Redis to run on Gearman workers.
    pub taken: AtomicU64,
    /// Of those, finished and written back.
    pub finished: AtomicU64,
    /// Gearman jobs written to Redis for GearMonkey workers.
    pub given: AtomicU64,
    /// Queue entries that were not an integer id.
    pub bad_id: AtomicU64,
    /// Queue entries naming no job hash, or a hash without `input`.
    pub missing_job: AtomicU64,
    /// Hash fields that were not what the layout says (non-UTF-8 status,
    /// a non-integer dividend).
    pub bad_field: AtomicU64,
    /// Failed Redis calls.
    pub redis_errors: AtomicU64,
    /// Failed calls to Gearshift.
    pub gearman_errors: AtomicU64,
    /// Jobs put back into their GearMonkey queue (recovery, lost Gearshift).
    pub put_back: AtomicU64,
    /// Events of bridged functions from Gearshift's event stream (each
    /// wakes the supervisor).
    pub events: AtomicU64,
}

impl Stats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter as Prometheus text, one family
    /// `gearshift_gearmonkey_total{event="..."}`.
    pub fn prometheus(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("# HELP gearshift_gearmonkey_total GearMonkey bridge events: jobs taken, finished, given, put back; bad input; failed calls.\n");
        out.push_str("# TYPE gearshift_gearmonkey_total counter\n");
        for (event, c) in self.named() {
            let _ = writeln!(
                out,
                "gearshift_gearmonkey_total{{event=\"{event}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
    }

    /// Each counter with its name.
    fn named(&self) -> [(&'static str, &AtomicU64); 10] {
        [
            ("taken", &self.taken),
            ("finished", &self.finished),
            ("given", &self.given),
            ("put_back", &self.put_back),
            ("bad_id", &self.bad_id),
            ("missing_job", &self.missing_job),
            ("bad_field", &self.bad_field),
            ("redis_errors", &self.redis_errors),
            ("gearman_errors", &self.gearman_errors),
            ("events", &self.events),
        ]
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .named()
            .iter()
            .map(|(n, c)| format!("{n}={}", c.load(Ordering::Relaxed)))
            .collect();
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_for_logs_and_prometheus() {
        let s = Stats::default();
        Stats::bump(&s.bad_id);
        assert!(s.line().contains("bad_id=1"));
        let mut out = String::new();
        s.prometheus(&mut out);
        assert!(out.contains("gearshift_gearmonkey_total{event=\"bad_id\"} 1\n"));
        assert!(out.contains("# TYPE gearshift_gearmonkey_total counter\n"));
    }
}
