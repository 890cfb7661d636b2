use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{decode_frame, Frame, Magic};
use gearshift_proto::packet_type::PacketType as T;

use super::packets::packet;
use super::*;

/// Functions named `fN@K` belong to owner K; owner 0 is local.
pub(super) struct Fake {
    all: Vec<Owner>,
    pub(super) moved: HashMap<&'static [u8], Option<Owner>>,
}

impl Fake {
    pub(super) fn new(n: u32) -> Fake {
        Fake {
            all: (0..n).collect(),
            moved: HashMap::new(),
        }
    }
}

impl Owners for Fake {
    fn owner_of(&self, function: &[u8]) -> Option<Owner> {
        if let Some(o) = self.moved.get(function) {
            return *o;
        }
        let at = function.iter().position(|&b| b == b'@')?;
        std::str::from_utf8(&function[at + 1..]).ok()?.parse().ok()
    }
    fn all(&self) -> Vec<Owner> {
        self.all.clone()
    }
    fn local(&self) -> Owner {
        0
    }
}

pub(super) fn req(kind: T, parts: &[&[u8]]) -> BytesMut {
    BytesMut::from(&packet(Magic::Req, kind, parts)[..])
}

pub(super) fn res(kind: T, parts: &[&[u8]]) -> BytesMut {
    BytesMut::from(&packet(Magic::Res, kind, parts)[..])
}

/// The packets in `out`: (destination, type, first argument); None is the client.
pub(super) fn seen(out: &mut Vec<Out>) -> Vec<(Option<Owner>, T, Bytes)> {
    let mut v = Vec::new();
    for o in out.drain(..) {
        let (to, bytes) = match o {
            Out::ToOwner(k, b) => (Some(k), b),
            Out::ToClient(b) => (None, b),
            Out::Close(why) => panic!("closed: {why}"),
        };
        let mut buf = BytesMut::from(&bytes[..]);
        while let Some(f) =
            decode_frame(&mut buf, 1 << 20).expect("the splitter writes whole packets")
        {
            match f {
                Frame::Packet(p) => v.push((to, p.kind, packets::first_arg(&p.body))),
                Frame::Text(t) => v.push((to, T::Unused, t)),
            }
        }
    }
    v
}

pub(super) fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

pub(super) fn client(s: &mut Split, own: &Fake, mut bytes: BytesMut, out: &mut Vec<Out>) {
    s.from_client(&mut bytes, own, out);
    assert!(bytes.is_empty());
}

pub(super) fn owner(s: &mut Split, own: &Fake, k: Owner, mut bytes: BytesMut, out: &mut Vec<Out>) {
    s.from_owner(k, &mut bytes, own, out);
}

#[test]
fn replies_follow_the_clients_order_and_each_owners_order() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    let mut both = req(T::SubmitJob, &[b"a@1", b"u1", b"x"]);
    both.extend_from_slice(&req(T::SubmitJob, &[b"b@2", b"u2", b"y"]));
    client(&mut s, &own, both, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::SubmitJob, b("a@1")),
            (Some(2), T::SubmitJob, b("b@2"))
        ]
    );
    // Owner 2 answers first, and its job even completes: both wait.
    let mut two = res(T::JobCreated, &[b"H:2"]);
    two.extend_from_slice(&res(T::WorkComplete, &[b"H:2", b"r"]));
    owner(&mut s, &own, 2, two, &mut out);
    assert!(seen(&mut out).is_empty());
    owner(&mut s, &own, 1, res(T::JobCreated, &[b"H:1"]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (None, T::JobCreated, b("H:1")),
            (None, T::JobCreated, b("H:2")),
            (None, T::WorkComplete, b("H:2")),
        ]
    );
    // Nothing held now: an asynchronous packet goes straight out.
    owner(&mut s, &own, 1, res(T::WorkData, &[b"H:1", b"d"]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::WorkData, b("H:1"))]);
}

pub(super) fn worker(s: &mut Split, own: &Fake, out: &mut Vec<Out>) {
    let mut abilities = req(T::CanDo, &[b"f@0"]);
    abilities.extend_from_slice(&req(T::CanDo, &[b"g@1"]));
    abilities.extend_from_slice(&req(T::CanDo, &[b"h@2"]));
    client(s, own, abilities, out);
    assert_eq!(
        seen(out),
        vec![
            (Some(0), T::CanDo, b("f@0")),
            (Some(1), T::CanDo, b("g@1")),
            (Some(2), T::CanDo, b("h@2")),
        ]
    );
}

