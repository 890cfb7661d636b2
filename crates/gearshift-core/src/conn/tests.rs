//! Unit tests of the connections' moves.
use super::*;

fn info() -> ConnInfo {
    ConnInfo {
        fd: 3,
        ip: "127.0.0.1".into(),
        port: 0,
        loopback: true,
        rights: Rights::NO_CHANGES,
        node: None,
        identity: None,
    }
}

fn one(id: u64) -> (Conns, ConnId) {
    let mut conns = Conns::default();
    conns.open(ConnId(id), info(), 5);
    (conns, ConnId(id))
}

fn ability(func: FuncId) -> Ability {
    Ability {
        func,
        timeout_ms: None,
    }
}

#[test]
fn open_and_close_give_back_what_a_connection_held_and_waited_on() {
    let (mut conns, c) = one(1);
    assert!(conns.contains(c) && conns.len() == 1);
    conns.add_ability(c, ability(2));
    conns.hold(c, 10);
    conns.wait_on(c, 11);
    let closed = conns.close(c).expect("open");
    assert_eq!(closed.abilities, vec![ability(2)]);
    assert_eq!(closed.held, vec![10]);
    assert!(closed.waiting.contains(&11));
    assert!(conns.is_empty() && conns.close(c).is_none());
}

#[test]
fn add_ability_says_whether_it_is_new_the_first_and_asleep() {
    let (mut conns, c) = one(1);
    let a = conns.add_ability(c, ability(0)).expect("open");
    assert!(a.new && a.first && !a.asleep);
    conns.sleep(c, false);
    let b = conns.add_ability(c, ability(1)).expect("open");
    assert!(b.new && !b.first && b.asleep);
    // Again with a timeout: not new, only moved to the front.
    let again = Ability {
        func: 0,
        timeout_ms: Some(9),
    };
    assert!(!conns.add_ability(c, again).expect("open").new);
    let abilities = conns.get(c).expect("open").abilities();
    assert_eq!(abilities, &[again, ability(1)]);
    assert!(conns.add_ability(ConnId(9), ability(0)).is_none());
}

#[test]
fn drop_abilities_returns_the_dropped_and_restarts_the_round_robin() {
    let (mut conns, c) = one(1);
    for f in 0..3 {
        conns.add_ability(c, ability(f));
    }
    conns.set_cursor(c, 2);
    let dropped = conns.drop_abilities(c, |f| f == 1);
    assert_eq!(dropped, vec![ability(1)]);
    let conn = conns.get(c).expect("open");
    assert_eq!(conn.cursor(), 0);
    assert_eq!(conn.abilities(), &[ability(2), ability(0)]);
    assert_eq!(conns.drop_abilities(c, |_| true).len(), 2);
    assert!(!conns.get(c).expect("open").is_worker());
}

#[test]
fn sleeping_workers_are_nooped_once_and_only_for_their_functions() {
    let (mut conns, c) = one(1);
    conns.add_ability(c, ability(4));
    assert!(!conns.noop(c, 4, false), "awake: nothing to wake");
    conns.sleep(c, false);
    assert!(conns.wakeable_for(c, 4) && !conns.wakeable_for(c, 5));
    assert!(!conns.noop(c, 5, false));
    assert!(conns.noop(c, 4, false));
    assert!(!conns.noop(c, 4, false), "NOOPed already");
    // Its next packet (not GRAB/PRE_SLEEP) puts it back on the wake lists.
    let (rights, enlist) = conns.heard_from(c, 7, false, false, false).expect("open");
    assert_eq!(rights, Rights::NO_CHANGES);
    assert!(enlist);
    assert!(conns.wakeable_for(c, 4));
    assert!(conns.wake(c));
    assert!(!conns.wakeable_for(c, 4));
    assert!(!conns.wake(ConnId(2)));
    // PRE_SLEEP with work waiting: NOOPed at once.
    conns.sleep(c, true);
    assert!(!conns.wakeable_for(c, 4));
}

