//! Random packets from a few connections into the core, with time moving
//! and connections dropping: the core must never panic, whatever arrives.
#![no_main]

use bytes::BytesMut;
use gearshift_core::{ConnId, ConnInfo, Rights, Core, CoreConfig, Input};
use gearshift_proto::decode_frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = CoreConfig {
        job_retries: 3,
        worker_wakeup: 1,
        ..CoreConfig::default()
    };
    let mut core = Core::new(cfg);
    let mut now = 1_000_000u64;
    for c in 0..4 {
        let info = ConnInfo {
            fd: c,
            ip: "127.0.0.1".into(),
            port: 0,
            loopback: true,
            // The last connection may do nothing: refusals are fuzzed too.
            rights: if c == 3 {
                Rights {
                    submit: false,
                    work: false,
                    read: false,
                    change: false,
                }
            } else {
                Rights::ALL
            },
            node: None,
            identity: (c == 2).then(|| "O=Acme,CN=w".to_owned()),
        };
        core.connect(ConnId(c as u64), info);
    }
    // Each chunk: [conn selector, time step, frame bytes ...] split on 0xFF 0xFF.
    for chunk in data.split(|&b| b == 0xFF) {
        let [sel, step, rest @ ..] = chunk else {
            continue;
        };
        let conn = ConnId(u64::from(*sel % 5));
        now += u64::from(*step) * 10;
        if *sel % 5 == 4 {
            core.disconnect(ConnId(u64::from(*step % 4)), now);
            continue;
        }
        let mut buf = BytesMut::from(rest);
        while let Ok(Some(frame)) = decode_frame(&mut buf, 1 << 16) {
            // As the server does (a plain submission is read in place).
            core.handle(conn, Input::from(frame), now);
        }
        core.on_timeout(now);
        let _ = core.take_effects();
        if let Err(e) = core.check_invariants() {
            panic!("invariant broken: {e}");
        }
    }
});
