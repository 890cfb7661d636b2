//! The rows of the admin text protocol's list replies, and their parsers
//! (formats of gearmand 1.1, which Gearshift reproduces byte for byte).
//!
//! Numeric columns are split from the right, so a function name holding a
//! TAB still parses; an unparsable line is an [`Error::Protocol`].
//!
//! The rows of Gearshift's own words are in `words.rs`.

use crate::error::{Error, Result};

/// One line of `status`: `FUNCTION\tTOTAL\tRUNNING\tWORKERS`.
///
/// ```
/// use gearshift_client::FunctionStatus;
/// let s = FunctionStatus::parse("reverse\t3\t1\t2")?;
/// assert_eq!(s, FunctionStatus { function: "reverse".into(), total: 3, running: 1, workers: 2 });
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionStatus {
    /// Function name.
    pub function: String,
    /// Jobs queued or running.
    pub total: u64,
    /// Jobs running.
    pub running: u64,
    /// Workers registered for it.
    pub workers: u64,
}

impl FunctionStatus {
    /// Parses one `status` line.
    ///
    /// ```
    /// assert!(gearshift_client::FunctionStatus::parse("bad line").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<FunctionStatus> {
        let (function, [total, running, workers]) = split_numbers(line)?;
        Ok(FunctionStatus {
            function,
            total,
            running,
            workers,
        })
    }
}

/// One line of `prioritystatus`: `FUNCTION\tHIGH\tNORMAL\tLOW\tWORKERS`
/// (queued jobs per priority, running ones not counted).
///
/// ```
/// use gearshift_client::PriorityStatus;
/// let s = PriorityStatus::parse("f\t1\t2\t3\t0")?;
/// assert_eq!((s.high, s.normal, s.low, s.workers), (1, 2, 3, 0));
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityStatus {
    /// Function name.
    pub function: String,
    /// Queued high-priority jobs.
    pub high: u64,
    /// Queued normal-priority jobs.
    pub normal: u64,
    /// Queued low-priority jobs.
    pub low: u64,
    /// Workers registered for it.
    pub workers: u64,
}

impl PriorityStatus {
    /// Parses one `prioritystatus` line.
    ///
    /// ```
    /// assert!(gearshift_client::PriorityStatus::parse("f\t1\t2").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<PriorityStatus> {
        let (function, [high, normal, low, workers]) = split_numbers(line)?;
        Ok(PriorityStatus {
            function,
            high,
            normal,
            low,
            workers,
        })
    }
}

/// One line of `workers`: `FD IP CLIENT_ID : FUNCTION…` (clients are
/// listed too, with no function).
///
/// ```
/// use gearshift_client::WorkerInfo;
/// let w = WorkerInfo::parse("41 127.0.0.1 worker-1 : f2 f1")?;
/// assert_eq!(w.fd, 41);
/// assert_eq!(w.client_id, "worker-1");
/// assert_eq!(w.functions, ["f2", "f1"]);
/// let c = WorkerInfo::parse("15 127.0.0.1 - :")?;
/// assert!(c.functions.is_empty());
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// The server's file descriptor (or connection number) for it.
    pub fd: i64,
    /// Peer IP address.
    pub ip: String,
    /// SET_CLIENT_ID value (`-` when unset).
    pub client_id: String,
    /// Registered functions, as the server lists them.
    pub functions: Vec<String>,
}

impl WorkerInfo {
    /// Parses one `workers` line.
    ///
    /// ```
    /// let w = gearshift_client::WorkerInfo::parse("7 10.0.0.9  : f")?;
    /// assert_eq!(w.client_id, "");
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn parse(line: &str) -> Result<WorkerInfo> {
        let bad = || Error::protocol(format!("bad workers line {line:?}"));
        let mut parts = line.splitn(3, ' ');
        let fd = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let ip = parts.next().ok_or_else(bad)?.to_owned();
        let rest = parts.next().ok_or_else(bad)?;
        let (client_id, functions) = if let Some(after) = rest.strip_prefix(':') {
            ("", after)
        } else {
            let at = rest.find(" :").ok_or_else(bad)?;
            (&rest[..at], &rest[at + 2..])
        };
        Ok(WorkerInfo {
            fd,
            ip,
            client_id: client_id.to_owned(),
            functions: functions
                .split(' ')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

/// One line of `show jobs`: `HANDLE\tRETRIES\tIGNORE_JOB\tJOB_QUEUED`.
///
/// ```
/// use gearshift_client::JobInfo;
/// let j = JobInfo::parse("H:vm:16\t2\t0\t1")?;
/// assert_eq!(j, JobInfo { handle: "H:vm:16".into(), retries: 2, ignored: false, queued: true });
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// Job handle.
    pub handle: String,
    /// Times the job was requeued after losing its worker.
    pub retries: u64,
    /// Nobody will get the result (cancelled, or its clients left).
    pub ignored: bool,
    /// gearmand's JOB_QUEUED flag (1 for background jobs, 0 for foreground).
    pub queued: bool,
}

impl JobInfo {
    /// Parses one `show jobs` line.
    ///
    /// ```
    /// assert!(gearshift_client::JobInfo::parse("H:1\tx\t0\t0").is_err());
    /// ```
    pub fn parse(line: &str) -> Result<JobInfo> {
        let (handle, [retries, ignored, queued]) = split_numbers(line)?;
        Ok(JobInfo {
            handle,
            retries,
            ignored: ignored != 0,
            queued: queued != 0,
        })
    }
}

/// `NAME\tN1\t…\tNk`, the numbers taken from the right.
fn split_numbers<const K: usize>(line: &str) -> Result<(String, [u64; K])> {
    let bad = || Error::protocol(format!("bad admin line {line:?}"));
    let mut nums = [0u64; K];
    let mut rest = line;
    for slot in nums.iter_mut().rev() {
        let (head, tail) = rest.rsplit_once('\t').ok_or_else(bad)?;
        *slot = tail.trim().parse().map_err(|_| bad())?;
        rest = head;
    }
    Ok((rest.to_owned(), nums))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tab_in_function_name() {
        let s = FunctionStatus::parse("a\tb\t1\t2\t3").expect("parses");
        assert_eq!(s.function, "a\tb");
        assert_eq!((s.total, s.running, s.workers), (1, 2, 3));
    }

    #[test]
    fn bad_workers_lines() {
        assert!(WorkerInfo::parse("x 1.2.3.4 - :").is_err());
        assert!(WorkerInfo::parse("1 1.2.3.4").is_err());
        assert!(WorkerInfo::parse("1 1.2.3.4 nocolon").is_err());
    }
}
