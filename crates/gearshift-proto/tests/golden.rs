//! Golden bytes: the "Binary Protocol Example" of the Gearman protocol
//! reference, byte for byte, plus hand-checked packets for the types the
//! example does not cover (REDUCE, EPOCH, CAN_DO_TIMEOUT, STATUS_RES*,
//! JOB_ASSIGN_ALL, ERROR).
//!
//! Requests are decoded with `decode_frame` + `Request::parse` and compared
//! to the typed value; responses are encoded with `Response::encode` and
//! compared to the exact bytes. Both directions are checked where the
//! encoding is canonical.

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::DEFAULT_MAX_PACKET;
use gearshift_proto::{
    decode_frame, Frame, GrabKind, Magic, Packet, PacketType, Priority, Request, Response, Submit,
};

/// Parses whitespace-separated hex pairs.
fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|p| u8::from_str_radix(p, 16).expect("hex pair"))
        .collect()
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// Decodes exactly one binary frame from `bytes`, which must be consumed whole.
fn decode_one(bytes: &[u8]) -> Packet {
    let mut buf = BytesMut::from(bytes);
    let frame = decode_frame(&mut buf, DEFAULT_MAX_PACKET)
        .expect("valid frame")
        .expect("complete frame");
    assert!(
        buf.is_empty(),
        "frame must consume every byte, {} left",
        buf.len()
    );
    match frame {
        Frame::Packet(p) => p,
        Frame::Text(t) => panic!("expected a binary packet, got text {t:?}"),
    }
}

/// Decodes a request and checks it; also checks that encoding gives the bytes back.
fn check_request(bytes: &str, expected: Request) {
    let bytes = hex(bytes);
    let packet = decode_one(&bytes);
    assert_eq!(packet.magic, Magic::Req);
    assert_eq!(Request::parse(&packet).expect("parses"), expected);
    let mut out = BytesMut::new();
    expected.encode(&mut out);
    assert_eq!(&out[..], &bytes[..], "request encoding of {expected:?}");
}

/// Encodes a response and checks the bytes; also checks that it parses back.
fn check_response(bytes: &str, value: Response) {
    let bytes = hex(bytes);
    let mut out = BytesMut::new();
    value.encode(&mut out);
    assert_eq!(&out[..], &bytes[..], "response encoding of {value:?}");
    let packet = decode_one(&bytes);
    assert_eq!(packet.magic, Magic::Res);
    assert_eq!(Response::parse(&packet).expect("parses"), value);
}

// ---- The reference's "Binary Protocol Example" ----

const CAN_DO_REVERSE: &str = "
    00 52 45 51
    00 00 00 01
    00 00 00 07
    72 65 76 65 72 73 65";
const GRAB_JOB: &str = "
    00 52 45 51
    00 00 00 09
    00 00 00 00";
const NO_JOB: &str = "
    00 52 45 53
    00 00 00 0a
    00 00 00 00";
const PRE_SLEEP: &str = "
    00 52 45 51
    00 00 00 04
    00 00 00 00";
const SUBMIT_JOB: &str = "
    00 52 45 51
    00 00 00 07
    00 00 00 0d
    72 65 76 65 72 73 65 00
    00
    74 65 73 74";
const JOB_CREATED: &str = "
    00 52 45 53
    00 00 00 08
    00 00 00 07
    48 3a 6c 61 70 3a 31";
const NOOP: &str = "
    00 52 45 53
    00 00 00 06
    00 00 00 00";
const JOB_ASSIGN: &str = "
    00 52 45 53
    00 00 00 0b
    00 00 00 14
    48 3a 6c 61 70 3a 31 00
    72 65 76 65 72 73 65 00
    74 65 73 74";
const WORK_COMPLETE_REQ: &str = "
    00 52 45 51
    00 00 00 0d
    00 00 00 0c
    48 3a 6c 61 70 3a 31 00
    74 73 65 74";
const WORK_COMPLETE_RES: &str = "
    00 52 45 53
    00 00 00 0d
    00 00 00 0c
    48 3a 6c 61 70 3a 31 00
    74 73 65 74";

#[test]
fn example_can_do() {
    check_request(CAN_DO_REVERSE, Request::CanDo(b("reverse")));
}

#[test]
fn example_grab_job() {
    check_request(GRAB_JOB, Request::Grab(GrabKind::Plain));
}

