//! The replies of Gearshift's own admin words (`show job`, `show dead`,
//! `show workers`, `show schedules`) and their parsers. They escape
//! client-chosen bytes that could split a line or a column as `\xNN`; the
//! types here keep those fields as the server wrote them (no unescaping).

use gearshift_proto::Priority;

use crate::error::{Error, Result};

/// `show job H` (Gearshift): one job, live, kept or dead, with its history.
///
/// The reply is `key: value` lines (`handle`, `function`, `unique`,
/// `priority`, `state`, `attempts`, `created`, `started`, `finished`,
/// `worker`, `error`, `result_size`, `outcome`, `last_failure`), then one
/// `history: TIME EVENT [DETAIL]` line per transition, then `.`. Times are RFC 3339 UTC with
/// milliseconds (`2026-11-25T18:49:17.123Z`), kept as text; a `-` value is
/// `None`. Text fields are kept as the server escaped them: control bytes
/// arrive as `\xNN` (and a lone `.` as `\x2e`), every other byte as sent.
/// (This type is not [`JobInfo`], which is one line of `show jobs`.)
///
/// ```
/// use gearshift_client::admin::JobDetail;
/// let lines = [
///     "handle: H:vm:3", "function: resize", "unique: ", "priority: normal",
///     "state: dead", "attempts: 1", "created: 2026-11-25T18:49:17.123Z",
///     "started: 2026-11-25T18:49:17.200Z", "finished: 2026-11-25T18:49:17.250Z",
///     "worker: w1@127.0.0.1", "error: fail", "result_size: 0", "outcome: dead",
///     "last_failure: 1 2026-11-25T18:49:17.250Z fail",
///     "history: 2026-11-25T18:49:17.123Z queued",
///     "history: 2026-11-25T18:49:17.200Z started w1@127.0.0.1",
/// ];
/// let j = JobDetail::parse(&lines)?;
/// assert_eq!((j.state.as_str(), j.attempts, j.result_size), ("dead", 1, 0));
/// assert_eq!(j.unique, "");
/// assert_eq!(j.error.as_deref(), Some("fail"));
/// assert_eq!(j.outcome.as_deref(), Some("dead"));
/// let f = j.last_failure.expect("a failure");
/// assert_eq!((f.attempt, f.detail.as_str()), (Some(1), "fail"));
/// assert_eq!(j.history[1].event, "started");
/// assert_eq!(j.history[1].detail, "w1@127.0.0.1");
/// assert_eq!(j.history[0].detail, "");
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDetail {
    /// Job handle.
    pub handle: String,
    /// Function name.
    pub function: String,
    /// Unique id (empty for none).
    pub unique: String,
    /// Queue priority.
    pub priority: Priority,
    /// `queued`, `scheduled`, `retrying`, `running`, `cancelled` (live) or
    /// `completed`, `failed`, `dead`, `cancelled` (ended, kept).
    pub state: String,
    /// Runs so far, the current one included.
    pub attempts: u64,
    /// When it was submitted.
    pub created: String,
    /// When its last run started.
    pub started: Option<String>,
    /// When it ended.
    pub finished: Option<String>,
    /// When an epoch job or a retry is due (`None` from servers that
    /// predate the line). [`JobDetail::due_ms`] reads it.
    pub due: Option<String>,
    /// The worker of its last run (`CLIENT_ID@ADDRESS`).
    pub worker: Option<String>,
    /// Why its last run failed: the worker's text (an exception's payload),
    /// or the reason word (`fail`, `exception`, `timeout`, `worker_lost`)
    /// when it sent none.
    pub error: Option<String>,
    /// Bytes of its kept result.
    pub result_size: u64,
    /// How it ended (`completed`, `failed`, `dead`, `cancelled`); `None`
    /// while it lives (and from servers that predate the line).
    pub outcome: Option<String>,
    /// Its last failure, even when a later attempt completed; `None` if it
    /// never failed (or the server predates the line).
    pub last_failure: Option<LastFailure>,
    /// Its transitions, oldest first.
    pub history: Vec<HistoryEntry>,
}

