//! The flush statement's parameters: one array per column, filled from records.

use bytes::{Bytes, BytesMut};
use postgres::types::{IsNull, ToSql, Type};

use crate::{DeadMark, FunctionRecord, JobRecord, KeptRecord, ScheduleRecord};

/// An id (never past [`crate::MAX_ID`]) as a `BIGINT`.
pub(super) fn big(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

/// A `u64` time stored bit for bit (`u64::MAX`, "none", as NULL).
fn time(t: u64) -> i64 {
    t as i64
}

fn opt_time(t: Option<u64>) -> Option<i64> {
    t.filter(|&t| t != u64::MAX).map(time)
}

/// A `BYTEA` value holding a cheap clone of a record's buffer (`Bytes`
/// itself is not `ToSql`).
#[derive(Debug)]
pub(super) struct Bin(pub(super) Bytes);

impl ToSql for Bin {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.0.as_ref().to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <&[u8] as ToSql>::accepts(ty)
    }

    postgres::types::to_sql_checked!();
}

pub(super) type Col = Vec<Bin>;
type OptCol = Vec<Option<Bin>>;

#[derive(Default)]
pub(super) struct JobCols {
    pub(super) id: Vec<i64>,
    pub(super) handle: Col,
    pub(super) function: Col,
    pub(super) unique: Col,
    pub(super) priority: Vec<i16>,
    pub(super) data: Col,
    pub(super) reducer: OptCol,
    pub(super) due_ms: Vec<Option<i64>>,
    pub(super) attempts: Vec<i64>,
    pub(super) created_ms: Vec<i64>,
    pub(super) died_ms: Vec<Option<i64>>,
    pub(super) error: OptCol,
}

impl JobCols {
    /// The columns in the statements' order.
    pub(super) fn values(&self) -> [&(dyn ToSql + Sync); 12] {
        [
            &self.id,
            &self.handle,
            &self.function,
            &self.unique,
            &self.priority,
            &self.data,
            &self.reducer,
            &self.due_ms,
            &self.attempts,
            &self.created_ms,
            &self.died_ms,
            &self.error,
        ]
    }

    pub(super) fn push(&mut self, r: &JobRecord, mark: Option<&DeadMark>) {
        self.id.push(big(r.id));
        self.handle.push(Bin(r.handle.clone()));
        self.function.push(Bin(r.function.clone()));
        self.unique.push(Bin(r.unique.clone()));
        self.priority.push(i16::from(r.priority));
        self.data.push(Bin(r.data.clone()));
        self.reducer.push(r.reducer.clone().map(Bin));
        self.due_ms.push(opt_time(r.due_ms));
        self.attempts.push(i64::from(r.attempts));
        self.created_ms.push(time(r.created_ms));
        self.died_ms.push(mark.map(|m| time(m.died_ms)));
        self.error.push(mark.map(|m| Bin(m.error.clone())));
    }
}

#[derive(Default)]
pub(super) struct ScheduleCols {
    pub(super) id: Vec<i64>,
    pub(super) handle: Col,
    pub(super) when: Col,
    pub(super) monday_zero: Vec<bool>,
    pub(super) function: Col,
    pub(super) unique: Col,
    pub(super) data: Col,
    pub(super) priority: Vec<i16>,
    pub(super) next_ms: Vec<Option<i64>>,
    pub(super) from_config: Vec<bool>,
}

impl ScheduleCols {
    pub(super) fn push(&mut self, s: &ScheduleRecord) {
        self.id.push(big(s.id));
        self.handle.push(Bin(s.handle.clone()));
        self.when.push(Bin(s.when.clone()));
        self.monday_zero.push(s.monday_zero);
        self.function.push(Bin(s.function.clone()));
        self.unique.push(Bin(s.unique.clone()));
        self.data.push(Bin(s.data.clone()));
        self.priority.push(i16::from(s.priority));
        self.next_ms.push(opt_time(s.next_ms));
        self.from_config.push(s.from_config);
    }
}

#[derive(Default)]
pub(super) struct KeptCols {
    pub(super) id: Vec<i64>,
    pub(super) handle: Col,
    pub(super) function: Col,
    pub(super) unique: Col,
    pub(super) priority: Vec<i16>,
    pub(super) background: Vec<bool>,
    pub(super) outcome: Vec<i16>,
    pub(super) attempts: Vec<i64>,
    pub(super) created_ms: Vec<i64>,
    pub(super) started_ms: Vec<Option<i64>>,
    pub(super) finished_ms: Vec<i64>,
    pub(super) expires_ms: Vec<i64>,
    pub(super) worker: Col,
    pub(super) error: OptCol,
    pub(super) result: Col,
    pub(super) history: Col,
}

impl KeptCols {
    pub(super) fn push(&mut self, k: &KeptRecord) {
        self.id.push(big(k.id));
        self.handle.push(Bin(k.handle.clone()));
        self.function.push(Bin(k.function.clone()));
        self.unique.push(Bin(k.unique.clone()));
        self.priority.push(i16::from(k.priority));
        self.background.push(k.background);
        self.outcome.push(i16::from(k.outcome));
        self.attempts.push(i64::from(k.attempts));
        self.created_ms.push(time(k.created_ms));
        // Kept times are stored as they are (no "none" word in a Kept op).
        self.started_ms.push(k.started_ms.map(time));
        self.finished_ms.push(time(k.finished_ms));
        self.expires_ms.push(time(k.expires_ms));
        self.worker.push(Bin(k.worker.clone()));
        self.error.push(k.error.clone().map(Bin));
        self.result.push(Bin(k.result.clone()));
        self.history.push(Bin(k.history.clone()));
    }
}

#[derive(Default)]
pub(super) struct FunctionCols {
    pub(super) name: Col,
    pub(super) paused: Vec<bool>,
    pub(super) max_high: Vec<i64>,
    pub(super) max_normal: Vec<i64>,
    pub(super) max_low: Vec<i64>,
}

impl FunctionCols {
    pub(super) fn push(&mut self, f: &FunctionRecord) {
        let [high, normal, low] = f.max_queue;
        self.name.push(Bin(f.name.clone()));
        self.paused.push(f.paused);
        self.max_high.push(high);
        self.max_normal.push(normal);
        self.max_low.push(low);
    }
}
