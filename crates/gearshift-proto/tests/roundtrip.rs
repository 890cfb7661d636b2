//! Property tests: every valid `Request` and `Response` survives
//! encode → `decode_frame` → parse unchanged, and a stream of packets mixed
//! with admin text lines decodes to the same frames whatever chunk sizes it
//! arrives in.

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{DEFAULT_MAX_PACKET, MAX_TEXT_LINE};
use gearshift_proto::{
    decode_frame, Frame, GrabKind, Magic, Packet, Priority, Request, Response, Submit,
};
use proptest::collection::vec;
use proptest::prelude::*;

// ---- Strategies ----

/// A function name, unique id or handle: no NUL byte.
fn name() -> impl Strategy<Value = Bytes> {
    vec(1u8..=255, 0..24).prop_map(Bytes::from)
}

/// Opaque data: anything, NULs included.
fn data() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..96).prop_map(Bytes::from)
}

fn priority() -> impl Strategy<Value = Priority> {
    prop_oneof![
        Just(Priority::High),
        Just(Priority::Normal),
        Just(Priority::Low)
    ]
}

fn submit() -> impl Strategy<Value = Submit> {
    prop_oneof![
        // SUBMIT_JOB{,_BG,_HIGH,_HIGH_BG,_LOW,_LOW_BG}
        (name(), name(), data(), priority(), any::<bool>()).prop_map(
            |(function, unique, data, priority, background)| Submit {
                function,
                unique,
                data,
                priority,
                background,
                epoch: None,
                reducer: None,
            }
        ),
        // SUBMIT_JOB_EPOCH: always background, normal priority.
        (name(), name(), data(), any::<i64>()).prop_map(|(function, unique, data, epoch)| {
            Submit {
                function,
                unique,
                data,
                priority: Priority::Normal,
                background: true,
                epoch: Some(epoch),
                reducer: None,
            }
        }),
        // SUBMIT_REDUCE_JOB{,_BACKGROUND}: normal priority.
        (name(), name(), data(), name(), any::<bool>()).prop_map(
            |(function, unique, data, reducer, background)| Submit {
                function,
                unique,
                data,
                priority: Priority::Normal,
                background,
                epoch: None,
                reducer: Some(reducer),
            }
        ),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        name().prop_map(Request::CanDo),
        (name(), data())
            .prop_map(|(function, timeout)| Request::CanDoTimeout { function, timeout }),
        name().prop_map(Request::CantDo),
        Just(Request::ResetAbilities),
        Just(Request::PreSleep),
        submit().prop_map(|s| Request::submit(Box::new(s))),
        prop_oneof![
            Just(GrabKind::Plain),
            Just(GrabKind::Uniq),
            Just(GrabKind::All)
        ]
        .prop_map(Request::Grab),
        (name(), name(), data()).prop_map(|(handle, numerator, denominator)| {
            Request::work_status(handle, numerator, denominator)
        }),
        (name(), data()).prop_map(|(handle, data)| Request::WorkData { handle, data }),
        (name(), data()).prop_map(|(handle, data)| Request::WorkWarning { handle, data }),
        (name(), data()).prop_map(|(handle, data)| Request::WorkComplete { handle, data }),
        name().prop_map(|handle| Request::WorkFail { handle }),
        (name(), data()).prop_map(|(handle, data)| Request::WorkException { handle, data }),
        name().prop_map(Request::GetStatus),
        name().prop_map(Request::GetStatusUnique),
        data().prop_map(Request::Echo),
        name().prop_map(Request::Option),
        name().prop_map(Request::SetClientId),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        Just(Response::Noop),
        Just(Response::NoJob),
        name().prop_map(Response::JobCreated),
        (name(), name(), data()).prop_map(|(handle, function, data)| Response::JobAssign {
            handle,
            function,
            data
        }),
        (name(), name(), name(), data()).prop_map(|(handle, function, unique, data)| {
            Response::JobAssignUniq {
                handle,
                function,
                unique,
                data,
            }
        }),
        (name(), name(), name(), name(), data()).prop_map(
            |(handle, function, unique, reducer, data)| Response::JobAssignAll {
                handle,
                function,
                unique,
                reducer,
                data,
            }
        ),
        (name(), name(), data()).prop_map(|(handle, numerator, denominator)| {
            Response::WorkStatus {
                handle,
                numerator,
                denominator,
            }
        }),
        (name(), data()).prop_map(|(handle, data)| Response::WorkData { handle, data }),
        (name(), data()).prop_map(|(handle, data)| Response::WorkWarning { handle, data }),
        (name(), data()).prop_map(|(handle, data)| Response::WorkComplete { handle, data }),
        name().prop_map(Response::WorkFail),
        (name(), data()).prop_map(|(handle, data)| Response::WorkException { handle, data }),
        (
            name(),
            any::<bool>(),
            any::<bool>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(handle, known, running, numerator, denominator)| {
                Response::StatusRes {
                    handle,
                    known,
                    running,
                    numerator,
                    denominator,
                }
            }),
        (
            name(),
            any::<bool>(),
            any::<bool>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(unique, known, running, numerator, denominator, waiting)| {
                    Response::StatusResUnique {
                        unique,
                        known,
                        running,
                        numerator,
                        denominator,
                        waiting,
                    }
                }
            ),
        data().prop_map(Response::EchoRes),
        (name(), data()).prop_map(|(code, text)| Response::Error { code, text }),
        name().prop_map(Response::OptionRes),
    ]
}