#[test]
fn grab_asks_owners_in_turn_and_work_goes_back_to_the_assigner() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    worker(&mut s, &own, &mut out);
    client(&mut s, &own, req(T::GrabJobUniq, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::GrabJobUniq, b(""))]);
    owner(&mut s, &own, 0, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::GrabJobUniq, b(""))]);
    owner(&mut s, &own, 1, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::GrabJobUniq, b(""))]);
    owner(
        &mut s,
        &own,
        2,
        res(T::JobAssignUniq, &[b"H:9", b"h@2", b"u", b"x"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::JobAssignUniq, b("H:9"))]);
    client(
        &mut s,
        &own,
        req(T::WorkComplete, &[b"H:9", b"done"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(Some(2), T::WorkComplete, b("H:9"))]);
    // The next round starts one owner further on.
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::GrabJob, b(""))]);
    owner(&mut s, &own, 1, res(T::NoJob, &[]), &mut out);
    owner(&mut s, &own, 2, BytesMut::new(), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::GrabJob, b(""))]);
    owner(&mut s, &own, 2, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::GrabJob, b(""))]);
    owner(&mut s, &own, 0, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::NoJob, b(""))]);
}

#[test]
fn a_sleeping_worker_is_woken_once_and_hints_lead_the_next_round() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    worker(&mut s, &own, &mut out);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(0), T::PreSleep, b("")),
            (Some(1), T::PreSleep, b("")),
            (Some(2), T::PreSleep, b("")),
        ]
    );
    owner(&mut s, &own, 2, res(T::Noop, &[]), &mut out);
    owner(&mut s, &own, 1, res(T::Noop, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::Noop, b(""))]);
    // Owners that woke it are asked first; 0, where it still sleeps, is
    // not asked (it NOOPs when it has work).
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::GrabJob, b(""))]);
    owner(&mut s, &own, 1, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::GrabJob, b(""))]);
    // A NOOP while the round is under way is a hint for the next sleep:
    // the worker is told at once instead of sleeping.
    owner(&mut s, &own, 0, res(T::Noop, &[]), &mut out);
    owner(&mut s, &own, 2, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::NoJob, b(""))]);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::Noop, b(""))]);
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::GrabJob, b(""))]);
}

#[test]
fn owners_a_worker_sleeps_at_are_neither_asked_nor_told_again() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    worker(&mut s, &own, &mut out);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(seen(&mut out).len(), 3);
    owner(&mut s, &own, 1, res(T::Noop, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::Noop, b(""))]);
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::GrabJob, b(""))]);
    owner(
        &mut s,
        &own,
        1,
        res(T::JobAssign, &[b"H:1", b"g@1", b"x"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::JobAssign, b("H:1"))]);
    let mut done = req(T::WorkComplete, &[b"H:1", b""]);
    done.extend_from_slice(&req(T::GrabJob, &[]));
    client(&mut s, &own, done, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::WorkComplete, b("H:1")),
            (Some(1), T::GrabJob, b(""))
        ]
    );
    owner(&mut s, &own, 1, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::NoJob, b(""))]);
    // Only 1 woke it up: only 1 hears it sleep again.
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::PreSleep, b(""))]);
    // Woken for nothing (no owner has work): answered here, nothing sent.
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::NoJob, b(""))]);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert!(seen(&mut out).is_empty());
    // A new ability at 0 may find work there that sends no NOOP: 0 is
    // asked again, and told of the next sleep.
    client(&mut s, &own, req(T::CanDo, &[b"k@0"]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::CanDo, b("k@0"))]);
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::GrabJob, b(""))]);
    owner(&mut s, &own, 0, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::NoJob, b(""))]);
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::PreSleep, b(""))]);
    // A lost owner's new sub-connection sleeps nowhere yet.
    s.owner_lost(2, &own, &mut out);
    s.owners_changed(&own, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![(Some(2), T::CanDo, b("h@2")), (Some(2), T::PreSleep, b(""))]
    );
}

#[test]
fn get_status_of_an_unknown_handle_asks_every_owner() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, req(T::GetStatus, &[b"H:x"]), &mut out);
    assert_eq!(seen(&mut out).len(), 3);
    owner(
        &mut s,
        &own,
        0,
        res(T::StatusRes, &[b"H:x", b"0", b"0", b"0", b"0"]),
        &mut out,
    );
    owner(
        &mut s,
        &own,
        2,
        res(T::StatusRes, &[b"H:x", b"1", b"1", b"3", b"4"]),
        &mut out,
    );
    assert!(seen(&mut out).is_empty());
    owner(
        &mut s,
        &own,
        1,
        res(T::StatusRes, &[b"H:x", b"0", b"0", b"0", b"0"]),
        &mut out,
    );
    let got = out.pop();
    assert_eq!(
        got,
        Some(Out::ToClient(packet(
            Magic::Res,
            T::StatusRes,
            &[b"H:x", b"1", b"1", b"3", b"4"]
        )))
    );
}

