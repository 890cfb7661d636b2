//! Unit tests of the job table's moves.
use bytes::Bytes;
use gearshift_proto::Priority;

use super::*;
use crate::config::CoreConfig;
use crate::conn::ConnInfo;
use crate::engine::Core;
use crate::ids::ConnId;
use crate::job::{ConnList, Persist};
use crate::rights::Rights;

fn job(id: JobId, func: FuncId, state: JobState, data: &'static str) -> Job {
    Job {
        id,
        payload: Bytes::from_static(data.as_bytes()),
        unique_len: 0,
        created: 0,
        clients: ConnList::Empty,
        extra: None,
        func: func as u32,
        retries: 0,
        priority: Priority::High,
        background: true,
        state,
        persist: Persist::No,
    }
}

/// A core with one function; its id.
fn core() -> (Core, FuncId) {
    let mut core = Core::new(CoreConfig::default());
    let f = core.table.function_id(b"f", &Policies::default());
    (core, f)
}

fn f(core: &Core, func: FuncId) -> &Function {
    core.table.func(func).expect("the function exists")
}

/// Hands job `id` to worker `w` at time 10 as GRAB does (its run, its
/// held list); returns the assignment number.
fn run_on(core: &mut Core, id: JobId, w: ConnId) -> u64 {
    let assignment = core.table.start(id, w, 10);
    core.conns.hold(w, id);
    assignment
}

/// Takes job `id` back from worker `w` (its run ends).
fn release(core: &mut Core, id: JobId, w: ConnId) {
    assert_eq!(core.table.release(id).map(|r| r.worker), Some(w));
    core.conns.let_go(w, id);
}

fn worker(core: &mut Core, w: ConnId) {
    let info = ConnInfo {
        fd: 1,
        ip: "127.0.0.1".into(),
        port: 0,
        loopback: true,
        rights: Rights::ALL,
        node: None,
        identity: None,
    };
    core.conns.open(w, info, 0);
}

#[test]
fn insert_counts_the_job_in_its_state_its_bytes_and_submissions() {
    let (mut core, func) = core();
    core.table
        .insert(job(1, func, JobState::Queued, "abc"), true);
    core.table
        .insert(job(2, func, JobState::Scheduled, "de"), false);
    let mut pending = job(3, func, JobState::Pending, "");
    pending.persist = Persist::Pending;
    core.table.insert(pending, true);
    let f = f(&core, func);
    assert_eq!(
        (f.total, f.queued, f.scheduled, f.running),
        (3, [1, 0, 0], 1, 0)
    );
    assert_eq!(f.stats.submitted, 2, "a restored job is not a submission");
    assert_eq!(core.table.bytes(), 5);
    core.check_invariants().expect("books match the jobs");
}

#[test]
fn set_state_moves_one_count_and_counts_a_run_sent_back_as_a_retry() {
    let (mut core, func) = core();
    worker(&mut core, ConnId(7));
    core.table.insert(job(1, func, JobState::Queued, "x"), true);
    assert_eq!(run_on(&mut core, 1, ConnId(7)), 1);
    assert_eq!((f(&core, func).queued[0], f(&core, func).running), (0, 1));
    assert_eq!(f(&core, func).stats.retried, 0, "a start is no retry");
    core.check_invariants().expect("running job counted");
    release(&mut core, 1, ConnId(7));
    assert_eq!(
        core.table.set_state(1, JobState::Queued),
        Some(JobState::Running)
    );
    assert_eq!(f(&core, func).stats.retried, 1);
    assert_eq!(run_on(&mut core, 1, ConnId(7)), 2, "a new assignment");
    release(&mut core, 1, ConnId(7));
    core.table.set_state(1, JobState::Scheduled);
    let f = f(&core, func);
    assert_eq!((f.queued[0], f.scheduled, f.running, f.total), (0, 1, 0, 1));
    assert_eq!(f.stats.retried, 2);
    assert_eq!(
        core.table.set_state(9, JobState::Queued),
        None,
        "no such job"
    );
    core.check_invariants().expect("books match the jobs");
}

