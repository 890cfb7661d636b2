//! The bridge's counters: jobs claimed and finished, harvests, every bad
//! document and every failed call (logged once each, counted here, and in
//! `/metrics` as `gearshift_etcd_total{event="..."}`).

gearshift_client::event_counters! {
    "gearshift_etcd_total",
    "etcd bridge events: jobs claimed, finished, retried, harvested; bad documents; failed calls.";
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
