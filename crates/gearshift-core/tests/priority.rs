//! Which job a worker gets: three priorities, FIFO within one, priority
//! global across all of the worker's functions, and round-robin between
//! functions so none starves.

mod common;

use common::{job_with, World};
use gearshift_proto::{Priority, Request};

fn sub(w: &mut World, f: &str, data: &str, p: Priority) {
    w.submit(1, job_with(f, "", data, p, true));
}

#[test]
fn high_before_normal_before_low_fifo_within_each() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    sub(&mut w, "f", "n1", Priority::Normal);
    sub(&mut w, "f", "l1", Priority::Low);
    sub(&mut w, "f", "h1", Priority::High);
    sub(&mut w, "f", "n2", Priority::Normal);
    sub(&mut w, "f", "l2", Priority::Low);
    sub(&mut w, "f", "h2", Priority::High);
    w.can_do(2, &["f"]);
    let order: Vec<String> = (0..6).map(|_| w.grab_data(2)).collect();
    assert_eq!(order, ["h1", "h2", "n1", "n2", "l1", "l2"]);
    w.grab_none(2);
}

#[test]
fn foreground_and_background_share_the_priority_queues() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.submit(1, job_with("f", "", "a", Priority::Normal, false));
    w.submit(1, job_with("f", "", "b", Priority::Normal, true));
    w.submit(1, job_with("f", "", "c", Priority::Normal, false));
    w.can_do(2, &["f"]);
    let order: Vec<String> = (0..3).map(|_| w.grab_data(2)).collect();
    assert_eq!(order, ["a", "b", "c"]);
}

#[test]
fn priority_is_global_across_a_workers_functions() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    // A's normal and low jobs were all submitted first.
    sub(&mut w, "a", "a-normal", Priority::Normal);
    sub(&mut w, "a", "a-low", Priority::Low);
    sub(&mut w, "b", "b-high", Priority::High);
    sub(&mut w, "b", "b-normal", Priority::Normal);
    // Register in both orders to be sure CAN_DO order does not matter.
    w.can_do(2, &["a", "b"]);
    assert_eq!(w.grab_data(2), "b-high");
    let next: Vec<String> = (0..2).map(|_| w.grab_data(2)).collect();
    let mut sorted = next.clone();
    sorted.sort();
    assert_eq!(sorted, ["a-normal", "b-normal"]);
    assert_eq!(w.grab_data(2), "a-low");
}

#[test]
fn priority_is_global_whatever_the_can_do_order() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    sub(&mut w, "a", "a-normal", Priority::Normal);
    sub(&mut w, "b", "b-high", Priority::High);
    sub(&mut w, "a", "a-high", Priority::High);
    sub(&mut w, "b", "b-low", Priority::Low);
    w.can_do(2, &["b", "a"]);
    let mut highs = vec![w.grab_data(2), w.grab_data(2)];
    highs.sort();
    assert_eq!(highs, ["a-high", "b-high"]);
    assert_eq!(w.grab_data(2), "a-normal");
    assert_eq!(w.grab_data(2), "b-low");
    w.grab_none(2);
    // A worker of only one function never sees the other's jobs.
    sub(&mut w, "b", "b-high-2", Priority::High);
    sub(&mut w, "a", "a-low-2", Priority::Low);
    w.can_do(3, &["a"]);
    assert_eq!(w.grab_data(3), "a-low-2");
    w.grab_none(3);
}

#[test]
fn functions_are_served_round_robin() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    for i in 0..10 {
        sub(&mut w, "a", &format!("a{i}"), Priority::Normal);
    }
    for i in 0..10 {
        sub(&mut w, "b", &format!("b{i}"), Priority::Normal);
    }
    w.can_do(2, &["a", "b"]);
    let order: Vec<String> = (0..20).map(|_| w.grab_data(2)).collect();
    for pair in order.windows(2) {
        assert_ne!(
            pair[0][..1],
            pair[1][..1],
            "no function twice in a row: {order:?}"
        );
    }
    // FIFO within each function.
    let a: Vec<&String> = order.iter().filter(|d| d.starts_with('a')).collect();
    let want: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    assert_eq!(a, want.iter().collect::<Vec<_>>());
}

#[test]
fn round_robin_over_three_functions_with_uneven_queues() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    for i in 0..6 {
        sub(&mut w, "a", &format!("a{i}"), Priority::Normal);
    }
    for i in 0..2 {
        sub(&mut w, "b", &format!("b{i}"), Priority::Normal);
    }
    for i in 0..4 {
        sub(&mut w, "c", &format!("c{i}"), Priority::Normal);
    }
    w.can_do(2, &["a", "b", "c"]);
    let order: Vec<String> = (0..12).map(|_| w.grab_data(2)).collect();
    // Within the first six grabs each function appears exactly twice.
    for f in ["a", "b", "c"] {
        let n = order[..6].iter().filter(|d| d.starts_with(f)).count();
        assert_eq!(n, 2, "{f} in {order:?}");
    }
    // Once b runs out, a and c alternate.
    let rest: Vec<&String> = order[6..10].iter().collect();
    for pair in rest.windows(2) {
        assert_ne!(pair[0][..1], pair[1][..1], "{order:?}");
    }
    w.grab_none(2);
}

#[test]
fn grab_with_no_abilities_or_no_jobs_is_no_job() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    sub(&mut w, "f", "x", Priority::High);
    w.grab_none(2);
    w.can_do(2, &["g"]);
    w.grab_none(2);
    w.req(2, Request::CantDo(common::b("g")));
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_data(2), "x");
}

#[test]
fn prioritystatus_counts_queued_jobs_per_priority() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    sub(&mut w, "f", "h", Priority::High);
    sub(&mut w, "f", "n1", Priority::Normal);
    sub(&mut w, "f", "n2", Priority::Normal);
    sub(&mut w, "f", "l", Priority::Low);
    w.can_do(2, &["f"]);
    assert_eq!(w.probe("prioritystatus"), "f\t1\t2\t1\t1\n.\n");
    w.grab_job(2);
    // Running jobs are not queued.
    assert_eq!(w.probe("prioritystatus"), "f\t0\t2\t1\t1\n.\n");
    assert_eq!(w.status_of("f"), Some((4, 1, 1)));
}
