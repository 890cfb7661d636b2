//! Recurring jobs on virtual time: SUBMIT_JOB_SCHED and config schedules
//! fire one job per firing, skip a firing while their last run is still
//! queued (with a unique), survive a restart through the store without
//! repeating or losing a firing, and are listed and dropped by admin.

mod common;

use bytes::Bytes;
use common::{b, World};
use gearshift_core::schedule::ScheduleSpec;
use gearshift_core::{ScheduleRecord, StoreOp};
use gearshift_proto::{Priority, Request, Response};

const MIN: u64 = 60_000;

fn sched(w: &mut World, n: u64, function: &str, unique: &str, when: [&str; 5]) {
    w.req(
        n,
        Request::SubmitSched(Box::new(gearshift_proto::Sched {
            function: b(function),
            unique: b(unique),
            when: when.map(b),
            data: b("tick"),
        })),
    );
}

fn created(w: &mut World, n: u64) -> Bytes {
    match w.pop(n) {
        Response::JobCreated(h) => h,
        other => panic!("expected JOB_CREATED, got {other:?}"),
    }
}

/// The text of the ERROR with `code` that connection `n` got next.
fn error_of(w: &mut World, n: u64, code: &str) -> String {
    match w.pop(n) {
        Response::Error { code: got, text } if got == b(code) => {
            String::from_utf8_lossy(&text).into_owned()
        }
        other => panic!("expected ERROR {code}, got {other:?}"),
    }
}

fn checked(mut w: World) -> World {
    w.check = true;
    w
}

#[test]
fn a_client_schedule_fires_one_job_per_firing() {
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    sched(&mut w, 1, "report", "", ["*/5", "", "", "", ""]);
    let h = created(&mut w, 1);
    assert_eq!(w.core.next_deadline(), Some(5 * MIN));
    let listing = w.probe("show schedules");
    assert_eq!(
        listing,
        format!(
            "{}\treport\t*/5 * * * *\t1970-01-01T00:05:00.000Z\tclient\t\n.\n",
            String::from_utf8_lossy(&h)
        )
    );
    w.advance_to(5 * MIN - 1);
    assert!(w.status_of("report").is_none_or(|s| s.0 == 0));
    w.advance_to(5 * MIN);
    assert_eq!(w.status_of("report").map(|s| s.0), Some(1));
    w.advance_to(10 * MIN);
    assert_eq!(w.status_of("report").map(|s| s.0), Some(2));
    w.can_do(2, &["report"]);
    assert_eq!(w.grab_data(2), "tick");
    // Late by three periods: one job, then back on the grid.
    w.advance_to(26 * MIN);
    assert_eq!(w.status_of("report").map(|s| s.0), Some(3));
    assert_eq!(w.core.next_deadline(), Some(30 * MIN));
    assert_eq!(
        w.probe(&format!("drop schedule {}", String::from_utf8_lossy(&h))),
        "OK\r\n"
    );
    assert_eq!(w.probe("show schedules"), ".\n");
    w.advance_to(60 * MIN);
    assert_eq!(w.status_of("report").map(|s| s.0), Some(3));
    assert!(w
        .probe("drop schedule H:localhost:999")
        .starts_with("ERR UNKNOWN_SCHEDULE "));
}

#[test]
fn a_unique_keeps_a_queued_run_from_being_queued_twice() {
    let mut w = checked(World::new());
    w.conns(&[1]);
    sched(&mut w, 1, "sync", "only-one", ["*", "*", "*", "*", "*"]);
    created(&mut w, 1);
    for t in 1..=5 {
        w.advance_to(t * MIN);
    }
    assert_eq!(w.status_of("sync").map(|s| s.0), Some(1));
}

#[test]
fn the_protocol_counts_days_from_monday_and_refuses_bad_fields() {
    let mut w = checked(World::new());
    w.conns(&[1]);
    // 1970-01-01 was a Thursday: day 3 counting from Monday = 0.
    sched(&mut w, 1, "f", "", ["0", "12", "", "", "3"]);
    created(&mut w, 1);
    assert_eq!(w.core.next_deadline(), Some(12 * 60 * MIN));
    sched(&mut w, 1, "f", "", ["0", "12", "", "", "6"]);
    created(&mut w, 1);
    let listing = w.probe("show schedules");
    assert!(listing.contains("1970-01-04T12:00:00.000Z"), "{listing}");
    sched(&mut w, 1, "f", "", ["61", "", "", "", ""]);
    let text = error_of(&mut w, 1, "INVALID_ARGUMENT");
    assert!(text.contains("minute"), "{text:?}");
}