#[test]
fn a_lost_owner_fails_what_waited_on_it() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    // A foreground job created on 1, a submission waiting there, and a
    // status asked of everyone.
    client(
        &mut s,
        &own,
        req(T::SubmitJob, &[b"a@1", b"", b"x"]),
        &mut out,
    );
    owner(&mut s, &own, 1, res(T::JobCreated, &[b"H:1"]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::SubmitJob, b("a@1")),
            (None, T::JobCreated, b("H:1")),
        ]
    );
    let mut more = req(T::SubmitJob, &[b"a@1", b"", b"y"]);
    more.extend_from_slice(&req(T::GetStatusUnique, &[b"u"]));
    client(&mut s, &own, more, &mut out);
    assert_eq!(seen(&mut out).len(), 4);
    owner(
        &mut s,
        &own,
        0,
        res(T::StatusResUnique, &[b"u", b"0", b"0", b"0", b"0", b"0"]),
        &mut out,
    );
    owner(
        &mut s,
        &own,
        2,
        res(T::StatusResUnique, &[b"u", b"0", b"0", b"0", b"0", b"0"]),
        &mut out,
    );
    s.owner_lost(1, &own, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (None, T::Error, b("QUEUE_ERROR")),
            (None, T::StatusResUnique, b("u")),
            (None, T::WorkFail, b("H:1")),
        ]
    );
    assert!(s.owners_in_use().iter().all(|&o| o != 1));
}

#[test]
fn a_lost_owner_mid_grab_passes_the_round_on() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    worker(&mut s, &own, &mut out);
    client(&mut s, &own, req(T::GrabJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(0), T::GrabJob, b(""))]);
    owner(&mut s, &own, 0, res(T::NoJob, &[]), &mut out);
    assert_eq!(seen(&mut out), vec![(Some(1), T::GrabJob, b(""))]);
    s.owner_lost(1, &own, &mut out);
    assert_eq!(seen(&mut out), vec![(Some(2), T::GrabJob, b(""))]);
    owner(
        &mut s,
        &own,
        2,
        res(T::JobAssign, &[b"H:5", b"h@2", b"x"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::JobAssign, b("H:5"))]);
}

#[test]
fn abilities_client_id_and_sleep_follow_their_functions_owner() {
    let mut own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, req(T::SetClientId, &[b"me"]), &mut out);
    assert!(seen(&mut out).is_empty());
    let mut abilities = req(T::CanDo, &[b"f@0"]);
    abilities.extend_from_slice(&req(T::CanDo, &[b"g@1"]));
    client(&mut s, &own, abilities, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(0), T::SetClientId, b("me")),
            (Some(0), T::CanDo, b("f@0")),
            (Some(1), T::SetClientId, b("me")),
            (Some(1), T::CanDo, b("g@1")),
        ]
    );
    client(&mut s, &own, req(T::PreSleep, &[]), &mut out);
    seen(&mut out);
    // g moves from 1 to a new owner 3: 1 is told, 3 hears the client id,
    // the ability and the sleep.
    own.all.push(3);
    own.moved.insert(b"g@1", Some(3));
    s.owners_changed(&own, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::CantDo, b("g@1")),
            (Some(3), T::SetClientId, b("me")),
            (Some(3), T::CanDo, b("g@1")),
            (Some(3), T::PreSleep, b("")),
        ]
    );
    // Losing 3 and getting it back re-sends the ability.
    s.owner_lost(3, &own, &mut out);
    s.owners_changed(&own, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(3), T::SetClientId, b("me")),
            (Some(3), T::CanDo, b("g@1")),
            (Some(3), T::PreSleep, b("")),
        ]
    );
}

