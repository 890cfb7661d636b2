//! Submissions that wait for their partition's owner, and a stopping
//! node's connections finishing what they hold.

use super::park::NOT_OWNER;
use super::tests::{b, client, owner, req, res, seen, Fake};
use super::*;
use gearshift_proto::packet_type::PacketType as T;

#[test]
fn a_submission_nobody_owns_waits_in_its_place_then_is_refused() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    let mut two = req(T::SubmitJobBg, &[b"a@1", b"", b"x"]);
    two.extend_from_slice(&req(T::SubmitJobBg, &[b"nowhere", b"", b"y"]));
    client(&mut s, &own, two, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::SubmitJobBg, b("a@1"))]);
    owner(&mut s, &own, 1, res(T::JobCreated, &[b"H:1"]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::JobCreated, b("H:1"))]);
    assert!(s.parked());
    s.retry_parked(&own, &mut out);
    assert!(out.is_empty() && s.parked(), "still nobody owns it");
    s.give_up_parked(&mut out);
    assert_eq!(seen(&mut out), vec![(None, T::Error, b("QUEUE_ERROR"))]);
    assert!(!s.parked());
    assert_eq!(s.buffered(), 0, "nothing kept once answered");
}

#[test]
fn a_submission_refused_by_a_moving_owner_goes_to_the_new_one() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    let mut two = req(T::SubmitJob, &[b"m@1", b"", b"x"]);
    two.extend_from_slice(&req(T::EchoReq, &[b"after"]));
    client(&mut s, &own, two, &mut out);
    out.clear();
    let refusal = [&b"QUEUE_ERROR"[..], NOT_OWNER.as_bytes()];
    owner(&mut s, &own, 1, res(T::Error, &refusal), &mut out);
    owner(&mut s, &own, 0, res(T::EchoRes, &[b"after"]), &mut out);
    assert!(
        seen(&mut out).is_empty(),
        "the echo waits behind the parked submission"
    );
    own.moved.insert(b"m@1", Some(2));
    s.owners_changed(&own, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::SubmitJob, b("m@1"))]);
    owner(&mut s, &own, 2, res(T::JobCreated, &[b"H:2"]), &mut out);
    owner(
        &mut s,
        &own,
        2,
        res(T::WorkComplete, &[b"H:2", b"r"]),
        &mut out,
    );
    assert_eq!(
        seen(&mut out),
        vec![
            (None, T::JobCreated, b("H:2")),
            (None, T::EchoRes, b("after")),
            (None, T::WorkComplete, b("H:2")),
        ]
    );
    // Another error is the answer, not a reason to wait.
    client(
        &mut s,
        &own,
        req(T::SubmitJobBg, &[b"m@1", b"", b"y"]),
        &mut out,
    );
    out.clear();
    owner(
        &mut s,
        &own,
        2,
        res(T::Error, &[b"QUEUE_ERROR", b"queue full"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::Error, b("QUEUE_ERROR"))]);
    assert!(!s.parked());
}

#[test]
fn an_owner_that_closes_in_order_hands_untaken_submissions_on() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(
        &mut s,
        &own,
        req(T::SubmitJobBg, &[b"c@1", b"u", b"x"]),
        &mut out,
    );
    out.clear();
    s.owner_closed(1, &own, &mut out);
    assert!(
        out.is_empty() && s.parked(),
        "closed in order: it never took the job"
    );
    own.moved.insert(b"c@1", Some(2));
    s.owners_changed(&own, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::SubmitJobBg, b("c@1"))]);
    // A link that broke may have stored it: the client is told instead.
    s.owner_lost(2, &own, &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::Error, b("QUEUE_ERROR"))]);
    assert!(!s.parked());
}

#[test]
fn a_stopping_node_lets_its_worker_finish_and_hands_out_no_more() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    super::tests::worker(&mut s, &own, &mut out);
    out.clear();
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    let asked = seen(&mut out)[0].0.expect("an owner is asked");
    owner(
        &mut s,
        &own,
        asked,
        res(T::JobAssign, &[b"H:1", b"f", b"x"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::JobAssign, b("H:1"))]);
    s.drain();
    assert!(!s.drained(), "the worker holds a job");
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![(None, T::NoJob, b(""))],
        "no owner asked, no sleep passed on"
    );
    client(
        &mut s,
        &own,
        req(T::WorkComplete, &[b"H:1", b"r"]),
        &mut out,
    );
    assert_eq!(
        seen(&mut out),
        vec![(Some(asked), T::WorkComplete, b("H:1"))]
    );
    assert!(s.drained());
}
