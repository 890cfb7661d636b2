//! PgStore against MemoryStore on random op sequences: after every flush
//! and every reopen both replay the same state (ids collide on purpose,
//! so ops on missing, live, dead, scheduled and kept ids all occur).

mod pg_cluster;

use gearshift_store::conformance::{func, job, kept, mark, sched};
use gearshift_store::{MemoryStore, Op, PgOptions, PgStore, Store};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Action {
    Add(u64, u8),
    Done(u64),
    Update(u64, u32),
    Retry(u64, u32, Option<u64>),
    Dead(u64, u32),
    Schedule(u64, Option<u64>),
    Unschedule(u64),
    Kept(u64, u8),
    Forget(u64),
    Reserve(u64),
    /// Settings of one of a few functions (often back at their defaults).
    Function(usize, bool, i64),
    Flush,
    Discard,
    Reopen,
}

fn action() -> impl Strategy<Value = Action> {
    let id = 1..12u64;
    prop_oneof![
        4 => (id.clone(), 0..3u8).prop_map(|(i, p)| Action::Add(i, p)),
        2 => id.clone().prop_map(Action::Done),
        1 => (id.clone(), 0..9u32).prop_map(|(i, a)| Action::Update(i, a)),
        1 => (id.clone(), 0..9u32, proptest::option::of(0..5_000u64))
            .prop_map(|(i, a, d)| Action::Retry(i, a, d)),
        1 => (id.clone(), 0..9u32).prop_map(|(i, a)| Action::Dead(i, a)),
        1 => (id.clone(), proptest::option::of(0..5_000u64))
            .prop_map(|(i, n)| Action::Schedule(i, n)),
        1 => id.clone().prop_map(Action::Unschedule),
        1 => (id.clone(), 0..3u8).prop_map(|(i, o)| Action::Kept(i, o)),
        1 => id.prop_map(Action::Forget),
        1 => (0..40u64).prop_map(Action::Reserve),
        2 => (0..3usize, any::<bool>(), -1..3i64).prop_map(|(f, p, m)| Action::Function(f, p, m)),
        3 => Just(Action::Flush),
        1 => Just(Action::Discard),
        1 => Just(Action::Reopen),
    ]
}

/// The same action on both stores.
fn apply(s: &mut impl Store, a: &Action) {
    match *a {
        Action::Add(id, p) => s.add(&job(id, "f", "", p, &id.to_le_bytes())),
        Action::Done(id) => s.done(id),
        Action::Update(id, n) => s.update(id, n),
        Action::Retry(id, n, due) => s.retry(id, n, due),
        Action::Dead(id, n) => s.dead(id, n, &mark(id * 10, "died")),
        Action::Schedule(id, next) => s.schedule(&sched(id, "* * * * *", next)),
        Action::Unschedule(id) => s.unschedule(id),
        Action::Kept(id, o) => s.kept(&kept(id, o, b"result")),
        Action::Forget(id) => s.forget(id),
        Action::Reserve(upto) => s.reserve(upto),
        Action::Function(f, paused, normal) => {
            let name: &[u8] = [&b"a"[..], b"b\x00\xff", b"c"][f];
            s.append(&[Op::Function(func(name, paused, [0, normal, 0]))]);
        }
        Action::Flush | Action::Discard | Action::Reopen => {}
    }
}

fn open(url: &str) -> PgStore {
    let mut s = PgStore::open(url, PgOptions::default()).expect("open");
    s.replay().expect("replay");
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn pg_store_matches_the_memory_store(actions in prop::collection::vec(action(), 1..120)) {
        let url = pg_cluster::shared().fresh_db();
        let mut pg = open(&url);
        let mut mem = MemoryStore::new();
        for a in &actions {
            match a {
                Action::Flush => {
                    pg.flush().expect("pg flush");
                    mem.flush().expect("memory flush");
                    prop_assert_eq!(pg.replay().expect("pg replay"), mem.replay().expect("replay"));
                }
                Action::Discard => {
                    pg.discard();
                    mem.discard();
                }
                Action::Reopen => {
                    drop(pg);
                    pg = open(&url);
                    mem = mem.reopen();
                    prop_assert_eq!(pg.replay().expect("pg replay"), mem.replay().expect("replay"));
                }
                a => {
                    apply(&mut pg, a);
                    apply(&mut mem, a);
                }
            }
        }
    }
}
