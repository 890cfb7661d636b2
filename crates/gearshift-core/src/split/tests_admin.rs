//! Admin lines through the splitter: who is asked, and the merged reply.

use bytes::BytesMut;

use super::admin::{ERR_NO_OWNER, ERR_OWNER_LOST};
use super::tests::{client, owner, Fake};
use super::*;

fn text(s: &str) -> BytesMut {
    BytesMut::from(s.as_bytes())
}

/// What went to the client, as one byte string.
fn to_client(out: &mut Vec<Out>) -> Vec<u8> {
    let mut v = Vec::new();
    for o in out.drain(..) {
        match o {
            Out::ToClient(b) => v.extend_from_slice(&b),
            Out::ToOwner(..) => {}
            Out::Close(why) => panic!("closed: {why}"),
        }
    }
    v
}

/// The owners `line` was sent to.
fn asked(out: &[Out], line: &str) -> Vec<Owner> {
    out.iter()
        .filter_map(|o| match o {
            Out::ToOwner(k, b) if b[..] == *line.as_bytes() => Some(*k),
            _ => None,
        })
        .collect()
}

#[test]
fn lists_are_asked_of_every_owner_and_joined_in_owner_order() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("status\r\n"), &mut out);
    assert_eq!(asked(&out, "status\n"), vec![0, 1, 2]);
    out.clear();
    owner(&mut s, &own, 2, text("f@2\t1\t0\t0\n.\n"), &mut out);
    // Half of owner 0's list: nothing is released until every list ends.
    owner(&mut s, &own, 0, text("f@0\t0\t0\t1\n"), &mut out);
    owner(&mut s, &own, 1, text(".\n"), &mut out);
    assert!(to_client(&mut out).is_empty());
    owner(&mut s, &own, 0, text(".\n"), &mut out);
    assert_eq!(
        to_client(&mut out),
        b"f@0\t0\t0\t1\nf@2\t1\t0\t0\n.\n".to_vec()
    );
}

#[test]
fn a_status_line_comes_from_the_function_s_owner_only() {
    // Owner 0 still lists f@1 (a worker's CAN_DO raced a move); owner 1
    // owns it. Other lists are joined whole.
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    for line in ["status\r\n", "prioritystatus\r\n"] {
        client(&mut s, &own, text(line), &mut out);
        out.clear();
        owner(
            &mut s,
            &own,
            0,
            text("f@0\t1\t0\t1\nf@1\t0\t0\t0\nnone\t0\t0\t0\n.\n"),
            &mut out,
        );
        owner(&mut s, &own, 1, text("f@1\t2\t1\t1\n.\n"), &mut out);
        assert_eq!(
            to_client(&mut out),
            b"f@0\t1\t0\t1\nnone\t0\t0\t0\nf@1\t2\t1\t1\n.\n".to_vec(),
            "{line}"
        );
    }
    client(&mut s, &own, text("show jobs\r\n"), &mut out);
    out.clear();
    owner(&mut s, &own, 0, text("H:a:1\t0\t0\t1\n.\n"), &mut out);
    owner(&mut s, &own, 1, text(".\n"), &mut out);
    assert_eq!(to_client(&mut out), b"H:a:1\t0\t0\t1\n.\n".to_vec());
}

#[test]
fn a_handle_is_answered_by_the_owner_that_knows_it() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("cancel job H:x:1\n"), &mut out);
    assert_eq!(asked(&out, "cancel job H:x:1\n"), vec![0, 1, 2]);
    owner(&mut s, &own, 0, text("ERR UNKNOWN_JOB\r\n"), &mut out);
    owner(&mut s, &own, 2, text("ERR UNKNOWN_JOB\r\n"), &mut out);
    owner(&mut s, &own, 1, text("OK\r\n"), &mut out);
    assert_eq!(to_client(&mut out), b"OK\r\n".to_vec());
    client(&mut s, &own, text("show job H:x:2\n"), &mut out);
    out.clear();
    for k in 0..3 {
        let unknown = "ERR UNKNOWN_JOB job+not+found+or+expired\r\n";
        owner(&mut s, &own, k, text(unknown), &mut out);
    }
    assert_eq!(
        to_client(&mut out),
        b"ERR UNKNOWN_JOB job+not+found+or+expired\r\n".to_vec()
    );
}

