//! Functions moving between partitioned nodes on a running core:
//! `hand_over` forgets every trace of the functions leaving without a store
//! op, `hand_over_pending` counts what holds a hand-over up, and
//! `take_over` adopts stored partitions as a restart would, without moving
//! the handle counter.

mod common;

use bytes::Bytes;
use common::durable::{expect_queue_error, get_status, stored};
use common::policy::{policy, with_policy};
use common::{b, epoch_job, job_with, World};
use gearshift_core::policy::Reason;
use gearshift_core::{
    ConnId, DeadMark, FunctionRecord, HandOverPending, JobRecord, ScheduleRecord, StoreOp,
    TakenOver,
};
use gearshift_proto::{Priority, Request, Response};

/// `f` leaves this node; `g` stays.
fn f_only(name: &[u8]) -> bool {
    name == b"f"
}

fn bg(w: &mut World, n: u64, function: &str, data: &str) -> Bytes {
    w.submit(n, job_with(function, "", data, Priority::Normal, true))
}

fn sched(w: &mut World, n: u64, function: &str) {
    w.req(
        n,
        Request::SubmitSched(Box::new(gearshift_proto::Sched {
            function: b(function),
            unique: b(""),
            when: ["*", "*", "*", "*", "*"].map(b),
            data: b("tick"),
        })),
    );
}

/// A checked durable world whose store confirms every write at once, with
/// a retry policy that keeps results on `f`: client 1, worker 2 of f and g.
fn world() -> World {
    let mut w = World::durable();
    w.check = true;
    w.auto_persist = true;
    with_policy(&mut w, "f", policy(2, &[Reason::Fail]));
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g"]);
    w
}

/// In `w`: f has a dead job, a kept result, a job waiting for its retry, a
/// queued one, an epoch job not yet due, a schedule and settings; g has a
/// queued job. Returns g's job's handle; the outboxes and store ops are
/// emptied.
fn every_kind_of_state(w: &mut World) -> Bytes {
    let g = every_kind_of_state_kept(w);
    w.take_store_ops();
    w.clear();
    g
}

/// [`every_kind_of_state`], keeping the store ops.
fn every_kind_of_state_kept(w: &mut World) -> Bytes {
    w.now = 1_000_000;
    let dead = bg(w, 1, "f", "dies");
    assert_eq!(w.grab_job(2).0, dead);
    w.fail(2, &dead);
    w.advance_to(1_001_000);
    assert_eq!(w.grab_job(2).0, dead);
    w.fail(2, &dead);
    let kept = bg(w, 1, "f", "kept");
    assert_eq!(w.grab_job(2).0, kept);
    w.complete(2, &kept, "done");
    let retrying = bg(w, 1, "f", "retries");
    assert_eq!(w.grab_job(2).0, retrying);
    w.fail(2, &retrying);
    bg(w, 1, "f", "queued");
    w.submit(1, epoch_job("f", "", "later", 10_000_000));
    sched(w, 1, "f");
    w.pop(1);
    w.core.set_max_queue(b"f", [0, 50, 0]).expect("f exists");
    w.core.set_paused(b"f", true).expect("f exists");
    let g = bg(w, 1, "g", "stays");
    assert_eq!(w.core.retained_counts(), (1, 1));
    assert_eq!(w.status_of("f"), Some((3, 0, 1)));
    g
}

#[test]
fn hand_over_forgets_every_trace_of_the_gone_functions_and_stores_nothing() {
    let mut w = world();
    let g = every_kind_of_state(&mut w);
    let g_before = w.status_of("g");

    assert_eq!(
        w.core.hand_over(&f_only, w.now),
        3,
        "queued, retrying, epoch"
    );
    w.collect();

    assert_eq!(w.take_store_ops(), vec![], "the new owner's store has them");
    w.all_quiet();
    assert_eq!(w.status_of("f"), None);
    assert_eq!(w.status_of("g"), g_before);
    assert_eq!(w.core.job_count(), 1);
    assert_eq!(w.core.retained_counts(), (0, 0));
    assert_eq!(w.probe("show dead"), ".\n");
    assert_eq!(w.probe("show schedules"), ".\n");
    assert!(
        !w.probe("workers").contains(" f"),
        "worker 2 no longer does f"
    );
    assert!(w.core.functions_view().iter().all(|f| &f.name[..] != b"f"));
    // No timer of f is left: its retry, epoch and schedule timers went too.
    assert_eq!(w.core.next_deadline(), None);
    w.core.check_invariants().expect("consistent");
    // g goes on as before.
    assert_eq!(w.grab_job(2).0, g);
    w.grab_none(2);
    // A later CAN_DO of f starts a fresh function with nothing in it.
    w.can_do(2, &["f"]);
    assert_eq!(w.status_of("f"), Some((0, 0, 1)));
}