/// The `last_failure:` line of `show job`: `ATTEMPT TIME DETAIL`, `-` for
/// an attempt or time the server does not know.
///
/// ```
/// use gearshift_client::admin::LastFailure;
/// let f = LastFailure::parse("2 2026-11-25T18:49:17.250Z fail: disk full")?;
/// assert_eq!(f.attempt, Some(2));
/// assert_eq!(f.time.as_deref(), Some("2026-11-25T18:49:17.250Z"));
/// assert_eq!(f.detail, "fail: disk full");
/// let bare = LastFailure::parse("- - timeout")?;
/// assert_eq!((bare.attempt, bare.time, bare.detail.as_str()), (None, None, "timeout"));
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    /// Which run failed (1 for the first).
    pub attempt: Option<u64>,
    /// When (RFC 3339 UTC with milliseconds).
    pub time: Option<String>,
    /// `REASON: TEXT`, or the bare reason word (`fail`, `exception`,
    /// `timeout`, `worker_lost`) when the worker sent no text.
    pub detail: String,
}

impl LastFailure {
    /// Parses what follows `last_failure: ` (not its `-` for none).
    ///
    /// ```
    /// use gearshift_client::admin::LastFailure;
    /// assert!(LastFailure::parse("x 2026-11-25T18:49:17.250Z fail").is_err());
    /// assert!(LastFailure::parse("1 2026-11-25T18:49:17.250Z").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<LastFailure> {
        let bad = || Error::protocol(format!("bad last_failure line {text:?}"));
        let mut parts = text.splitn(3, ' ');
        let (Some(attempt), Some(time), Some(detail)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let attempt = match attempt {
            "-" => None,
            n => Some(n.parse().map_err(|_| bad())?),
        };
        Ok(LastFailure {
            attempt,
            time: (time != "-").then(|| time.to_owned()),
            detail: detail.to_owned(),
        })
    }
}

/// One `history:` line of `show job`: `TIME EVENT [DETAIL]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// RFC 3339 UTC with milliseconds.
    pub time: String,
    /// `queued`, `started`, `failed`, `retry`, `requeued`, `completed`,
    /// `cancelled`, `dead` or `revived`.
    pub event: String,
    /// The rest of the line (the worker, the failure, the retry time, the
    /// result size…); empty when there is none.
    pub detail: String,
}

impl JobDetail {
    /// [`JobDetail::due`] in Unix milliseconds.
    pub fn due_ms(&self) -> Option<i64> {
        self.due
            .as_deref()
            .and_then(gearshift_proto::timefmt::parse_rfc3339_ms)
    }

    /// Parses the lines of a `show job` reply (without the final `.`).
    ///
    /// ```
    /// assert!(gearshift_client::admin::JobDetail::parse(&["handle: H:1"]).is_err());
    /// ```
    pub fn parse<S: AsRef<str>>(lines: &[S]) -> Result<JobDetail> {
        let bad = |what: &str| Error::protocol(format!("bad show job reply: {what}"));
        let mut fields: Vec<(&str, &str)> = Vec::new();
        let mut history = Vec::new();
        for line in lines {
            let line = line.as_ref();
            let (key, value) = line
                .split_once(": ")
                .or_else(|| line.strip_suffix(':').map(|k| (k, "")))
                .ok_or_else(|| bad(&format!("line {line:?}")))?;
            if key == "history" {
                history.push(HistoryEntry::parse(value)?);
            } else {
                fields.push((key, value));
            }
        }
        let get = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
                .ok_or_else(|| bad(&format!("no {key}")))
        };
        let opt = |key: &str| get(key).map(|v| (v != "-").then_some(v));
        // Lines a newer server added: absent reads as `-`.
        let newer = |key: &str| get(key).ok().filter(|v| v != "-");
        let number = |key: &str| {
            let v = get(key)?;
            v.parse::<u64>()
                .map_err(|_| bad(&format!("{key} {v:?} is not a number")))
        };
        let priority = match get("priority")?.as_str() {
            "high" => Priority::High,
            "normal" => Priority::Normal,
            "low" => Priority::Low,
            other => return Err(bad(&format!("priority {other:?}"))),
        };
        Ok(JobDetail {
            handle: get("handle")?,
            function: get("function")?,
            unique: get("unique")?,
            priority,
            state: get("state")?,
            attempts: number("attempts")?,
            created: get("created")?,
            started: opt("started")?,
            finished: opt("finished")?,
            due: newer("due"),
            worker: opt("worker")?,
            error: opt("error")?,
            result_size: number("result_size")?,
            outcome: newer("outcome"),
            last_failure: newer("last_failure")
                .map(|v| LastFailure::parse(&v))
                .transpose()?,
            history,
        })
    }
}

