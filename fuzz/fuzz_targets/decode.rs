//! Any byte stream through the framer and both parsers: no panic, both
//! request parses agree, and every frame that parses as a request encodes
//! back to a packet. The whole-frame cut (a relay's) agrees with the plain
//! one, and a packet's bytes as they came decode to the same packet.
#![no_main]

use bytes::BytesMut;
use gearshift_proto::frame::decode_frame_whole;
use gearshift_proto::{decode_frame, parse_admin, Frame, Request, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (mut plain, mut whole) = (BytesMut::from(data), BytesMut::from(data));
    loop {
        match (
            decode_frame(&mut plain, 1 << 20),
            decode_frame_whole(&mut whole, 1 << 20),
        ) {
            (Ok(Some(f)), Ok(Some((g, bytes)))) => {
                assert_eq!(f, g);
                match f {
                    Frame::Packet(_) => {
                        let again = decode_frame(&mut BytesMut::from(&bytes[..]), 1 << 20);
                        assert_eq!(again, Ok(Some(f)));
                    }
                    Frame::Text(_) => assert!(bytes.is_empty()),
                }
            }
            (f, g) => {
                assert_eq!(f, g.map(|o| o.map(|(frame, _)| frame)));
                break;
            }
        }
    }
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decode_frame(&mut buf, 1 << 20) {
        match frame {
            Frame::Packet(p) => {
                // The server's owning parse agrees with the borrowing one.
                assert_eq!(Request::from_packet(p.clone()), Request::parse(&p));
                if let Ok(req) = Request::parse(&p) {
                    let mut out = BytesMut::new();
                    req.encode(&mut out);
                    let again = decode_frame(&mut out, 1 << 20);
                    assert!(matches!(again, Ok(Some(Frame::Packet(_)))));
                }
                let _ = Response::parse(&p);
            }
            Frame::Text(line) => {
                let _ = parse_admin(&line);
            }
        }
    }
});