#[test]
fn example_no_job() {
    check_response(NO_JOB, Response::NoJob);
}

#[test]
fn example_pre_sleep() {
    check_request(PRE_SLEEP, Request::PreSleep);
}

#[test]
fn example_submit_job() {
    check_request(
        SUBMIT_JOB,
        Request::submit(Box::new(Submit {
            function: b("reverse"),
            unique: Bytes::new(),
            data: b("test"),
            priority: Priority::Normal,
            background: false,
            epoch: None,
            reducer: None,
        })),
    );
}

#[test]
fn example_job_created() {
    check_response(JOB_CREATED, Response::JobCreated(b("H:lap:1")));
}

#[test]
fn example_noop() {
    check_response(NOOP, Response::Noop);
}

#[test]
fn example_job_assign() {
    check_response(
        JOB_ASSIGN,
        Response::JobAssign {
            handle: b("H:lap:1"),
            function: b("reverse"),
            data: b("test"),
        },
    );
}

#[test]
fn example_work_complete_from_worker() {
    check_request(
        WORK_COMPLETE_REQ,
        Request::WorkComplete {
            handle: b("H:lap:1"),
            data: b("tset"),
        },
    );
}

#[test]
fn example_work_complete_to_client() {
    check_response(
        WORK_COMPLETE_RES,
        Response::WorkComplete {
            handle: b("H:lap:1"),
            data: b("tset"),
        },
    );
}

/// The worker's side of the example sent as one stream: every packet comes
/// out in order and nothing is left over.
#[test]
fn example_worker_stream_in_one_buffer() {
    let mut buf = BytesMut::new();
    for part in [
        CAN_DO_REVERSE,
        GRAB_JOB,
        PRE_SLEEP,
        GRAB_JOB,
        WORK_COMPLETE_REQ,
    ] {
        buf.extend_from_slice(&hex(part));
    }
    let mut got = Vec::new();
    while let Some(frame) = decode_frame(&mut buf, DEFAULT_MAX_PACKET).expect("valid stream") {
        let Frame::Packet(p) = frame else {
            panic!("text frame in a binary stream")
        };
        got.push(Request::parse(&p).expect("parses"));
    }
    assert!(buf.is_empty());
    assert_eq!(
        got,
        vec![
            Request::CanDo(b("reverse")),
            Request::Grab(GrabKind::Plain),
            Request::PreSleep,
            Request::Grab(GrabKind::Plain),
            Request::WorkComplete {
                handle: b("H:lap:1"),
                data: b("tset")
            },
        ]
    );
}

/// The server's side of the example, encoded back to back.
#[test]
fn example_server_stream_encoding() {
    let mut out = BytesMut::new();
    Response::NoJob.encode(&mut out);
    Response::JobCreated(b("H:lap:1")).encode(&mut out);
    Response::Noop.encode(&mut out);
    Response::JobAssign {
        handle: b("H:lap:1"),
        function: b("reverse"),
        data: b("test"),
    }
    .encode(&mut out);
    Response::WorkComplete {
        handle: b("H:lap:1"),
        data: b("tset"),
    }
    .encode(&mut out);
    let mut expected = Vec::new();
    for part in [NO_JOB, JOB_CREATED, NOOP, JOB_ASSIGN, WORK_COMPLETE_RES] {
        expected.extend_from_slice(&hex(part));
    }
    assert_eq!(&out[..], &expected[..]);
}

// ---- Packets beyond the example ----

