//! Foreground jobs submitted again when their owner closes in order.

use super::tests::{b, client, owner, req, res, seen, Fake};
use super::*;
use gearshift_proto::packet_type::PacketType as T;

/// A foreground job created on owner 1 as `H:1`, the client told.
fn created_on_one(s: &mut Split, own: &Fake, out: &mut Vec<Out>) {
    client(s, own, req(T::SubmitJob, &[b"f@1", b"u", b"x"]), out);
    owner(s, own, 1, res(T::JobCreated, &[b"H:1"]), out);
    assert_eq!(
        seen(out),
        vec![
            (Some(1), T::SubmitJob, b("f@1")),
            (None, T::JobCreated, b("H:1")),
        ]
    );
}

/// `f@1`'s partition moves from `from` to `to`: `from` closes in order,
/// and the view changes.
fn moved(s: &mut Split, own: &mut Fake, from: Owner, to: Option<Owner>, out: &mut Vec<Out>) {
    own.moved.insert(b"f@1", to);
    s.owner_closed(from, own, out);
    s.owners_changed(own, out);
}

#[test]
fn a_foreground_job_outlives_an_orderly_move_under_its_first_handle() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    own.moved.insert(b"f@1", Some(2));
    s.owner_closed(1, &own, &mut out);
    assert!(seen(&mut out).is_empty(), "no WORK_FAIL: it waits");
    s.owners_changed(&own, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::SubmitJob, b("f@1"))]);
    owner(&mut s, &own, 2, res(T::JobCreated, &[b"H:2"]), &mut out);
    assert!(seen(&mut out).is_empty(), "the client has its JOB_CREATED");
    // Its status is asked of the new owner by the new handle.
    client(&mut s, &own, req(T::GetStatus, &[b"H:1"]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::GetStatus, b("H:2"))]);
    let status = [&b"H:2"[..], b"1", b"1", b"0", b"0"];
    owner(&mut s, &own, 2, res(T::StatusRes, &status), &mut out);
    owner(&mut s, &own, 2, res(T::WorkData, &[b"H:2", b"d"]), &mut out);
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
            (None, T::StatusRes, b("H:1")),
            (None, T::WorkData, b("H:1")),
            (None, T::WorkComplete, b("H:1")),
        ]
    );
    assert!(s.drained());
    assert_eq!(s.buffered(), 0, "nothing kept once the job ended");
}

#[test]
fn the_payload_after_the_handle_is_kept_when_renamed() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    moved(&mut s, &mut own, 1, Some(2), &mut out);
    out.clear();
    owner(
        &mut s,
        &own,
        2,
        res(T::JobCreated, &[b"H:2:long"]),
        &mut out,
    );
    owner(
        &mut s,
        &own,
        2,
        res(T::WorkComplete, &[b"H:2:long", b"the result"]),
        &mut out,
    );
    let Some(Out::ToClient(bytes)) = out.pop() else {
        panic!("the completion reaches the client");
    };
    assert_eq!(
        bytes,
        super::packets::packet(
            gearshift_proto::frame::Magic::Res,
            T::WorkComplete,
            &[b"H:1", b"the result"]
        )
    );
}

#[test]
fn a_lost_owner_still_fails_the_job() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    s.owner_lost(1, &own, &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::WorkFail, b("H:1"))]);
    assert!(!s.parked());
    assert_eq!(s.buffered(), 0);
}

#[test]
fn a_job_submitted_again_that_finds_no_owner_fails_as_a_job() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    moved(&mut s, &mut own, 1, None, &mut out);
    assert!(seen(&mut out).is_empty() && s.parked());
    s.give_up_parked(&mut out);
    assert_eq!(seen(&mut out), vec![(None, T::WorkFail, b("H:1"))]);
    assert_eq!(s.buffered(), 0);
    assert!(s.drained());
}

#[test]
fn a_job_submitted_again_to_an_owner_that_goes_too_is_submitted_once_more() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    moved(&mut s, &mut own, 1, Some(2), &mut out);
    owner(&mut s, &own, 2, res(T::JobCreated, &[b"H:2"]), &mut out);
    out.clear();
    moved(&mut s, &mut own, 2, Some(0), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::SubmitJob, b("f@1"))]);
    owner(&mut s, &own, 0, res(T::JobCreated, &[b"H:3"]), &mut out);
    owner(&mut s, &own, 0, res(T::WorkFail, &[b"H:3"]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::WorkFail, b("H:1"))]);
    assert!(s.drained());
    assert_eq!(s.buffered(), 0);
}

#[test]
fn a_foreground_job_handed_over_before_it_ran_is_submitted_again() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    created_on_one(&mut s, &own, &mut out);
    // Owner 1 hands the partition over in place: no close, an ERROR.
    let moved = [JOB_MOVED.as_bytes(), b"H:1"];
    owner(&mut s, &own, 1, res(T::Error, &moved), &mut out);
    assert!(
        seen(&mut out).is_empty(),
        "no WORK_FAIL and no ERROR: it waits"
    );
    own.moved.insert(b"f@1", Some(2));
    s.owners_changed(&own, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::SubmitJob, b("f@1"))]);
    owner(&mut s, &own, 2, res(T::JobCreated, &[b"H:2"]), &mut out);
    owner(
        &mut s,
        &own,
        2,
        res(T::WorkComplete, &[b"H:2", b"r"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::WorkComplete, b("H:1"))]);
    // The old owner's sub-connection still serves the client's other
    // requests: a later reply of its is not taken for the moved job's.
    client(
        &mut s,
        &own,
        req(T::SubmitJob, &[b"g@1", b"", b"y"]),
        &mut out,
    );
    owner(&mut s, &own, 1, res(T::JobCreated, &[b"H:3"]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::SubmitJob, b("g@1")),
            (None, T::JobCreated, b("H:3")),
        ]
    );
}

#[test]
fn a_job_moved_that_the_client_does_not_wait_on_fails() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(
        &mut s,
        &own,
        req(T::SubmitJobBg, &[b"f@1", b"", b"x"]),
        &mut out,
    );
    owner(&mut s, &own, 1, res(T::JobCreated, &[b"H:8"]), &mut out);
    let _ = seen(&mut out);
    let moved = [JOB_MOVED.as_bytes(), b"H:9"];
    owner(&mut s, &own, 1, res(T::Error, &moved), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::WorkFail, b("H:9"))]);
}
