//! Any byte stream as a cluster link: no panic, no frame over the limit, and
//! every frame cut off it encodes back to exactly the bytes it came from.
#![no_main]

use bytes::BytesMut;
use gearshift_proto::link::{decode_link, LINK_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.clone();
        match decode_link(&mut buf, MAX) {
            Ok(Some(frame)) => {
                let used = before.len() - buf.len();
                assert!(used >= LINK_HEADER_LEN && used - LINK_HEADER_LEN <= MAX);
                let mut again = BytesMut::new();
                frame.encode(&mut again);
                assert_eq!(&again[..], &before[..used], "{frame:?}");
            }
            // An unfinished frame leaves the bytes as they were.
            Ok(None) => {
                assert_eq!(buf, before);
                break;
            }
            Err(_) => break,
        }
    }
});