#[test]
fn config_schedules_follow_reloads_and_cannot_be_dropped_by_admin() {
    let mut w = checked(World::new());
    w.conns(&[1]);
    let spec = ScheduleSpec {
        cron: "0 * * * *".into(),
        function: b("hourly"),
        unique: Bytes::new(),
        data: b("x"),
        priority: Priority::Low,
    };
    w.core
        .set_config_schedules(vec![spec.clone()])
        .expect("valid");
    let first = w.probe("show schedules");
    assert!(
        first.contains("\thourly\t0 * * * *\t1970-01-01T01:00:00.000Z\tconfig\t"),
        "{first}"
    );
    let handle = first.split('\t').next().unwrap_or("").to_owned();
    assert_eq!(
        w.probe(&format!("drop schedule {handle}")),
        "ERR SCHEDULE_IN_CONFIG remove+it+from+the+config+file+and+reload\r\n"
    );
    // The same spec again (a reload): the same schedule.
    w.core.set_config_schedules(vec![spec]).expect("valid");
    assert_eq!(w.probe("show schedules"), first);
    w.advance_to(60 * MIN);
    // Low priority, as declared.
    assert_eq!(w.probe("prioritystatus"), "hourly\t0\t0\t1\t0\n.\n");
    w.core.set_config_schedules(vec![]).expect("valid");
    assert_eq!(w.probe("show schedules"), ".\n");
    assert!(w
        .core
        .set_config_schedules(vec![ScheduleSpec {
            cron: "* * *".into(),
            function: b("f"),
            unique: Bytes::new(),
            data: Bytes::new(),
            priority: Priority::Normal,
        }])
        .is_err());
}

/// A durable world where connection 1 asked for a schedule every ten
/// minutes, and the record the store was handed for it (not acknowledged).
fn every_ten_minutes_stored() -> (World, ScheduleRecord) {
    let mut w = checked(World::durable());
    w.conns(&[1]);
    sched(&mut w, 1, "f", "", ["*/10", "", "", "", ""]);
    w.quiet(1);
    let rec = std::mem::take(&mut w.store_ops)
        .into_iter()
        .find_map(|op| match op {
            StoreOp::Schedule(s) => Some(s),
            _ => None,
        })
        .expect("the schedule is stored");
    (w, rec)
}

#[test]
fn with_a_durable_store_a_firing_and_its_next_time_are_stored_together() {
    let (mut w, rec) = every_ten_minutes_stored();
    assert_eq!(rec.next_ms, Some(10 * MIN));
    assert!(rec.monday_zero);
    w.persisted(&[rec.id]);
    let h = created(&mut w, 1);
    w.advance_to(10 * MIN);
    let ops = std::mem::take(&mut w.store_ops);
    let next: Vec<Option<u64>> = ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::Schedule(s) => Some(s.next_ms),
            _ => None,
        })
        .collect();
    assert_eq!(next, [Some(20 * MIN)]);
    assert_eq!(
        ops.iter()
            .filter(|op| matches!(op, StoreOp::Add(_)))
            .count(),
        1
    );
    let _ = h;
}

#[test]
fn a_schedule_the_store_cannot_write_is_refused_and_counted() {
    let (mut w, rec) = every_ten_minutes_stored();
    w.persist_failed(&[rec.id], "disk full");
    let text = error_of(&mut w, 1, "QUEUE_ERROR");
    assert!(text.contains("disk full"), "{text:?}");
    assert_eq!(w.core.totals().refused_store, 1);
    // Nothing fires: the schedule is gone.
    w.advance_to(10 * MIN);
    assert!(std::mem::take(&mut w.store_ops).is_empty());
}