impl HistoryEntry {
    /// Parses what follows `history: ` on a `show job` line.
    ///
    /// ```
    /// use gearshift_client::admin::HistoryEntry;
    /// let h = HistoryEntry::parse("2026-11-25T18:49:17.250Z failed fail: disk full")?;
    /// assert_eq!((h.event.as_str(), h.detail.as_str()), ("failed", "fail: disk full"));
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<HistoryEntry> {
        let mut parts = text.splitn(3, ' ');
        let time = parts.next().filter(|t| !t.is_empty());
        let event = parts.next().filter(|e| !e.is_empty());
        let (Some(time), Some(event)) = (time, event) else {
            return Err(Error::protocol(format!("bad history line {text:?}")));
        };
        Ok(HistoryEntry {
            time: time.to_owned(),
            event: event.to_owned(),
            detail: parts.next().unwrap_or_default().to_owned(),
        })
    }
}

/// One line of `show dead [F]` (Gearshift):
/// `HANDLE\tFUNCTION\tATTEMPTS\tDIED_AT\tERROR`. Text fields are kept as
/// the server escaped them (`\xNN` for control bytes).
///
/// ```
/// use gearshift_client::admin::DeadJob;
/// let d = DeadJob::parse("H:vm:3\tresize\t3\t2026-11-25T18:49:17.250Z\tdisk full")?;
/// assert_eq!((d.function.as_str(), d.attempts), ("resize", 3));
/// assert_eq!(d.error.as_deref(), Some("disk full"));
/// assert_eq!(DeadJob::parse("H:vm:4\tf\t1\t2026-11-25T18:49:17.250Z\t")?.error, None);
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadJob {
    /// Job handle.
    pub handle: String,
    /// Function name.
    pub function: String,
    /// Runs it had.
    pub attempts: u64,
    /// When it entered the dead set (RFC 3339 UTC with milliseconds).
    pub died_at: String,
    /// Why its last run failed, as in [`JobDetail::error`] (`None` when
    /// the server gave no reason).
    pub error: Option<String>,
}

impl DeadJob {
    /// Parses one `show dead` line.
    ///
    /// ```
    /// assert!(gearshift_client::admin::DeadJob::parse("H:1\tf\tx\tt\te").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<DeadJob> {
        let bad = || Error::protocol(format!("bad show dead line {line:?}"));
        let f: Vec<&str> = line.splitn(5, '\t').collect();
        let [handle, function, attempts, died_at, error] = f[..] else {
            return Err(bad());
        };
        Ok(DeadJob {
            handle: handle.to_owned(),
            function: function.to_owned(),
            attempts: attempts.parse().map_err(|_| bad())?,
            died_at: died_at.to_owned(),
            error: (!error.is_empty()).then(|| error.to_owned()),
        })
    }
}

