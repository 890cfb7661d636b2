//! The bridge's counters: every bad input and every failed call to Redis or
//! Gearshift is logged once and counted here (reported in a log line, and in
//! `/metrics` as `gearshift_gearmonkey_total{event="..."}`).

gearshift_client::event_counters! {
    "gearshift_gearmonkey_total",
    "GearMonkey bridge events: jobs taken, finished, given, put back; bad input; failed calls.";
    taken: "GearMonkey jobs taken from Redis to run on Gearman workers.",
    finished: "Of those, finished and written back.",
    given: "Gearman jobs written to Redis for GearMonkey workers.",
    put_back: "Jobs put back into their GearMonkey queue (recovery, lost Gearshift).",
    bad_id: "Queue entries that were not an integer id.",
    missing_job: "Queue entries naming no job hash, or a hash without `input`.",
    bad_field: "Hash fields that were not what the layout says (non-UTF-8 status, a non-integer dividend).",
    redis_errors: "Failed Redis calls.",
    gearman_errors: "Failed calls to Gearshift.",
    events: "Events of bridged functions from Gearshift's event stream (each wakes the supervisor).",
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
