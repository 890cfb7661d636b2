//! The bridge's counters: jobs claimed and finished, harvests, every bad
//! document and every failed call (logged once each, counted here, and in
//! `/metrics` as `gearshift_etcd_total{event="..."}`).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// Counters shared by the bridge's tasks.
        #[derive(Debug, Default)]
        pub struct Stats {
            $(#[doc = $doc] pub $name: AtomicU64,)*
        }

        impl Stats {
            /// Each counter with its event name.
            fn named(&self) -> Vec<(&'static str, &AtomicU64)> {
                vec![$((stringify!($name), &self.$name)),*]
            }
        }
    };
}

counters! {
    claimed: "Jobs claimed from etcd (a won compare-and-swap).",
    claim_lost: "Claims another worker won first.",
    finished: "Jobs whose FINISHED state was written.",
    retried: "Runs Gearshift's retry policy retried (QUEUED written).",
    fenced: "Writes refused because the job was taken away (harvested).",
    workers_harvested: "Worker entries marked DEAD by this harvester.",
    jobs_harvested: "Jobs put back to QUEUED by this harvester.",
    bad_json: "Documents that are not a JSON object.",
    unknown_state: "Job documents without a known last state.",
    too_big: "Job documents over the size bound, left alone.",
    etcd_errors: "Failed etcd calls (down, no leader, timeouts).",
    etcd_outages: "Times etcd went out of reach (a heartbeat of the bridge's own entry failed).",
    watch_restarts: "Times the job watch was read afresh (reconnect, compaction).",
    gearman_errors: "Failed calls to Gearshift.",
    events_lagged: "Times the bridge fell behind the server's worker events (the registry is resynchronised).",
}

impl Stats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter as Prometheus text.
    pub fn prometheus(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("# HELP gearshift_etcd_total etcd bridge events: jobs claimed, finished, retried, harvested; bad documents; failed calls.\n");
        out.push_str("# TYPE gearshift_etcd_total counter\n");
        for (event, c) in self.named() {
            let _ = writeln!(
                out,
                "gearshift_etcd_total{{event=\"{event}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
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
        Stats::bump(&s.too_big);
        assert!(s.line().contains("too_big=1"));
        let mut out = String::new();
        s.prometheus(&mut out);
        assert!(out.contains("gearshift_etcd_total{event=\"too_big\"} 1\n"));
        assert!(out.contains("gearshift_etcd_total{event=\"claimed\"} 0\n"));
    }
}