/// An admin text line: not starting with NUL, no `\n`, and (with an optional
/// `\r` and the `\n`) within the 8192-byte line limit.
fn text_line() -> impl Strategy<Value = Vec<u8>> {
    let byte = any::<u8>().prop_filter("no newline", |b| *b != b'\n');
    let first = (1u8..=255).prop_filter("no newline", |b| *b != b'\n');
    let rest = prop_oneof![
        20 => vec(byte.clone(), 0..64),
        1 => vec(byte, MAX_TEXT_LINE - 100..=MAX_TEXT_LINE - 3),
    ];
    (first, rest).prop_map(|(first, mut rest)| {
        rest.insert(0, first);
        rest
    })
}

/// One item of a mixed stream.
#[derive(Debug, Clone)]
enum Item {
    Req(Request),
    Res(Response),
    /// A text line and whether it is terminated by `\r\n` (else `\n`).
    Text(Vec<u8>, bool),
}

impl Item {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            Item::Req(r) => r.encode(out),
            Item::Res(r) => r.encode(out),
            Item::Text(line, crlf) => {
                out.extend_from_slice(line);
                out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
        }
    }

    /// Checks that `frame` is what this item should decode to.
    fn check(&self, frame: &Frame) -> Result<(), TestCaseError> {
        match (self, frame) {
            (Item::Req(r), Frame::Packet(p)) => {
                prop_assert_eq!(p.magic, Magic::Req);
                prop_assert_eq!(&Request::parse(p).expect("valid request"), r);
            }
            (Item::Res(r), Frame::Packet(p)) => {
                prop_assert_eq!(p.magic, Magic::Res);
                prop_assert_eq!(&Response::parse(p).expect("valid response"), r);
            }
            (Item::Text(line, crlf), Frame::Text(t)) => {
                // Exactly one `\r` before the `\n` is stripped.
                let expected = match line.strip_suffix(b"\r") {
                    Some(stripped) if !crlf => stripped,
                    _ => &line[..],
                };
                prop_assert_eq!(&t[..], expected);
            }
            (item, frame) => prop_assert!(false, "{:?} decoded as {:?}", item, frame),
        }
        Ok(())
    }
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        3 => request().prop_map(Item::Req),
        2 => response().prop_map(Item::Res),
        2 => (text_line(), any::<bool>()).prop_map(|(l, crlf)| Item::Text(l, crlf)),
    ]
}

// ---- Helpers ----

fn decode_single(bytes: &[u8]) -> Packet {
    let mut buf = BytesMut::from(bytes);
    let frame = decode_frame(&mut buf, DEFAULT_MAX_PACKET)
        .expect("valid frame")
        .expect("complete frame");
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    match frame {
        Frame::Packet(p) => p,
        Frame::Text(t) => panic!("text frame {t:?}"),
    }
}