#[test]
fn a_function_held_for_its_hand_over_hands_out_nothing_more() {
    let mut w = World::durable();
    w.check = true;
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g"]);
    let running = w.fg(1, "f", "", "runs");
    assert_eq!(w.grab_job(2).0, running);
    w.fg(1, "f", "", "waits");
    let g = w.fg(1, "g", "", "g waits");
    w.all_quiet();
    w.core.hold_for_hand_over(&f_only);
    // f's queued job stays queued; g's is handed out as before.
    assert_eq!(w.grab_job(2).0, g);
    w.grab_none(2);
    w.complete(2, &running, "done");
    w.collect();
    let pending = w.core.hand_over_pending(&f_only);
    assert_eq!((pending.running, pending.foreground), (0, 1));
    assert_eq!(w.core.running_in(&f_only), 0);
    assert_eq!(w.core.running_in(&|n: &[u8]| n == b"g"), 1);
    // Not a pause: nothing is stored, and `status` does not call it paused.
    assert!(w
        .take_store_ops()
        .iter()
        .all(|op| !matches!(op, StoreOp::Function(_))));
    assert!(w.core.functions_view().iter().all(|f| !f.paused));
}

#[test]
fn pending_counts_what_holds_a_hand_over_up_and_running_work_is_lost_silently() {
    let mut w = World::durable();
    w.check = true;
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["f", "g"]);
    let running = w.fg(1, "f", "", "runs");
    assert_eq!(w.grab_job(2).0, running);
    let waiting = w.fg(1, "f", "", "waits");
    w.fg(1, "g", "", "g waits");
    // A background submission the store has not confirmed.
    w.req(
        3,
        Request::submit(Box::new(common::durable::bg("f", "", "x"))),
    );
    w.all_quiet();
    let unacked = HandOverPending {
        running: 1,
        foreground: 1,
        unacked: 1,
    };
    assert_eq!(w.core.hand_over_pending(&f_only), unacked);
    assert_eq!(w.core.running_in(&f_only), 1);
    let g_only = |n: &[u8]| n == b"g";
    let g_pending = HandOverPending {
        foreground: 1,
        ..HandOverPending::default()
    };
    assert_eq!(w.core.hand_over_pending(&g_only), g_pending);
    w.take_store_ops();

    assert_eq!(w.core.hand_over(&f_only, w.now), 3);
    w.collect();

    assert_eq!(w.take_store_ops(), vec![]);
    let mut answered = w.packets(1);
    answered.sort_by_key(|r| format!("{r:?}"));
    // The job that never ran goes back to the client's node to be
    // submitted again; the one that ran fails.
    assert_eq!(
        answered,
        vec![
            Response::error(gearshift_core::split::JOB_MOVED, waiting),
            Response::WorkFail(running.clone()),
        ]
    );
    let text = expect_queue_error(&mut w, 3);
    assert!(text.contains("moved to another node"), "{text}");
    w.quiet(3);
    assert!(w.core.hand_over_pending(&f_only).is_clear());
    assert_eq!(w.core.running_in(&f_only), 0);
    // The worker's result for it gets what any unknown handle gets.
    w.complete(2, &running, "late");
    let late = w.pop(2);
    w.complete(2, &World::h(999), "unknown");
    assert_eq!(late, w.pop(2));
    assert!(matches!(late, Response::Error { .. }), "{late:?}");
    assert_eq!(get_status(&mut w, 1, &running), (false, false));
    // The store's late answer for the moved job changes nothing.
    w.persisted(&[4]);
    w.all_quiet();
    assert_eq!(w.status_of("g"), Some((1, 0, 1)));
}