#[test]
fn take_uncounts_the_job_and_its_bytes() {
    let (mut core, func) = core();
    core.table
        .insert(job(1, func, JobState::Queued, "abc"), true);
    core.table
        .insert(job(2, func, JobState::Queued, "de"), true);
    assert_eq!(core.table.take(1).map(|j| j.id), Some(1));
    assert!(core.table.take(1).is_none(), "taken once");
    let f = f(&core, func);
    assert_eq!((f.total, f.queued[0]), (1, 1));
    assert_eq!(core.table.bytes(), 2);
    core.check_invariants().expect("books match the jobs");
}

#[test]
fn end_run_counts_the_outcome_unless_the_job_was_cancelled() {
    let (mut core, func) = core();
    worker(&mut core, ConnId(7));
    for id in 1..=3 {
        core.table
            .insert(job(id, func, JobState::Queued, "x"), true);
        run_on(&mut core, id, ConnId(7));
    }
    core.table.end_run(1, 25, None);
    core.table.end_run(2, 25, Some(Reason::Exception));
    core.table.set_state(3, JobState::Cancelled);
    core.table.end_run(3, 25, Some(Reason::Fail));
    let s = &f(&core, func).stats;
    assert_eq!(s.completed, 1);
    assert_eq!(s.failed, [0, 1, 0, 0]);
    assert_eq!(
        (s.run.count, s.run.sum_ms),
        (3, 45),
        "every run's length is observed"
    );
}

#[test]
fn abilities_count_workers_and_the_checker_sees_a_miscount() {
    let (mut core, func) = core();
    worker(&mut core, ConnId(7));
    let ability = Ability {
        func,
        timeout_ms: None,
    };
    core.conns.add_ability(ConnId(7), ability).expect("worker");
    core.table.ability_added(func, false);
    assert_eq!(f(&core, func).workers, 1);
    core.check_invariants().expect("one worker");
    core.table.func_mut(func).expect("f").workers += 1;
    assert!(core.check_invariants().is_err(), "a miscount is caught");
    core.table.func_mut(func).expect("f").workers -= 1;
    let c = core.conns.close(ConnId(7)).expect("worker");
    core.table.abilities_dropped(&c.abilities, c.epoch_early);
    assert_eq!(f(&core, func).workers, 0);
    core.check_invariants().expect("no workers");
}

#[test]
fn the_checker_sees_miscounted_jobs_and_bytes() {
    let (mut core, func) = core();
    core.table
        .insert(job(1, func, JobState::Queued, "abc"), true);
    core.table.bytes += 1;
    assert!(core.check_invariants().is_err(), "bytes miscounted");
    core.table.bytes -= 1;
    core.table.func_mut(func).expect("f").queued[0] += 1;
    assert!(core.check_invariants().is_err(), "queue miscounted");
}

#[test]
#[should_panic(expected = "overflow")]
fn a_count_taken_below_zero_fails_instead_of_hiding() {
    let (mut core, func) = core();
    let ability = Ability {
        func,
        timeout_ms: None,
    };
    core.table.abilities_dropped(&[ability], false);
}

#[test]
fn admit_refuses_past_the_memory_cap_then_maxqueue_and_counts_each() {
    let (mut core, func) = core();
    let t = &mut core.table;
    assert_eq!(t.admit(func, 0, 10, 0), Ok(()), "no limits");
    t.insert(job(1, func, JobState::Queued, "abcd"), true);
    assert_eq!(t.admit(func, 0, 6, 10), Ok(()), "4 + 6 fits 10");
    assert_eq!(t.admit(func, 0, 7, 10), Err(Full::Memory));
    t.func_mut(func).expect("f").max_queue = [1, 0, 0];
    assert_eq!(t.admit(func, 0, 1, 0), Err(Full::Queue));
    assert_eq!(t.admit(func, 1, 1, 0), Ok(()), "another priority's limit");
    assert_eq!(t.admit(func, 0, 7, 10), Err(Full::Memory), "memory first");
    assert_eq!(t.refused(), [1, 2]);
}

