//! Any bytes as the payload of a log frame, read as either format version
//! (the first byte picks it): the op decoder and the raw op scanner (used
//! by compaction) never panic; whatever the decoder accepts, the scanner
//! accepts too, with the same ops in the same order (Retry, Dead, Schedule,
//! Unschedule, Kept and Forget included; the raw bytes of a Schedule or a
//! Kept, which compaction copies as they lie, decode to the same record),
//! and it survives a round trip through the encoder. A version-1 payload is
//! accepted exactly when it holds no version-2 op.
#![no_main]

use bytes::Bytes;
use gearshift_store::record::{scan_ops_in, RawOp};
use gearshift_store::{Op, FORMAT_VERSION};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&pick, data)) = input.split_first() else {
        return;
    };
    let version = 1 + u32::from(pick) % FORMAT_VERSION;
    let payload = Bytes::copy_from_slice(data);
    let mut raw = Vec::new();
    let scanned = scan_ops_in(version, data, |op| raw.push(op));
    let mut ops = Vec::new();
    let decoded = Op::decode_each_in(version, &payload, |op, _| ops.push(op));
    if version < FORMAT_VERSION {
        // The same bytes read as the current version: the older version
        // takes them exactly when none of their ops is newer.
        if let Ok(all) = Op::decode_all(&payload) {
            assert_eq!(
                decoded.is_ok(),
                all.iter().all(|op| op.min_version() <= version)
            );
        }
    }
    if decoded.is_err() {
        return;
    }
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
            (
                Op::Retry {
                    id,
                    attempts,
                    due_ms,
                },
                RawOp::Retry {
                    id: i,
                    attempts: n,
                    due_word,
                },
            ) => {
                assert_eq!((id, attempts), (i, n));
                assert_eq!(due_ms.unwrap_or(u64::MAX), *due_word);
            }
            (
                Op::Dead { id, attempts, mark },
                RawOp::Dead {
                    id: i,
                    attempts: n,
                    died_ms,
                    error,
                },
            ) => {
                assert_eq!((id, attempts, &mark.died_ms), (i, n, died_ms));
                assert_eq!(&mark.error[..], *error);
            }
            (Op::Schedule(s), RawOp::Schedule { id, bytes }) => {
                assert_eq!(s.id, *id);
                let alone = Op::decode_all(&Bytes::copy_from_slice(bytes))
                    .expect("a scanned Schedule decodes on its own");
                assert_eq!(alone, vec![op.clone()]);
            }
            (Op::Unschedule(a), RawOp::Unschedule(b)) => assert_eq!(a, b),
            (Op::Kept(k), RawOp::Kept { id, bytes }) => {
                assert_eq!(k.id, *id);
                let alone = Op::decode_all(&Bytes::copy_from_slice(bytes))
                    .expect("a scanned Kept decodes on its own");
                assert_eq!(alone, vec![op.clone()]);
            }
            (Op::Forget(a), RawOp::Forget(b)) => assert_eq!(a, b),
            (Op::Function(f), RawOp::Function { name, default, bytes }) => {
                assert_eq!((&f.name[..], f.is_default()), (*name, *default));
                let alone = Op::decode_all(&Bytes::copy_from_slice(bytes))
                    .expect("a scanned Function decodes on its own");
                assert_eq!(alone, vec![op.clone()]);
            }
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