#[test]
fn heard_from_stamps_the_time_the_role_and_ends_an_exception_pairing() {
    let (mut conns, c) = one(1);
    conns.set_after_exception(c, 3);
    conns.heard_from(c, 9, false, true, true);
    assert_eq!(
        conns.take_after_exception(c),
        Some(3),
        "a WORK_FAIL keeps it"
    );
    conns.set_after_exception(c, 3);
    conns.heard_from(c, 10, false, false, true);
    assert_eq!(conns.take_after_exception(c), None);
    let conn = conns.get(c).expect("open");
    assert_eq!(conn.seen(), (5, 10));
    assert!(conn.admin_only());
    assert_eq!(conns.roles(), (0, 1, 0));
    conns.heard_from(c, 11, false, false, false);
    assert_eq!(conns.roles(), (0, 0, 1));
}

#[test]
fn held_and_waiting_jobs_and_run_counts_move_only_through_methods() {
    let (mut conns, c) = one(1);
    conns.hold(c, 1);
    conns.hold(c, 2);
    conns.let_go(c, 1);
    assert_eq!(conns.get(c).expect("open").held(), &[2]);
    conns.wait_on(c, 8);
    assert!(conns.get(c).expect("open").waits_on(8));
    conns.stop_waiting(c, 8);
    assert_eq!(conns.get(c).expect("open").waiting().count(), 0);
    conns.count_run(c, true);
    conns.count_run(c, false);
    conns.count_run(c, false);
    assert_eq!(conns.get(c).expect("open").runs(), (1, 2));
    assert_eq!(conns.roles(), (1, 0, 0), "holding a job makes it a worker");
}

#[test]
fn options_client_id_and_the_function_hint() {
    let (mut conns, c) = one(1);
    assert!(!conns.wants_exceptions(c));
    conns.set_exceptions(c);
    assert!(conns.wants_exceptions(c));
    assert!(!conns.wants_dead_set(c));
    conns.set_dead_set(c);
    assert!(conns.wants_dead_set(c));
    assert!(!conns.wants_dead_set(ConnId(2)));
    assert_eq!(conns.last_func(c), FuncId::MAX);
    conns.set_last_func(c, 6);
    assert_eq!(conns.last_func(c), 6);
    let conn = conns.get(c).expect("open");
    assert_eq!(conn.event_label(), Bytes::from("3@127.0.0.1"));
    conns.set_client_id(c, Bytes::from_static(b"w1"));
    let conn = conns.get(c).expect("open");
    assert_eq!(conn.label(), Bytes::from("w1@127.0.0.1"));
    assert_eq!(conn.event_label(), Bytes::from("w1"));
}

#[test]
fn output_waits_behind_a_held_answer_and_leaves_in_order() {
    let (mut conns, c) = one(1);
    let text = |s: &'static str| Effect::Text(c, Bytes::from_static(s.as_bytes()));
    assert!(
        conns.hold_output(c, text("a")).is_some(),
        "nothing held: goes out"
    );
    conns.hold_ack(c, 5);
    conns.hold_ack(c, 6);
    assert!(conns.hold_output(c, text("b")).is_none());
    let mut out = Vec::new();
    conns.resolve_ack(c, 6, text("six"), &mut out);
    assert!(out.is_empty(), "job 5's answer still holds the line");
    conns.resolve_ack(c, 5, text("five"), &mut out);
    let said: Vec<_> = out
        .iter()
        .map(|e| match e {
            Effect::Text(_, t) => t.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(said, ["five", "six", "b"]);
    assert!(conns.hold_output(c, text("c")).is_some());
}

#[test]
fn in_order_lists_oldest_first() {
    let mut conns = Conns::default();
    for id in [5, 2, 9] {
        conns.open(ConnId(id), info(), 0);
    }
    let ids: Vec<u64> = conns.in_order().map(|(c, _)| c.0).collect();
    assert_eq!(ids, [2, 5, 9]);
}