/// One line of `show workers` (Gearshift), the worker registry:
/// `FD\tADDRESS\tCLIENT_ID\tCONNECTED\tLAST_SEEN\tDONE\tFAILED\tHELD\tFUNCTIONS`,
/// HELD and FUNCTIONS space-separated (`-` for none). Only connections that
/// registered a function or hold a job are listed. Text fields are kept as
/// the server escaped them (`\xNN`; a space inside a held handle or a
/// function name is `\x20`).
///
/// ```
/// use gearshift_client::admin::WorkerEntry;
/// let w = WorkerEntry::parse(
///     "12\t127.0.0.1\tw1\t2026-11-25T18:49:17.123Z\t2026-11-25T18:49:20.000Z\t5\t1\tH:vm:9\tresize thumb",
/// )?;
/// assert_eq!((w.fd, w.done, w.failed), (12, 5, 1));
/// assert_eq!(w.held, ["H:vm:9"]);
/// assert_eq!(w.functions, ["resize", "thumb"]);
/// let idle = WorkerEntry::parse("13\t::1\t-\tt0\tt1\t0\t0\t-\tresize")?;
/// assert!(idle.held.is_empty());
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEntry {
    /// The server's file descriptor (or connection number) for it.
    pub fd: i64,
    /// Peer address.
    pub address: String,
    /// SET_CLIENT_ID value (`-` when unset).
    pub client_id: String,
    /// When it connected (RFC 3339 UTC with milliseconds).
    pub connected: String,
    /// When the server last heard from it.
    pub last_seen: String,
    /// Jobs it completed.
    pub done: u64,
    /// Jobs it failed.
    pub failed: u64,
    /// Handles of the jobs it is running.
    pub held: Vec<String>,
    /// Functions it registered.
    pub functions: Vec<String>,
}

impl WorkerEntry {
    /// Parses one `show workers` line.
    ///
    /// ```
    /// assert!(gearshift_client::admin::WorkerEntry::parse("1\t::1\t-").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<WorkerEntry> {
        let bad = || Error::protocol(format!("bad show workers line {line:?}"));
        let f: Vec<&str> = line.split('\t').collect();
        let [fd, address, client_id, connected, last_seen, done, failed, held, functions] = f[..]
        else {
            return Err(bad());
        };
        let list = |s: &str| -> Vec<String> {
            if s == "-" {
                return Vec::new();
            }
            s.split(' ')
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect()
        };
        Ok(WorkerEntry {
            fd: fd.parse().map_err(|_| bad())?,
            address: address.to_owned(),
            client_id: client_id.to_owned(),
            connected: connected.to_owned(),
            last_seen: last_seen.to_owned(),
            done: done.parse().map_err(|_| bad())?,
            failed: failed.parse().map_err(|_| bad())?,
            held: list(held),
            functions: list(functions),
        })
    }
}

/// One line of `show schedules` (Gearshift):
/// `HANDLE\tFUNCTION\tWHEN\tNEXT\tSOURCE\tUNIQUE`. Text fields are kept as
/// the server escaped them (`\xNN` for control bytes).
///
/// ```
/// use gearshift_client::admin::ScheduleEntry;
/// let s = ScheduleEntry::parse("H:vm:7\tnightly\t0 3 * * *\t2026-11-26T03:00:00.000Z\tclient\tn1")?;
/// assert_eq!((s.function.as_str(), s.when.as_str()), ("nightly", "0 3 * * *"));
/// assert_eq!(s.next.as_deref(), Some("2026-11-26T03:00:00.000Z"));
/// assert_eq!((s.source.as_str(), s.unique.as_str()), ("client", "n1"));
/// let never = ScheduleEntry::parse("H:vm:8\treport\t0 0 30 2 *\t-\tconfig\t")?;
/// assert_eq!((never.next, never.unique.as_str()), (None, ""));
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleEntry {
    /// The schedule's handle (what `drop schedule` takes).
    pub handle: String,
    /// Function name of the jobs it submits.
    pub function: String,
    /// The five time fields (minute, hour, day of month, month, day of
    /// week), space-separated, `*` for any; `once` for an epoch job
    /// waiting for its time (the handle is the job's; `drop schedule`
    /// cancels it).
    pub when: String,
    /// Its next firing (RFC 3339 UTC with milliseconds); `None` if it never
    /// fires again.
    pub next: Option<String>,
    /// `client` (SUBMIT_JOB_SCHED: day of week 0 = Monday) or `config` (a
    /// `[[schedule]]` of the config file: cron, 0 = Sunday; `drop schedule`
    /// refuses it).
    pub source: String,
    /// Unique id of the jobs it submits (empty for none).
    pub unique: String,
}