#[test]
fn a_restart_fires_a_missed_schedule_once_then_keeps_its_grid() {
    let mut w = checked(World::durable());
    w.now = 95 * MIN;
    w.core.restore(Vec::new(), 1, w.now);
    w.core.restore_schedules(vec![ScheduleRecord {
        id: 7,
        handle: b("H:localhost:7"),
        when: b("*/30 * * * *"),
        monday_zero: false,
        function: b("f"),
        unique: Bytes::new(),
        data: b("d"),
        priority: 1,
        next_ms: Some(30 * MIN),
        from_config: false,
    }]);
    w.store_ops.clear();
    w.advance_to(95 * MIN);
    let adds = w
        .store_ops
        .iter()
        .filter(|op| matches!(op, StoreOp::Add(_)))
        .count();
    assert_eq!(adds, 1, "{:?}", w.store_ops);
    assert_eq!(w.core.next_deadline(), Some(120 * MIN));
    // New handles never reuse the schedule's number.
    w.conns(&[1]);
    w.req(
        1,
        Request::submit(Box::new(common::job_with(
            "g",
            "",
            "x",
            Priority::Normal,
            true,
        ))),
    );
    assert!(w
        .store_ops
        .iter()
        .any(|op| matches!(op, StoreOp::Add(j) if j.id > 7)));
}

#[test]
fn clients_cannot_create_schedules_without_bound() {
    let mut w = World::new();
    w.conns(&[1]);
    for _ in 0..gearshift_core::schedule::MAX_CLIENT_SCHEDULES {
        sched(&mut w, 1, "f", "", ["0", "", "", "", ""]);
    }
    w.clear();
    sched(&mut w, 1, "f", "", ["0", "", "", "", ""]);
    match w.pop(1) {
        Response::Error { code, .. } => assert_eq!(code, b("QUEUE_ERROR")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn epoch_jobs_waiting_for_their_time_are_schedules_and_dropped_as_such() {
    use common::policy::{policy, with_policy};
    use gearshift_core::policy::Reason;
    let mut w = checked(World::new());
    with_policy(&mut w, "retried", policy(3, &[Reason::Fail]));
    w.conns(&[1, 2]);
    sched(&mut w, 1, "report", "", ["*/5", "", "", "", ""]);
    let recurring = created(&mut w, 1);
    let late = w.submit(1, common::epoch_job("later", "u2", "x", 7_200));
    let soon = w.submit(1, common::epoch_job("later", "u1", "y", 3_600));
    // Waiting out a retry delay is no schedule.
    w.can_do(2, &["retried"]);
    w.bg(1, "retried", "", "z");
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    let hs = |h: &Bytes| String::from_utf8_lossy(h).into_owned();
    assert_eq!(
        w.probe("show schedules"),
        format!(
            "{}\treport\t*/5 * * * *\t1970-01-01T00:05:00.000Z\tclient\t\n\
             {}\tlater\tonce\t1970-01-01T01:00:00.000Z\tclient\tu1\n\
             {}\tlater\tonce\t1970-01-01T02:00:00.000Z\tclient\tu2\n.\n",
            hs(&recurring),
            hs(&soon),
            hs(&late)
        )
    );
    // The view lists the soonest and counts them all.
    let v = w.core.schedules_view(1);
    assert_eq!(v.epoch_total, 2);
    let listed: Vec<(Bytes, bool)> = v
        .schedules
        .iter()
        .map(|s| (s.handle.clone(), s.epoch))
        .collect();
    assert_eq!(listed, [(recurring.clone(), false), (soon.clone(), true)]);
    assert_eq!(v.schedules[1].next, Some(3_600_000));
    assert_eq!(v.schedules[1].unique, b("u1"));

    // `drop schedule` of an epoch job cancels it; once, then it is unknown.
    assert_eq!(w.probe(&format!("drop schedule {}", hs(&soon))), "OK\r\n");
    assert!(w.core.job_detail(&soon, false).is_none());
    assert!(w
        .probe(&format!("drop schedule {}", hs(&soon)))
        .starts_with("ERR UNKNOWN_SCHEDULE "));
    assert_eq!(w.core.schedules_view(10).epoch_total, 1);
    // Due, it runs: no longer waiting, no longer listed.
    w.advance_to(7_200_000);
    assert_eq!(w.core.schedules_view(10).epoch_total, 0);
    assert!(w
        .probe(&format!("drop schedule {}", hs(&late)))
        .starts_with("ERR UNKNOWN_SCHEDULE "));
    assert_eq!(w.status_of("later").map(|s| s.0), Some(1));
}