fn schedule_record(id: u64, function: &str) -> ScheduleRecord {
    ScheduleRecord {
        id,
        handle: Bytes::from(format!("H:other:{id}")),
        when: b("* * * * *"),
        monday_zero: true,
        function: b(function),
        unique: b(""),
        data: b("tick"),
        priority: 1,
        next_ms: Some(2_000_000),
        from_config: false,
    }
}

#[test]
fn take_over_adopts_stored_partitions_under_their_handles_without_moving_the_counter() {
    let mut w = World::durable();
    w.check = true;
    w.auto_persist = true;
    w.now = 1_000_000;
    w.conns(&[1, 2, 3]);
    // Workers of the arriving functions registered first, and sleep.
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.can_do(3, &["p"]);
    w.sleep(3);
    assert_eq!(bg(&mut w, 1, "g", "mine"), World::h(1));
    w.take_store_ops();
    w.all_quiet();

    let big = 7u64 << 32;
    let rec = |id: u64, function: &str| -> JobRecord {
        stored(id, &format!("H:other:{id}"), function, "", Priority::Normal)
    };
    let dead = DeadMark {
        died_ms: 999_000,
        error: b("boom"),
    };
    w.core.take_over(
        TakenOver {
            jobs: vec![rec(big + 5, "f"), rec(big + 6, "f"), rec(big + 7, "p")],
            dead: vec![(rec(big + 1, "f"), dead)],
            schedules: vec![schedule_record(big + 2, "f")],
            kept: vec![],
            functions: vec![FunctionRecord {
                name: b("p"),
                paused: true,
                max_queue: [0, 0, 0],
            }],
            running: vec![big + 6],
        },
        w.now,
    );
    w.collect();

    // The sleeper of f is woken once; p is paused, so its sleeper is not.
    w.expect(2, Response::Noop);
    w.quiet(3);
    w.grab_none(3);
    // The cut-off run counts as lost with its worker and goes back in line
    // by number, as a restart's would.
    let ops = w.take_store_ops();
    assert!(
        ops.contains(&StoreOp::Update {
            id: big + 6,
            attempts: 1
        }),
        "{ops:?}"
    );
    assert_eq!(w.grab_job(2).0, b(&format!("H:other:{}", big + 5)));
    assert_eq!(w.grab_job(2).0, b(&format!("H:other:{}", big + 6)));
    assert!(w
        .probe("show dead")
        .contains(&format!("H:other:{}", big + 1)));
    assert!(w
        .probe("show schedules")
        .contains(&format!("H:other:{}", big + 2)));
    let p = w
        .core
        .functions_view()
        .into_iter()
        .find(|f| &f.name[..] == b"p");
    assert!(p.is_some_and(|p| p.paused), "p's stored settings apply");
    // The counter did not move past the adopted ids.
    assert_eq!(bg(&mut w, 1, "g", "next"), World::h(2));
}

/// What a store holds after replaying `ops`, for the functions `of` names.
fn replay(ops: &[StoreOp], of: &dyn Fn(&[u8]) -> bool) -> TakenOver {
    use std::collections::BTreeMap;
    let mut jobs: BTreeMap<u64, (JobRecord, Option<DeadMark>)> = BTreeMap::new();
    let mut schedules = BTreeMap::new();
    let mut kept = BTreeMap::new();
    let mut functions = BTreeMap::new();
    for op in ops {
        match op.clone() {
            StoreOp::Add(j) => drop(jobs.insert(j.id, (j, None))),
            StoreOp::Done(id) => drop(jobs.remove(&id)),
            StoreOp::Update { id, attempts } => {
                jobs.entry(id).and_modify(|j| j.0.attempts = attempts);
            }
            StoreOp::Retry {
                id,
                attempts,
                due_ms,
            } => {
                jobs.entry(id).and_modify(|j| {
                    (j.0.attempts, j.0.due_ms, j.1) = (attempts, due_ms, None);
                });
            }
            StoreOp::Dead { id, attempts, mark } => {
                jobs.entry(id)
                    .and_modify(|j| (j.0.attempts, j.1) = (attempts, Some(mark)));
            }
            StoreOp::Schedule(r) => drop(schedules.insert(r.id, r)),
            StoreOp::Unschedule(id) => drop(schedules.remove(&id)),
            StoreOp::Kept(r) => drop(kept.insert(r.id, *r)),
            StoreOp::Forget(id) => drop(kept.remove(&id)),
            StoreOp::Function(r) => drop(functions.insert(r.name.clone(), r)),
            StoreOp::Reserve(_) | StoreOp::Started(_) => {}
        }
    }
    let (live, dead): (Vec<_>, Vec<_>) = jobs.into_values().partition(|j| j.1.is_none());
    TakenOver {
        jobs: live
            .into_iter()
            .map(|j| j.0)
            .filter(|j| of(&j.function))
            .collect(),
        dead: (dead.into_iter())
            .filter_map(|(j, m)| m.map(|m| (j, m)))
            .filter(|(j, _)| of(&j.function))
            .collect(),
        schedules: schedules
            .into_values()
            .filter(|r| of(&r.function))
            .collect(),
        kept: kept.into_values().filter(|r| of(&r.function)).collect(),
        functions: functions.into_values().filter(|r| of(&r.name)).collect(),
        running: Vec::new(),
    }
}

