//! Any bytes as the payload of a log frame: the op decoder and the raw op
//! scanner (used by compaction) never panic; whatever the decoder accepts,
//! the scanner accepts too, with the same ops in the same order, and it
//! survives a round trip through the encoder.
#![no_main]

use bytes::Bytes;
use gearshift_store::record::{scan_ops, RawOp};
use gearshift_store::Op;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let payload = Bytes::copy_from_slice(data);
    let mut raw = Vec::new();
    let scanned = scan_ops(data, |op| raw.push(op));
    let Ok(ops) = Op::decode_all(&payload) else {
        return;
    };
    assert!(scanned.is_ok(), "decoded but not scanned: {ops:?}");
    assert_eq!(ops.len(), raw.len());
    for (op, r) in ops.iter().zip(&raw) {
        match (op, r) {
            (Op::Add(rec), RawOp::Add { id, .. }) => assert_eq!(rec.id, *id),
            (Op::Done(a), RawOp::Done(b)) => assert_eq!(a, b),
            (Op::Update { id, attempts }, RawOp::Update { id: i, attempts: n }) => {
                assert_eq!((id, attempts), (i, n))
            }
            (Op::Reserve(a), RawOp::Reserve(b)) => assert_eq!(a, b),
            other => panic!("decoder and scanner disagree: {other:?}"),
        }
    }
    let mut again = Vec::new();
    for op in &ops {
        op.encode(&mut again);
    }
    let back = Op::decode_all(&Bytes::from(again)).expect("re-encoded ops decode");
    assert_eq!(back, ops);
});
