//! Checks of functions' admin settings (pause, queue limits).

use super::*;

/// A test function's settings.
pub fn func(name: &[u8], paused: bool, max_queue: [i64; 3]) -> FunctionRecord {
    FunctionRecord {
        name: Bytes::copy_from_slice(name),
        paused,
        max_queue,
    }
}

pub(super) fn function_settings_are_replayed<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    let r = s.replay().expect("replay");
    assert!(r.functions.is_empty(), "a new store holds no settings");
    s.append(&[
        Op::Function(func(b"zeta", true, [0, 0, 0])),
        Op::Function(func(b"alpha \x00\xff", false, [1, -1, 7])),
        Op::Function(func(b"gone", true, [0, 0, 0])),
    ]);
    s.flush().expect("flush");
    // Changed, and one back to its defaults: dropped.
    s.append(&[
        Op::Function(func(b"zeta", true, [0, 3, 0])),
        Op::Function(func(b"gone", false, [0, -5, 0])),
    ]);
    let (again, r) = replayed_twice(s, &mut open);
    let want = vec![
        func(b"alpha \x00\xff", false, [1, -1, 7]),
        func(b"zeta", true, [0, 3, 0]),
    ];
    assert_eq!(
        again.functions, want,
        "replay reports settings, however often asked"
    );
    assert_eq!(
        r.functions, want,
        "the latest settings of each function, in name order"
    );
    assert!(
        r.jobs.is_empty() && r.schedules.is_empty(),
        "settings are not jobs"
    );
}

pub(super) fn function_settings_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want: BTreeMap<Vec<u8>, FunctionRecord> = BTreeMap::new();
    for round in 1..=300u64 {
        // Garbage, so the log store compacts often.
        short_lived(&mut s, round, 1500);
        let name = format!("f{}", round % 7).into_bytes();
        let f = func(&name, round % 3 != 0, [0, (round % 5) as i64, 0]);
        s.append(&[Op::Function(f.clone())]);
        match f.is_default() {
            true => want.remove(&name),
            false => want.insert(name, f),
        };
        let r;
        (s, r) = end_of_round(s, &mut open, round, 3);
        if let Some(r) = r {
            let w: Vec<FunctionRecord> = want.values().cloned().collect();
            assert_eq!(r.functions, w, "settings after {round} rounds");
        }
    }
}
