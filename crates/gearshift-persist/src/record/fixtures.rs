//! Records for the encoding tests.

use bytes::Bytes;

use super::{JobRecord, KeptRecord, ScheduleRecord};

pub(super) fn record(id: u64, unique: &str, reducer: Option<&str>, attempts: u32) -> JobRecord {
    JobRecord {
        id,
        handle: Bytes::from(format!("H:x:{id}")),
        function: Bytes::from_static(b"resize"),
        unique: Bytes::from(unique.to_string()),
        priority: 1,
        data: Bytes::from_static(b"payload bytes"),
        reducer: reducer.map(|r| Bytes::from(r.to_string())),
        due_ms: id.is_multiple_of(2).then_some(1234),
        attempts,
        created_ms: 99,
    }
}

pub(super) fn sched(
    id: u64,
    next_ms: Option<u64>,
    monday_zero: bool,
    from_config: bool,
) -> ScheduleRecord {
    ScheduleRecord {
        id,
        handle: Bytes::from(format!("H:x:{id}")),
        when: Bytes::from_static(b"*/5 * * * 1-5"),
        monday_zero,
        function: Bytes::from_static(b"report"),
        unique: Bytes::from_static(b"nightly"),
        data: Bytes::from_static(b"bin\0ary"),
        priority: 2,
        next_ms,
        from_config,
    }
}

pub(super) fn kept(
    id: u64,
    outcome: u8,
    started_ms: Option<u64>,
    error: Option<&'static [u8]>,
    background: bool,
) -> KeptRecord {
    KeptRecord {
        id,
        handle: Bytes::from(format!("H:x:{id}")),
        function: Bytes::from_static(b"resize"),
        unique: Bytes::from_static(b"u"),
        priority: 0,
        background,
        outcome,
        attempts: 3,
        created_ms: 10,
        started_ms,
        finished_ms: 30,
        expires_ms: 40,
        worker: Bytes::from_static(b"worker-1"),
        error: error.map(Bytes::from_static),
        result: Bytes::from_static(b"res\0ult"),
        history: Bytes::from_static(b"\x01\x02history"),
    }
}