/// FUNC\0UNIQ\0REDUCER\0AGGREGATOR\0DATA: 4 NUL-terminated arguments (the
/// command table is right, PROTOCOL lists 3). The aggregator is dropped.
#[test]
fn submit_reduce_job_with_aggregator() {
    let bytes = hex("00 52 45 51  00 00 00 25  00 00 00 19
         72 65 76 65 72 73 65 00  75 6e 69 71 00  72 65 64 00  61 67 67 00
         74 65 73 74");
    let packet = decode_one(&bytes);
    assert_eq!(packet.kind, PacketType::SubmitReduceJob);
    assert_eq!(
        Request::parse(&packet).expect("parses"),
        Request::submit(Box::new(Submit {
            function: b("reverse"),
            unique: b("uniq"),
            data: b("test"),
            priority: Priority::Normal,
            background: false,
            epoch: None,
            reducer: Some(b("red")),
        }))
    );
}

/// Encoding a reduce job writes an empty aggregator.
#[test]
fn submit_reduce_job_encoding() {
    check_request(
        "00 52 45 51  00 00 00 25  00 00 00 16
         72 65 76 65 72 73 65 00  75 6e 69 71 00  72 65 64 00  00
         74 65 73 74",
        Request::submit(Box::new(Submit {
            function: b("reverse"),
            unique: b("uniq"),
            data: b("test"),
            priority: Priority::Normal,
            background: false,
            epoch: None,
            reducer: Some(b("red")),
        })),
    );
}

#[test]
fn submit_reduce_job_background() {
    check_request(
        "00 52 45 51  00 00 00 26  00 00 00 12
         72 65 76 65 72 73 65 00  00  72 65 64 00  00
         74 65 73 74",
        Request::submit(Box::new(Submit {
            function: b("reverse"),
            unique: Bytes::new(),
            data: b("test"),
            priority: Priority::Normal,
            background: true,
            epoch: None,
            reducer: Some(b("red")),
        })),
    );
}

/// FUNC\0UNIQ\0EPOCH\0DATA: background, normal priority.
#[test]
fn submit_job_epoch() {
    check_request(
        "00 52 45 51  00 00 00 24  00 00 00 1c
         72 65 76 65 72 73 65 00  75 6e 69 71 00
         31 37 30 30 30 30 30 30 30 30 00
         74 65 73 74",
        Request::submit(Box::new(Submit {
            function: b("reverse"),
            unique: b("uniq"),
            data: b("test"),
            priority: Priority::Normal,
            background: true,
            epoch: Some(1_700_000_000),
            reducer: None,
        })),
    );
}

/// FUNC\0TIMEOUT: the timeout is the data part, kept as raw text.
#[test]
fn can_do_timeout() {
    check_request(
        "00 52 45 51  00 00 00 17  00 00 00 0c
         72 65 76 65 72 73 65 00  35 30 30 30",
        Request::CanDoTimeout {
            function: b("reverse"),
            timeout: b("5000"),
        },
    );
}

/// HANDLE\0KNOWN\0RUNNING\0NUM\0DEN.
#[test]
fn status_res() {
    check_response(
        "00 52 45 53  00 00 00 14  00 00 00 0f
         48 3a 6c 61 70 3a 31 00  31 00  30 00  33 00  34",
        Response::StatusRes {
            handle: b("H:lap:1"),
            known: true,
            running: false,
            numerator: 3,
            denominator: 4,
        },
    );
}

/// UNIQ\0KNOWN\0RUNNING\0NUM\0DEN\0WAITING.
#[test]
fn status_res_unique() {
    check_response(
        "00 52 45 53  00 00 00 2a  00 00 00 0e
         75 6e 69 71 00  31 00  31 00  31 00  32 00  32",
        Response::StatusResUnique {
            unique: b("uniq"),
            known: true,
            running: true,
            numerator: 1,
            denominator: 2,
            waiting: 2,
        },
    );
}

/// Unknown handle: every field `0` (verified gearmand behaviour).
#[test]
fn status_res_unknown_handle() {
    check_response(
        "00 52 45 53  00 00 00 14  00 00 00 0f
         48 3a 6c 61 70 3a 39 00  30 00  30 00  30 00  30",
        Response::StatusRes {
            handle: b("H:lap:9"),
            known: false,
            running: false,
            numerator: 0,
            denominator: 0,
        },
    );
}

/// HANDLE\0FUNC\0UNIQ\0REDUCER\0DATA.
#[test]
fn job_assign_all() {
    check_response(
        "00 52 45 53  00 00 00 28  00 00 00 1d
         48 3a 6c 61 70 3a 31 00  72 65 76 65 72 73 65 00  75 6e 69 71 00  72 65 64 00
         74 65 73 74",
        Response::JobAssignAll {
            handle: b("H:lap:1"),
            function: b("reverse"),
            unique: b("uniq"),
            reducer: b("red"),
            data: b("test"),
        },
    );
}

/// HANDLE\0FUNC\0UNIQ\0DATA.
#[test]
fn job_assign_uniq() {
    check_response(
        "00 52 45 53  00 00 00 1f  00 00 00 19
         48 3a 6c 61 70 3a 31 00  72 65 76 65 72 73 65 00  75 6e 69 71 00
         74 65 73 74",
        Response::JobAssignUniq {
            handle: b("H:lap:1"),
            function: b("reverse"),
            unique: b("uniq"),
            data: b("test"),
        },
    );
}

/// CODE\0TEXT.
#[test]
fn error_packet() {
    check_response(
        "00 52 45 53  00 00 00 13  00 00 00 24
         49 4e 56 41 4c 49 44 5f 43 4f 4d 4d 41 4e 44 00
         43 6f 6d 6d 61 6e 64 20 6e 6f 74 20 65 78 70 65 63 74 65 64",
        Response::error("INVALID_COMMAND", "Command not expected"),
    );
}

/// WORK_FAIL is the bare handle, without the trailing NUL of gearmand's
/// EXCEPTION→FAIL downgrade.
#[test]
fn work_fail_to_client() {
    check_response(
        "00 52 45 53  00 00 00 0e  00 00 00 07
         48 3a 6c 61 70 3a 31",
        Response::WorkFail(b("H:lap:1")),
    );
}

/// ECHO_REQ → ECHO_RES: the data is opaque, NULs included.
#[test]
fn echo() {
    check_request(
        "00 52 45 51  00 00 00 10  00 00 00 03  61 00 62",
        Request::Echo(Bytes::from_static(b"a\0b")),
    );
    check_response(
        "00 52 45 53  00 00 00 11  00 00 00 03  61 00 62",
        Response::EchoRes(Bytes::from_static(b"a\0b")),
    );
}

/// Every SUBMIT_* priority/background combination maps to its own number.
#[test]
fn submit_variants_numbers() {
    let cases = [
        (0x07, Priority::Normal, false),
        (0x12, Priority::Normal, true),
        (0x15, Priority::High, false),
        (0x20, Priority::High, true),
        (0x21, Priority::Low, false),
        (0x22, Priority::Low, true),
    ];
    for (number, priority, background) in cases {
        let bytes = format!("00 52 45 51  00 00 00 {number:02x}  00 00 00 05  66 00 75 00 64");
        check_request(
            &bytes,
            Request::submit(Box::new(Submit {
                function: b("f"),
                unique: b("u"),
                data: b("d"),
                priority,
                background,
                epoch: None,
                reducer: None,
            })),
        );
    }
}

/// Wire numbers and names as the reference's packet table (1-36) and
/// gearmand's `protocol.h` (37-42) list them.
#[test]
fn packet_numbers_and_names() {
    let names: Vec<&str> = "\
         CAN_DO CANT_DO RESET_ABILITIES PRE_SLEEP UNUSED NOOP SUBMIT_JOB JOB_CREATED GRAB_JOB \
         NO_JOB JOB_ASSIGN WORK_STATUS WORK_COMPLETE WORK_FAIL GET_STATUS ECHO_REQ ECHO_RES \
         SUBMIT_JOB_BG ERROR STATUS_RES SUBMIT_JOB_HIGH SET_CLIENT_ID CAN_DO_TIMEOUT \
         ALL_YOURS WORK_EXCEPTION OPTION_REQ OPTION_RES WORK_DATA WORK_WARNING GRAB_JOB_UNIQ \
         JOB_ASSIGN_UNIQ SUBMIT_JOB_HIGH_BG SUBMIT_JOB_LOW SUBMIT_JOB_LOW_BG SUBMIT_JOB_SCHED \
         SUBMIT_JOB_EPOCH SUBMIT_REDUCE_JOB SUBMIT_REDUCE_JOB_BACKGROUND GRAB_JOB_ALL \
         JOB_ASSIGN_ALL GET_STATUS_UNIQUE STATUS_RES_UNIQUE"
        .split_whitespace()
        .collect();
    assert_eq!(names.len(), 42);
    for (i, name) in names.iter().enumerate() {
        let n = i as u32 + 1;
        let kind = PacketType::from_u32(n).expect("1..=42 exist");
        assert_eq!(kind.name(), *name, "type {n}");
        assert_eq!(kind.as_u32(), n);
    }
    assert_eq!(PacketType::from_u32(0), None);
    assert_eq!(PacketType::from_u32(names.len() as u32 + 1), None);
}