#[test]
fn options_answer_once_and_reach_later_owners() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, req(T::OptionReq, &[b"exceptions"]), &mut out);
    assert_eq!(
        seen(&mut out),
        vec![(Some(0), T::OptionReq, b("exceptions"))]
    );
    owner(
        &mut s,
        &own,
        0,
        res(T::OptionRes, &[b"exceptions"]),
        &mut out,
    );
    assert_eq!(seen(&mut out), vec![(None, T::OptionRes, b("exceptions"))]);
    // A new sub-connection gets the option first; its answer is swallowed.
    client(
        &mut s,
        &own,
        req(T::SubmitJob, &[b"a@1", b"", b"x"]),
        &mut out,
    );
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(1), T::OptionReq, b("exceptions")),
            (Some(1), T::SubmitJob, b("a@1"))
        ]
    );
    let mut two = res(T::OptionRes, &[b"exceptions"]);
    two.extend_from_slice(&res(T::JobCreated, &[b"H:1"]));
    owner(&mut s, &own, 1, two, &mut out);
    assert_eq!(seen(&mut out), vec![(None, T::JobCreated, b("H:1"))]);
}

#[test]
fn a_malformed_packet_closes_the_client() {
    let own = Fake::new(1);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    let mut bad = BytesMut::from(&b"\0REQ\0\0\0\xff\0\0\0\0"[..]);
    s.from_client(&mut bad, &own, &mut out);
    assert!(matches!(out.last(), Some(Out::Close(_))));
    // An oversize packet too.
    let mut s = Split::new(8);
    let mut out = Vec::new();
    s.from_client(
        &mut req(T::SubmitJob, &[b"a@0", b"", b"0123456789"]),
        &own,
        &mut out,
    );
    assert!(matches!(out.last(), Some(Out::Close(_))));
}

/// Random interleavings of the owners' replies never change the order the
/// client gets its replies in.
#[test]
fn replies_keep_the_clients_order_under_any_interleaving() {
    let own = Fake::new(4);
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..200 {
        let mut s = Split::new(1 << 20);
        let mut out = Vec::new();
        let n = 1 + next() % 30;
        // Each owner's queue of replies to send, in its own order.
        let mut queues: Vec<Vec<BytesMut>> = vec![Vec::new(); 4];
        let mut wanted = Vec::new();
        for i in 0..n {
            let k = (next() % 4) as u32;
            let f = format!("f@{k}");
            let h = format!("H:{i}");
            client(
                &mut s,
                &own,
                req(T::SubmitJobBg, &[f.as_bytes(), b"", b"x"]),
                &mut out,
            );
            queues[k as usize].push(res(T::JobCreated, &[h.as_bytes()]));
            wanted.push(b(&h));
        }
        seen(&mut out);
        let mut got = Vec::new();
        while queues.iter().any(|q| !q.is_empty()) {
            let k = (next() % 4) as usize;
            if queues[k].is_empty() {
                continue;
            }
            let r = queues[k].remove(0);
            owner(&mut s, &own, k as u32, r, &mut out);
            got.extend(seen(&mut out).into_iter().map(|(_, _, h)| h));
        }
        assert_eq!(got, wanted);
        assert_eq!(s.buffered(), 0);
    }
}

/// A work result for a job no owner assigned here goes to this node, whose
/// JOB_NOT_FOUND is not taken for the answer to a GRAB waiting there.
#[test]
fn job_not_found_is_not_a_grabs_answer() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, req(T::CanDo, &[b"f@0"]), &mut out);
    let mut two = req(T::WorkComplete, &[b"H:old", b"r"]);
    two.extend_from_slice(&req(T::GrabJob, &[]));
    client(&mut s, &own, two, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (Some(0), T::CanDo, b("f@0")),
            (Some(0), T::WorkComplete, b("H:old")),
            (Some(0), T::GrabJob, b("")),
        ]
    );
    let mut answers = res(T::Error, &[b"JOB_NOT_FOUND", b"no such job"]);
    answers.extend_from_slice(&res(T::NoJob, &[]));
    owner(&mut s, &own, 0, answers, &mut out);
    assert_eq!(
        seen(&mut out),
        vec![
            (None, T::Error, b("JOB_NOT_FOUND")),
            (None, T::NoJob, b(""))
        ]
    );
}

#[test]
fn a_connection_counts_as_what_it_did() {
    let own = Fake::new(2);
    let mut out = Vec::new();
    let mut s = Split::new(1 << 20);
    assert_eq!(s.role(), Role::Client);
    client(&mut s, &own, BytesMut::from(&b"status\n"[..]), &mut out);
    assert_eq!(s.role(), Role::Admin);
    client(&mut s, &own, req(T::EchoReq, &[b"x"]), &mut out);
    assert_eq!(s.role(), Role::Client, "admin text and packets: a client");
    client(&mut s, &own, req(T::CanDo, &[b"f@1"]), &mut out);
    assert_eq!(s.role(), Role::Worker);
    client(&mut s, &own, req(T::CantDo, &[b"f@1"]), &mut out);
    assert_eq!(s.role(), Role::Client);
}
