//! The Gearman job-routing state machine of Gearshift, with no I/O.
//!
//! A driver feeds it what happens — a connection opens ([`Core::connect`]),
//! sends a request or admin line ([`Core::handle`]), closes
//! ([`Core::disconnect`]), time passes ([`Core::on_timeout`]) — always with
//! the current time in milliseconds, and carries out the [`Effect`]s it
//! returns (send a packet or text, close, shut down). No sockets, no clock,
//! no runtime: every rule is testable on virtual time.
//!
//! - [`engine`]: the `Core` struct, made of the parts below, and its entry
//!   points, which dispatch to the handlers (submit, worker, admin, control).
//! - [`submit`]: submissions, coalescing, queue limits, epoch jobs, status
//!   requests, and submitters that stop waiting.
//! - [`worker`]: abilities, sleep and wake-ups; [`run`]: a run from GRAB to
//!   its end (results, retries, requeues, failures) and how a job ends.
//! - [`admin`]: the text admin commands; [`access`]: what each connection's
//!   [`rights`] let it send.
//! - [`durable`]: the store seam: deferred acknowledgements, restore, handle reservation.
//! - [`handover`]: functions moving between partitioned nodes while the
//!   core runs (hand over, take over).
//! - [`job`], [`function`] (with its counters and histograms), [`conn`]
//!   (the connections): the state records; [`jobs`]: where
//!   jobs live and how they are found (by id, unique or workload);
//!   [`id_index`]: the id → slot index behind it.
//! - [`timefmt`]: RFC 3339 times (gearshift-proto's, re-exported).
//! - [`listing`]: the per-job admin listings as rows, rendered by the driver.
//! - [`placement`]: which partition of a cluster a function lives in.
//! - [`policy`]: per-function retry, timeout and retention policies (config file).
//! - [`lifecycle`]: live events; [`history`]: a job's steps and attempts; [`retained`]: moves
//!   into kept results and the dead set, which [`kept`] holds; [`inspect`]:
//!   the admin words that show them (`show job`, `show dead`, `show workers`).
//! - [`schedule`]: recurring jobs (SUBMIT_JOB_SCHED, `[[schedule]]`); [`cron`]:
//!   the schedule records and their times.
//! - [`table`]: the job table ([`table::JobTable`]): every job, function and
//!   run, and the one place a job enters, changes state or leaves, with its
//!   counts; `timers`: the timer heap.
//! - [`invariants`]: the consistency checks tests run after every step.
//! - [`view`]: read-only snapshots for the HTTP API; [`control`]: its actions;
//!   [`events`]: live events.
//! - [`config`], [`effect`]: settings, inputs/outputs; [`ids`]: identifiers,
//!   the job number counter and handles (printed and parsed).
//!
//! Modules that only define types (`job`, `jobs`, `function`, `conn`,
//! `events`, `history`, `kept`, `cron`, `effect`, ...) never import the
//! `Core` handlers, so there is no import loop (`tests/imports.rs`).

pub mod access;
mod acks;
pub mod admin;
pub mod config;
pub mod conn;
pub mod control;
pub mod cron;
pub mod durable;
pub mod effect;
pub mod engine;
pub mod events;
pub mod function;
pub mod handover;
pub mod history;
pub mod id_index;
pub mod ids;
pub mod inspect;
pub mod invariants;
pub mod job;
mod job_view;
pub mod jobs;
pub mod kept;
pub mod lifecycle;
pub mod listing;
pub mod placement;
pub mod policy;
pub mod retained;
pub mod rights;
pub mod run;
pub mod schedule;
mod settings;
pub mod split;
pub mod submit;
pub mod table;
pub use gearshift_proto::timefmt;
mod timers;
pub mod view;
pub mod worker;

pub use config::CoreConfig;
pub use conn::ConnInfo;
pub use effect::{Effect, Input, StoreOp};
pub use engine::Core;
pub use gearshift_persist::{DeadMark, FunctionRecord, JobRecord, KeptRecord, ScheduleRecord};
pub use handover::{HandOverPending, TakenOver};
pub use ids::{ConnId, JobId};
pub use placement::Placement;
pub use rights::Rights;

/// Time in milliseconds since the Unix epoch, as the driver measures it.
/// Epoch jobs compare against it; timeouts add to it.
pub type Millis = u64;