#[test]
fn retry_at_counts_an_attempt_schedules_the_job_and_counts_a_retry() {
    let (mut core, func) = core();
    worker(&mut core, ConnId(7));
    core.table.insert(job(1, func, JobState::Queued, "x"), true);
    run_on(&mut core, 1, ConnId(7));
    release(&mut core, 1, ConnId(7));
    assert_eq!(core.table.retry_at(1, 500), Some(1));
    let j = core.table.get(1).expect("still there");
    assert_eq!(
        (j.state, j.due(), j.retries),
        (JobState::Scheduled, Some(500), 1)
    );
    let f = f(&core, func);
    assert_eq!((f.scheduled, f.running, f.stats.retried), (1, 0, 1));
    assert_eq!(core.table.retry_at(9, 500), None, "no such job");
    core.check_invariants().expect("books match the jobs");
}

#[test]
fn count_attempt_and_set_persist_change_only_their_field() {
    let (mut core, func) = core();
    core.table.insert(job(1, func, JobState::Queued, "x"), true);
    assert_eq!(core.table.count_attempt(1), Some(1));
    assert_eq!(core.table.count_attempt(1), Some(2));
    assert_eq!(
        core.table.set_persist(1, Persist::Pending),
        Some(Persist::No)
    );
    assert_eq!(
        core.table.set_persist(1, Persist::Yes),
        Some(Persist::Pending)
    );
    let j = core.table.get(1).expect("still there");
    assert_eq!(
        (j.retries, j.persist, j.state),
        (2, Persist::Yes, JobState::Queued)
    );
    assert_eq!(core.table.count_attempt(9), None);
    assert_eq!(core.table.set_persist(9, Persist::Yes), None);
    core.check_invariants().expect("books match the jobs");
}

#[test]
fn clients_come_and_go_and_background_is_set() {
    let (mut core, func) = core();
    let mut fg = job(1, func, JobState::Queued, "x");
    fg.background = false;
    core.table.insert(fg, true);
    core.table.add_client(1, ConnId(3));
    core.table.add_client(1, ConnId(4));
    let after = core.table.remove_client(1, ConnId(3)).expect("the job");
    assert_eq!(after.clients.as_slice().to_vec(), vec![ConnId(4)]);
    assert_eq!(
        core.table.take_clients(1).as_slice().to_vec(),
        vec![ConnId(4)]
    );
    assert!(core.table.get(1).is_some_and(|j| j.clients.is_empty()));
    core.table.set_background(1, true);
    assert!(core.table.get(1).is_some_and(|j| j.background));
    assert!(core.table.remove_client(9, ConnId(3)).is_none());
}

#[test]
fn set_progress_touches_only_a_running_job() {
    let (mut core, func) = core();
    worker(&mut core, ConnId(7));
    core.table.insert(job(1, func, JobState::Queued, "x"), true);
    core.table.set_progress(1, 1, 2);
    assert!(core.table.run(1).is_none(), "not running: no run to update");
    run_on(&mut core, 1, ConnId(7));
    core.table.set_progress(1, 3, 4);
    let run = core.table.run(1).expect("running");
    assert_eq!((run.numerator, run.denominator), (3, 4));
}

#[test]
fn pop_queued_skips_stale_ids_and_leaves_the_count_to_start() {
    let (mut core, func) = core();
    for id in [1, 2] {
        core.table
            .insert(job(id, func, JobState::Queued, "x"), true);
    }
    core.table
        .insert(job(3, func, JobState::Scheduled, "x"), true);
    // A stale id (no such job), a job no longer queued, then the live ones.
    core.table.func_mut(func).expect("f").queues[0].extend([9, 3, 1, 2]);
    assert_eq!(core.table.pop_queued(func, 0), Some(1));
    assert_eq!(f(&core, func).queued[0], 2, "still counted until it starts");
    assert_eq!(f(&core, func).queues[0].len(), 1);
    assert_eq!(
        core.table.pop_queued(func, 1),
        None,
        "nothing at that priority"
    );
    assert_eq!(core.table.pop_queued(func, 0), Some(2));
    assert_eq!(core.table.pop_queued(func, 0), None);
    assert_eq!(core.table.pop_queued(func + 1, 0), None, "no such function");
}