#[test]
fn a_hand_over_and_a_take_over_of_the_same_records_bring_the_functions_back() {
    let mut w = world();
    w.store_ops.clear();
    let g = every_kind_of_state_kept(&mut w);
    let ops = w.take_store_ops();
    // Every listing's lines, sorted (functions are listed in id order).
    let listings = |w: &mut World| -> String {
        let all = ["status", "show jobs", "show dead", "show schedules"].map(|l| w.probe(l));
        let mut lines: Vec<&str> = all.iter().flat_map(|t| t.lines()).collect();
        lines.sort_unstable();
        lines.join("\n")
    };
    let before = listings(&mut w);
    let counts = w.core.retained_counts();

    w.core.hand_over(&f_only, w.now);
    w.collect();
    assert_eq!(w.core.job_count(), 1);
    w.core.take_over(replay(&ops, &f_only), w.now);
    w.collect();

    assert_eq!(w.take_store_ops(), vec![], "nothing to write back");
    // Worker 2 gave f up with the hand-over: f has no worker now.
    let before = before.replace("f\t3\t0\t1", "f\t3\t0\t0");
    assert_eq!(listings(&mut w), before);
    assert_eq!(w.core.retained_counts(), counts);
    let f = w
        .core
        .functions_view()
        .into_iter()
        .find(|f| &f.name[..] == b"f");
    assert!(f.is_some_and(|f| f.paused), "f's settings came back");
    w.core.check_invariants().expect("consistent");
    assert_eq!(w.grab_job(2).0, g);
}

#[test]
fn an_entry_is_forgotten_only_when_nothing_of_it_is_left() {
    let mut w = World::new();
    w.check = true;
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    assert!(!w.core.forget_if_empty(b"f"), "a worker holds it");
    w.req(2, Request::CantDo(b("f")));
    w.bg(1, "g", "", "x");
    assert!(!w.core.forget_if_empty(b"g"), "a job waits");
    sched(&mut w, 1, "h");
    w.clear();
    let known = |w: &World, f: &str| w.core.functions_view().iter().any(|v| v.name == b(f));
    assert!(known(&w, "h"));
    assert!(!w.core.forget_if_empty(b"h"), "a schedule fires it");
    assert!(!w.core.forget_if_empty(b"nothing"), "never known");
    assert!(w.core.forget_if_empty(b"f"));
    let names: Vec<Bytes> = w
        .core
        .functions_view()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert!(!names.contains(&b("f")), "{names:?}");
    // Known again on its next use, from nothing.
    w.can_do(2, &["f"]);
    assert!(w.core.functions_view().iter().any(|f| f.name == b("f")));
    w.core.check_invariants().expect("the books still add up");
}

/// A connection's abilities, filtered by name: what a partitioned node
/// forgets once a worker gives up functions served elsewhere.
#[test]
fn a_connections_abilities_are_named_through_a_filter() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g", "h"]);
    let mut names = w.core.abilities_named(ConnId(2), &|f| f != b"g");
    names.sort();
    assert_eq!(names, vec![b("f"), b("h")]);
    assert!(w.core.abilities_named(ConnId(1), &|_| true).is_empty());
    assert!(w.core.abilities_named(ConnId(9), &|_| true).is_empty());
}