impl ScheduleEntry {
    /// Parses one `show schedules` line.
    ///
    /// ```
    /// assert!(gearshift_client::admin::ScheduleEntry::parse("H:1\tf\t* * * * *\t-").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<ScheduleEntry> {
        let bad = || Error::protocol(format!("bad show schedules line {line:?}"));
        let f: Vec<&str> = line.splitn(6, '\t').collect();
        let [handle, function, when, next, source, unique] = f[..] else {
            return Err(bad());
        };
        Ok(ScheduleEntry {
            handle: handle.to_owned(),
            function: function.to_owned(),
            when: when.to_owned(),
            next: (next != "-").then(|| next.to_owned()),
            source: source.to_owned(),
            unique: unique.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show_job_lines(extra: &[&str]) -> Vec<String> {
        let mut lines: Vec<String> = [
            "handle: H:vm:3",
            "function: f",
            "unique: ",
            "priority: high",
            "state: completed",
            "attempts: 2",
            "created: 2026-11-25T18:49:17.123Z",
            "started: 2026-11-25T18:49:18.000Z",
            "finished: 2026-11-25T18:49:18.500Z",
            "worker: w1@127.0.0.1",
            "error: -",
            "result_size: 2",
        ]
        .map(str::to_owned)
        .to_vec();
        lines.extend(extra.iter().map(|l| (*l).to_owned()));
        lines.push("history: 2026-11-25T18:49:17.123Z queued".to_owned());
        lines
    }

    #[test]
    fn show_job_due() {
        let j =
            JobDetail::parse(&show_job_lines(&["due: 2026-11-25T18:50:00.250Z"])).expect("parses");
        assert_eq!(j.due.as_deref(), Some("2026-11-25T18:50:00.250Z"));
        assert_eq!(j.due_ms(), Some(1_795_632_600_250));
        for lines in [show_job_lines(&["due: -"]), show_job_lines(&[])] {
            let j = JobDetail::parse(&lines).expect("parses");
            assert_eq!((j.due_ms(), j.due), (None, None));
        }
    }

    #[test]
    fn show_job_outcome_and_last_failure() {
        // Completed on its second run: the first run's failure stays.
        let j = JobDetail::parse(&show_job_lines(&[
            "outcome: completed",
            "last_failure: 1 2026-11-25T18:49:17.500Z exception: disk full",
        ]))
        .expect("parses");
        assert_eq!(j.outcome.as_deref(), Some("completed"));
        assert_eq!(
            j.last_failure,
            Some(LastFailure {
                attempt: Some(1),
                time: Some("2026-11-25T18:49:17.500Z".into()),
                detail: "exception: disk full".into(),
            })
        );
        assert_eq!(j.history.len(), 1);
        // Live and never failed.
        let j =
            JobDetail::parse(&show_job_lines(&["outcome: -", "last_failure: -"])).expect("parses");
        assert_eq!((j.outcome, j.last_failure), (None, None));
        // What the server did not know, and an empty failure text.
        let j = JobDetail::parse(&show_job_lines(&["outcome: failed", "last_failure: - - "]))
            .expect("parses");
        let f = j.last_failure.expect("a failure");
        assert_eq!((f.attempt, f.time, f.detail.as_str()), (None, None, ""));
        // A server without the lines.
        let j = JobDetail::parse(&show_job_lines(&[])).expect("parses");
        assert_eq!((j.outcome, j.last_failure), (None, None));
        // A garbled one is refused, not read as no failure.
        let r = JobDetail::parse(&show_job_lines(&["outcome: failed", "last_failure: x y z"]));
        assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
    }
}
