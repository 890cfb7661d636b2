//! Every error path of the protocol layer: framing errors (fatal) and
//! request errors (answered with ERROR), plus a fuzz-style property that
//! decoding and parsing never panic on arbitrary bytes.

use bytes::{BufMut, Bytes, BytesMut};
use gearshift_proto::frame::{DEFAULT_MAX_PACKET, MAX_TEXT_LINE};
use gearshift_proto::packet_type::MAX_PACKET_TYPE;
use gearshift_proto::{
    decode_frame, parse_admin, Frame, FrameError, Magic, Packet, PacketType, Request, RequestError,
    Response,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn header(magic: &[u8; 4], kind: u32, size: u32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_slice(magic);
    b.put_u32(kind);
    b.put_u32(size);
    b
}

fn decode(bytes: &[u8], max: usize) -> Result<Option<Frame>, FrameError> {
    decode_frame(&mut BytesMut::from(bytes), max)
}

fn packet(magic: Magic, kind: PacketType, body: &'static [u8]) -> Packet {
    Packet {
        magic,
        kind,
        body: Bytes::from_static(body),
    }
}

fn all_types() -> impl Iterator<Item = PacketType> {
    (1..=MAX_PACKET_TYPE).map(|n| PacketType::from_u32(n).expect("1..=42 exist"))
}

/// Types only a server sends, or that no server implements.
const NOT_FOR_SERVER: [PacketType; 13] = [
    PacketType::Unused,
    PacketType::Noop,
    PacketType::JobCreated,
    PacketType::NoJob,
    PacketType::JobAssign,
    PacketType::EchoRes,
    PacketType::Error,
    PacketType::StatusRes,
    PacketType::AllYours,
    PacketType::OptionRes,
    PacketType::JobAssignUniq,
    PacketType::JobAssignAll,
    PacketType::StatusResUnique,
];

/// A body with enough NUL separators for any layout.
const MANY_ARGS: &[u8] = b"a\0b\0c\0d\0e\0f\0g\0h\0i";

// ---- Framing: bad magic ----

#[test]
fn bad_magic_full_header() {
    for magic in [b"\0REX", b"\0res", b"\0\0\0\0", b"\0RQE", b"\0SEQ"] {
        let h = header(magic, 1, 0);
        assert_eq!(
            decode(&h, DEFAULT_MAX_PACKET),
            Err(FrameError::BadMagic(*magic))
        );
    }
}

#[test]
fn bad_magic_detected_from_a_partial_prefix() {
    assert_eq!(
        decode(b"\0X", 100),
        Err(FrameError::BadMagic([0, b'X', 0, 0]))
    );
    assert_eq!(
        decode(b"\0RX", 100),
        Err(FrameError::BadMagic([0, b'R', b'X', 0]))
    );
    // Four bytes of magic, header still incomplete.
    assert_eq!(decode(b"\0REZ", 100), Err(FrameError::BadMagic(*b"\0REZ")));
    assert_eq!(
        decode(b"\0REZ\0\0\0", 100),
        Err(FrameError::BadMagic(*b"\0REZ"))
    );
}

#[test]
fn valid_magic_prefixes_wait_for_more() {
    for magic in [b"\0REQ", b"\0RES"] {
        let full = header(magic, 7, 0);
        for cut in 1..full.len() {
            let mut buf = BytesMut::from(&full[..cut]);
            assert_eq!(
                decode_frame(&mut buf, 100),
                Ok(None),
                "prefix of {cut} bytes"
            );
            assert_eq!(buf.len(), cut, "an incomplete frame consumes nothing");
        }
    }
}

// ---- Framing: packet type ----

#[test]
fn unknown_types() {
    for magic in [b"\0REQ", b"\0RES"] {
        for n in [0, MAX_PACKET_TYPE + 1, 100, u32::MAX] {
            let h = header(magic, n, 0);
            assert_eq!(
                decode(&h, DEFAULT_MAX_PACKET),
                Err(FrameError::UnknownType(n))
            );
        }
    }
}

/// The type is judged as soon as the header is complete, before the body.
#[test]
fn unknown_type_before_body() {
    let h = header(b"\0REQ", 43, 1000);
    assert_eq!(
        decode(&h, DEFAULT_MAX_PACKET),
        Err(FrameError::UnknownType(43))
    );
}

#[test]
fn every_known_type_frames() {
    for n in 1..=MAX_PACKET_TYPE {
        let mut h = header(b"\0REQ", n, 3);
        h.put_slice(b"a\0b");
        let Ok(Some(Frame::Packet(p))) = decode(&h, DEFAULT_MAX_PACKET) else {
            panic!("type {n} must frame");
        };
        assert_eq!(p.kind.as_u32(), n);
        assert_eq!(&p.body[..], b"a\0b");
    }
}

// ---- Framing: body size ----

#[test]
fn too_large_is_judged_on_the_header_alone() {
    let h = header(b"\0REQ", 16, 11);
    assert_eq!(
        decode(&h, 10),
        Err(FrameError::TooLarge { size: 11, max: 10 })
    );
    let h = header(b"\0REQ", 16, u32::MAX);
    assert_eq!(
        decode(&h, DEFAULT_MAX_PACKET),
        Err(FrameError::TooLarge {
            size: u32::MAX as usize,
            max: DEFAULT_MAX_PACKET
        })
    );
}

#[test]
fn body_of_exactly_max_is_accepted() {
    let mut h = header(b"\0REQ", 16, 10);
    assert_eq!(decode(&h, 10), Ok(None));
    h.put_slice(b"0123456789");
    let Ok(Some(Frame::Packet(p))) = decode(&h, 10) else {
        panic!("must frame")
    };
    assert_eq!(
        Request::parse(&p),
        Ok(Request::Echo(Bytes::from_static(b"0123456789")))
    );
}

#[test]
fn zero_max_allows_only_empty_bodies() {
    assert!(matches!(
        decode(&header(b"\0REQ", 9, 0), 0),
        Ok(Some(Frame::Packet(_)))
    ));
    assert_eq!(
        decode(&header(b"\0REQ", 9, 1), 0),
        Err(FrameError::TooLarge { size: 1, max: 0 })
    );
}

// ---- Framing: text lines ----

#[test]
fn text_line_limit() {
    // 8191 bytes without newline: still waiting.
    assert_eq!(decode(&vec![b'a'; MAX_TEXT_LINE - 1], 100), Ok(None));
    // 8192 bytes without newline: too long.
    assert_eq!(
        decode(&vec![b'a'; MAX_TEXT_LINE], 100),
        Err(FrameError::TextLineTooLong)
    );
    assert_eq!(
        decode(&vec![b'a'; MAX_TEXT_LINE + 500], 100),
        Err(FrameError::TextLineTooLong)
    );
    // 8191 bytes + '\n' fit exactly (the terminator counts).
    let mut line = vec![b'a'; MAX_TEXT_LINE - 1];
    line.push(b'\n');
    let Ok(Some(Frame::Text(t))) = decode(&line, 100) else {
        panic!("line fits")
    };
    assert_eq!(t.len(), MAX_TEXT_LINE - 1);
    // 8190 bytes + "\r\n" fit too, the '\r' is stripped.
    let mut line = vec![b'a'; MAX_TEXT_LINE - 2];
    line.extend_from_slice(b"\r\n");
    let Ok(Some(Frame::Text(t))) = decode(&line, 100) else {
        panic!("line fits")
    };
    assert_eq!(t.len(), MAX_TEXT_LINE - 2);
    // 8192 bytes + '\n': the newline is past the limit.
    let mut line = vec![b'a'; MAX_TEXT_LINE];
    line.push(b'\n');
    assert_eq!(decode(&line, 100), Err(FrameError::TextLineTooLong));
}

#[test]
fn short_line_then_overlong_line() {
    let mut buf = BytesMut::from(&b"status\n"[..]);
    buf.extend_from_slice(&vec![b'x'; MAX_TEXT_LINE]);
    assert_eq!(
        decode_frame(&mut buf, 100),
        Ok(Some(Frame::Text(Bytes::from_static(b"status"))))
    );
    assert_eq!(
        decode_frame(&mut buf, 100),
        Err(FrameError::TextLineTooLong)
    );
}

#[test]
fn empty_buffer_and_empty_line() {
    assert_eq!(decode(b"", 100), Ok(None));
    assert_eq!(decode(b"\n", 100), Ok(Some(Frame::Text(Bytes::new()))));
    assert_eq!(decode(b"\r\n", 100), Ok(Some(Frame::Text(Bytes::new()))));
}

#[test]
fn frame_error_messages() {
    assert_eq!(
        FrameError::UnknownType(43).to_string(),
        "unknown packet type 43"
    );
    assert_eq!(
        FrameError::TooLarge { size: 11, max: 10 }.to_string(),
        "packet body of 11 bytes exceeds the maximum of 10"
    );
    assert!(FrameError::TextLineTooLong.to_string().contains("8192"));
}

// ---- Request errors ----

#[test]
fn response_magic_is_refused_for_every_type() {
    for kind in all_types() {
        let err = Request::parse(&packet(Magic::Res, kind, MANY_ARGS)).expect_err("RES magic");
        assert_eq!(err, RequestError::ResponseMagic, "{}", kind.name());
        assert_eq!(err.code(), "INVALID_MAGIC");
        assert_eq!(err.text(), "Request magic expected");
    }
}

#[test]
fn server_only_types_are_not_expected() {
    for kind in NOT_FOR_SERVER {
        for body in [&b""[..], MANY_ARGS] {
            let p = Packet {
                magic: Magic::Req,
                kind,
                body: Bytes::from_static(body),
            };
            let err = Request::parse(&p).expect_err("not for a server");
            assert_eq!(err, RequestError::NotExpected(kind));
            assert_eq!(err.code(), "INVALID_COMMAND");
            assert_eq!(err.text(), "Command not expected");
            assert_eq!(
                err.to_string(),
                format!("Command not expected: {}", kind.name())
            );
        }
    }
}

#[test]
fn every_other_type_parses_with_enough_arguments() {
    for kind in all_types().filter(|k| !NOT_FOR_SERVER.contains(k)) {
        let result = Request::parse(&packet(Magic::Req, kind, MANY_ARGS));
        assert!(result.is_ok(), "{} gave {result:?}", kind.name());
    }
}

#[test]
fn missing_arguments() {
    use PacketType::*;
    let cases: &[(PacketType, &'static [u8])] = &[
        (SubmitJob, b""),
        (SubmitJob, b"reverse"),
        (SubmitJob, b"reverse\0uniq"),
        (SubmitJobBg, b"f\0"),
        (SubmitJobHigh, b"f"),
        (SubmitJobHighBg, b"f"),
        (SubmitJobLow, b"f"),
        (SubmitJobLowBg, b"f"),
        (SubmitJobEpoch, b"f\0u\0"),
        (SubmitJobEpoch, b"f\0u\x001700000000"),
        (SubmitReduceJob, b"f\0u\0r\0agg"),
        (SubmitReduceJobBackground, b"f\0u\0r"),
        (CanDoTimeout, b"reverse"),
        (WorkStatus, b"H:x:1\x001"),
        (WorkData, b"H:x:1"),
        (WorkWarning, b""),
        (WorkComplete, b"H:x:1"),
        (WorkException, b"H:x:1"),
    ];
    for &(kind, body) in cases {
        let err = Request::parse(&packet(Magic::Req, kind, body)).expect_err("too few NULs");
        assert_eq!(
            err,
            RequestError::MissingArguments(kind),
            "{} {body:?}",
            kind.name()
        );
        assert_eq!(err.code(), "INVALID_PACKET");
        assert!(err.text().contains(kind.name()), "{}", err.text());
    }
}

/// Layouts whose last argument is raw never miss arguments; an empty body
/// gives an empty argument (gearmand does the same).
#[test]
fn raw_and_argumentless_bodies_always_parse() {
    use PacketType::*;
    for kind in [
        CanDo,
        CantDo,
        GetStatus,
        GetStatusUnique,
        SetClientId,
        OptionReq,
        WorkFail,
    ] {
        assert!(
            Request::parse(&packet(Magic::Req, kind, b"")).is_ok(),
            "{}",
            kind.name()
        );
    }
    // A stray body on an argumentless packet is ignored.
    for kind in [
        ResetAbilities,
        PreSleep,
        GrabJob,
        GrabJobUniq,
        GrabJobAll,
        EchoReq,
    ] {
        assert!(
            Request::parse(&packet(Magic::Req, kind, b"junk\0")).is_ok(),
            "{}",
            kind.name()
        );
    }
}

/// EPOCH text is read like strtoll: junk gives 0, no error.
#[test]
fn epoch_is_parsed_leniently() {
    let p = packet(Magic::Req, PacketType::SubmitJobEpoch, b"f\0u\0soon\0d");
    let Ok(Request::Submit(s)) = Request::parse(&p) else {
        panic!("parses")
    };
    assert_eq!(s.epoch(), Some(0));
    let p = packet(Magic::Req, PacketType::SubmitJobEpoch, b"f\0u\0 42s\0d");
    let Ok(Request::Submit(s)) = Request::parse(&p) else {
        panic!("parses")
    };
    assert_eq!(s.epoch(), Some(42));
}

// ---- Response errors (client side) ----

#[test]
fn response_parse_refuses_request_magic() {
    let err = Response::parse(&packet(Magic::Req, PacketType::Noop, b"")).expect_err("REQ magic");
    assert_eq!(err, RequestError::Malformed(PacketType::Noop));
    assert_eq!(err.code(), "INVALID_PACKET");
}

#[test]
fn response_parse_refuses_request_only_types() {
    use PacketType::*;
    for kind in [
        CanDo,
        SubmitJob,
        GrabJob,
        PreSleep,
        EchoReq,
        OptionReq,
        SubmitJobSched,
        Unused,
    ] {
        let err = Response::parse(&packet(Magic::Res, kind, MANY_ARGS)).expect_err("no response");
        assert_eq!(err, RequestError::Malformed(kind));
    }
}

#[test]
fn response_parse_missing_arguments() {
    use PacketType::*;
    let cases: &[(PacketType, &'static [u8])] = &[
        (JobAssign, b"H:x:1\0f"),
        (JobAssignUniq, b"H:x:1\0f\0u"),
        (JobAssignAll, b"H:x:1\0f\0u\0r"),
        (StatusRes, b"H:x:1\x001\x000\x003"),
        (StatusResUnique, b"u\x001\x000\x003\x004"),
        (Error, b"CODE"),
        (WorkComplete, b"H:x:1"),
    ];
    for &(kind, body) in cases {
        let err = Response::parse(&packet(Magic::Res, kind, body)).expect_err("too few NULs");
        assert_eq!(err, RequestError::Malformed(kind), "{}", kind.name());
    }
}

// ---- Never panic ----

/// Feeds `bytes` through the decoder and every parser until the decoder
/// wants more bytes or fails.
fn churn(bytes: &[u8], max: usize) {
    let mut buf = BytesMut::from(bytes);
    let mut guard = 0;
    loop {
        guard += 1;
        assert!(guard <= bytes.len() + 1, "decoder made no progress");
        let before = buf.len();
        match decode_frame(&mut buf, max) {
            Ok(Some(Frame::Packet(p))) => {
                let parsed = Request::parse(&p);
                let _ = Response::parse(&p);
                // The server's owning parse must agree with the borrowing one.
                assert_eq!(Request::from_packet(p), parsed);
            }
            Ok(Some(Frame::Text(line))) => {
                let _ = parse_admin(&line);
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "an incomplete frame consumes nothing");
                break;
            }
            Err(_) => break,
        }
        assert!(buf.len() < before, "a decoded frame consumes bytes");
    }
}

/// Plausible packets with random type, length field and body.
fn packetish() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(*b"\0REQ"), Just(*b"\0RES"), any::<[u8; 4]>()],
        prop_oneof![4 => 0u32..=45, 1 => any::<u32>()],
        vec(prop_oneof![3 => Just(0u8), 7 => any::<u8>()], 0..64),
        prop_oneof![4 => Just(None), 1 => any::<u32>().prop_map(Some)],
    )
        .prop_map(|(magic, kind, body, size)| {
            let mut b = magic.to_vec();
            b.extend_from_slice(&kind.to_be_bytes());
            let size = size.unwrap_or(body.len() as u32);
            b.extend_from_slice(&size.to_be_bytes());
            b.extend_from_slice(&body);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512), max in 0usize..256) {
        churn(&bytes, max);
        churn(&bytes, DEFAULT_MAX_PACKET);
    }

    /// Plain submissions through both parses: same fields, whatever the
    /// NULs in the body (too few, empty parts, NULs in the workload).
    #[test]
    fn owning_parse_agrees_on_submissions(
        body in vec(prop_oneof![Just(0u8), any::<u8>()], 0..24),
        kind in prop_oneof![
            Just(PacketType::SubmitJob),
            Just(PacketType::SubmitJobBg),
            Just(PacketType::SubmitJobHigh),
            Just(PacketType::SubmitJobHighBg),
            Just(PacketType::SubmitJobLow),
            Just(PacketType::SubmitJobLowBg),
        ],
        magic in prop_oneof![Just(Magic::Req), Just(Magic::Res)],
    ) {
        let p = Packet { magic, kind, body: Bytes::from(body) };
        prop_assert_eq!(Request::from_packet(p.clone()), Request::parse(&p));
    }

    #[test]
    fn packet_like_streams_never_panic(parts in vec(packetish(), 1..8), max in 0usize..128) {
        let stream: Vec<u8> = parts.concat();
        churn(&stream, max);
        churn(&stream, DEFAULT_MAX_PACKET);
    }
}