/// Decodes everything currently decodable from `buf`.
fn drain(buf: &mut BytesMut, out: &mut Vec<Frame>) {
    while let Some(frame) = decode_frame(buf, DEFAULT_MAX_PACKET).expect("valid stream") {
        out.push(frame);
    }
}

// ---- Properties ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn request_round_trips(req in request()) {
        let mut out = BytesMut::new();
        req.encode(&mut out);
        let packet = decode_single(&out);
        prop_assert_eq!(packet.magic, Magic::Req);
        prop_assert_eq!(Request::parse(&packet).expect("parses"), req);
    }

    #[test]
    fn response_round_trips(res in response()) {
        let mut out = BytesMut::new();
        res.encode(&mut out);
        let packet = decode_single(&out);
        prop_assert_eq!(packet.magic, Magic::Res);
        prop_assert_eq!(Response::parse(&packet).expect("parses"), res);
    }

    /// The header's length field is exactly the body length.
    #[test]
    fn header_length_matches_body(req in request()) {
        let mut out = BytesMut::new();
        req.encode(&mut out);
        let announced = u32::from_be_bytes([out[8], out[9], out[10], out[11]]) as usize;
        prop_assert_eq!(announced + 12, out.len());
    }

    /// The last argument of a no-data command is the raw rest of the body,
    /// so even NUL bytes in it survive.
    #[test]
    fn raw_last_argument_keeps_nuls(raw in data()) {
        for req in [
            Request::CanDo(raw.clone()),
            Request::CantDo(raw.clone()),
            Request::GetStatus(raw.clone()),
            Request::GetStatusUnique(raw.clone()),
            Request::Option(raw.clone()),
            Request::SetClientId(raw.clone()),
            Request::WorkFail { handle: raw.clone() },
        ] {
            let mut out = BytesMut::new();
            req.encode(&mut out);
            prop_assert_eq!(Request::parse(&decode_single(&out)).expect("parses"), req);
        }
    }

    /// Every strict prefix of a packet is "need more bytes" and consumes nothing.
    #[test]
    fn prefixes_are_incomplete(item in item()) {
        let mut whole = BytesMut::new();
        item.encode(&mut whole);
        for cut in 0..whole.len() {
            let mut buf = BytesMut::from(&whole[..cut]);
            prop_assert_eq!(decode_frame(&mut buf, DEFAULT_MAX_PACKET), Ok(None));
            prop_assert_eq!(buf.len(), cut);
        }
    }

    /// A mixed stream fed in arbitrary chunks gives the same frames as the
    /// stream in one buffer, and each frame is what its item encoded.
    #[test]
    fn chunked_stream_decodes_identically(
        items in vec(item(), 0..24),
        chunks in vec(1usize..=97, 1..16),
    ) {
        let mut stream = BytesMut::new();
        for it in &items {
            it.encode(&mut stream);
        }

        let mut whole_buf = stream.clone();
        let mut whole = Vec::new();
        drain(&mut whole_buf, &mut whole);
        prop_assert!(whole_buf.is_empty());

        let mut buf = BytesMut::new();
        let mut chunked = Vec::new();
        let mut pos = 0;
        for size in chunks.iter().cycle() {
            if pos >= stream.len() {
                break;
            }
            let end = (pos + size).min(stream.len());
            buf.extend_from_slice(&stream[pos..end]);
            pos = end;
            drain(&mut buf, &mut chunked);
        }
        prop_assert!(buf.is_empty(), "{} bytes left undecoded", buf.len());

        prop_assert_eq!(&chunked, &whole);
        prop_assert_eq!(chunked.len(), items.len());
        for (it, frame) in items.iter().zip(&chunked) {
            it.check(frame)?;
        }
    }

    /// Byte-at-a-time feeding, the worst case for incremental decoding.
    #[test]
    fn byte_at_a_time(items in vec(item(), 0..6)) {
        let mut stream = BytesMut::new();
        for it in &items {
            it.encode(&mut stream);
        }
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for &b in stream.iter() {
            buf.extend_from_slice(&[b]);
            drain(&mut buf, &mut frames);
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(frames.len(), items.len());
        for (it, frame) in items.iter().zip(&frames) {
            it.check(frame)?;
        }
    }
}