#[test]
fn a_function_is_asked_of_its_owner_only() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("pause f@2\n"), &mut out);
    assert_eq!(asked(&out, "pause f@2\n"), vec![2]);
    out.clear();
    // Nobody owns this one: answered at once, after the pause's reply.
    client(&mut s, &own, text("maxqueue nobody 3\n"), &mut out);
    assert!(to_client(&mut out).is_empty());
    owner(&mut s, &own, 2, text("OK\r\n"), &mut out);
    let mut want = b"OK\r\n".to_vec();
    want.extend_from_slice(ERR_NO_OWNER);
    assert_eq!(to_client(&mut out), want);
}

#[test]
fn dead_set_counts_are_summed() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("retry dead all\n"), &mut out);
    out.clear();
    owner(&mut s, &own, 0, text("OK 2\r\n"), &mut out);
    owner(&mut s, &own, 1, text("OK 0\r\n"), &mut out);
    owner(&mut s, &own, 2, text("OK 5\r\n"), &mut out);
    assert_eq!(to_client(&mut out), b"OK 7\r\n".to_vec());
}

#[test]
fn an_error_instead_of_a_list_is_the_reply() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("show dead\n"), &mut out);
    out.clear();
    let denied = "ERR PERMISSION_DENIED admin+commands+are+not+allowed+from+this+peer\r\n";
    owner(&mut s, &own, 0, text(denied), &mut out);
    owner(&mut s, &own, 1, text(denied), &mut out);
    assert_eq!(to_client(&mut out), denied.as_bytes().to_vec());
}

#[test]
fn a_lost_owner_leaves_the_others_answers() {
    let own = Fake::new(3);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("workers\n"), &mut out);
    client(&mut s, &own, text("drop function f@1\n"), &mut out);
    out.clear();
    owner(&mut s, &own, 0, text("1 127.0.0.1 - : f@0\n.\n"), &mut out);
    // Owner 1 sent half its list, then went away.
    owner(&mut s, &own, 1, text("2 127.0.0.1 - : f@1\n"), &mut out);
    owner(&mut s, &own, 2, text(".\n"), &mut out);
    s.owner_lost(1, &own, &mut out);
    let mut want = b"1 127.0.0.1 - : f@0\n.\n".to_vec();
    want.extend_from_slice(ERR_OWNER_LOST);
    assert_eq!(to_client(&mut out), want);
}

#[test]
fn replies_to_lines_and_packets_keep_the_clients_order() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    let mut echo = BytesMut::from(
        &packets::packet(
            gearshift_proto::frame::Magic::Req,
            gearshift_proto::packet_type::PacketType::EchoReq,
            &[b"hi"],
        )[..],
    );
    client(&mut s, &own, text("version\n"), &mut out);
    client(&mut s, &own, echo.split(), &mut out);
    out.clear();
    let echoed = packets::packet(
        gearshift_proto::frame::Magic::Res,
        gearshift_proto::packet_type::PacketType::EchoRes,
        &[b"hi"],
    );
    // The local owner answers both, in order; the version line first.
    let mut both = BytesMut::from(&b"OK 1.0\n"[..]);
    both.extend_from_slice(&echoed);
    owner(&mut s, &own, 0, both, &mut out);
    let mut want = b"OK 1.0\n".to_vec();
    want.extend_from_slice(&echoed);
    assert_eq!(to_client(&mut out), want);
}

#[test]
fn too_many_words_close_the_connection() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("a b c d e f\n"), &mut out);
    assert!(matches!(out.last(), Some(Out::Close(_))));
}

#[test]
fn a_client_on_several_owners_is_one_workers_line() {
    let own = Fake::new(2);
    let mut s = Split::new(1 << 20);
    let mut out = Vec::new();
    client(&mut s, &own, text("workers\n"), &mut out);
    out.clear();
    owner(
        &mut s,
        &own,
        0,
        text("5001 127.0.0.1 w1 : a@0 c@0\n5003 127.0.0.1 - :\n.\n"),
        &mut out,
    );
    owner(
        &mut s,
        &own,
        1,
        text("5001 127.0.0.1 w1 : b@1\n5002 10.0.0.2 - : b@1\n5003 127.0.0.1 - :\n.\n"),
        &mut out,
    );
    assert_eq!(
        to_client(&mut out),
        b"5001 127.0.0.1 w1 : a@0 c@0 b@1\n5003 127.0.0.1 - :\n5002 10.0.0.2 - : b@1\n.\n".to_vec()
    );
}
