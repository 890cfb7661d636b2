//! What Gearshift persists, defined once for the core that emits it and the
//! stores that keep it: the records ([`JobRecord`], [`DeadMark`],
//! [`ScheduleRecord`], [`KeptRecord`]), the operations over them ([`Op`])
//! and their binary encoding ([`record`], with the rule for changing it).
//!
//! No I/O and no dependencies beyond `bytes`: the sans-IO core depends on it.

pub mod record;

pub use record::{
    DeadMark, FunctionRecord, JobRecord, KeptRecord, Op, ScheduleRecord, FORMAT_VERSION,
    KEPT_LAST_OUTCOME, MAX_ID,
};

/// Bytes that do not decode as ops: a damaged frame payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);
