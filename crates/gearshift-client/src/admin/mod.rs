//! The admin client: gearmand's text protocol (`status`, `workers`, …) on
//! the Gearman port, with list replies parsed into typed rows and `ERR …`
//! replies turned into [`Error::Admin`].
//!
//! - [`AdminClient`] (this file): one connection, one command at a time.
//! - `types`: [`FunctionStatus`], [`PriorityStatus`], [`WorkerInfo`],
//!   [`JobInfo`] and their line parsers.
//! - `words`: Gearshift's own words' replies, [`JobDetail`] (with
//!   [`LastFailure`] and [`HistoryEntry`]), [`DeadJob`], [`WorkerEntry`]
//!   and [`ScheduleEntry`].
//! - `load`: [`Load`], a function's workers and jobs as the bridges read them.
//! - `shared`: [`SharedAdmin`], one lazily opened connection a bridge's tasks share.
//!
//! Gearshift's own words (`show job`, `show dead`, `show workers`, `retry
//! dead`, `drop dead`, `pause`, `resume`, `show schedules`, `drop
//! schedule`) have methods here too; gearmand answers them with
//! [`AdminErrorKind::UnknownCommand`],
//! [`AdminErrorKind::UnknownShowArguments`] or (`drop schedule`)
//! [`AdminErrorKind::InvalidArguments`]. Their types are in this module
//! (`gearshift_client::admin::JobDetail`, …), not at the crate root.

mod load;
mod shared;
mod types;
mod words;

use std::time::Duration;

use bytes::BytesMut;

pub use load::Load;
pub use shared::SharedAdmin;
pub use types::{FunctionStatus, JobInfo, PriorityStatus, WorkerInfo};
pub use words::{DeadJob, HistoryEntry, JobDetail, LastFailure, ScheduleEntry, WorkerEntry};

use crate::addr::ServerAddr;
use crate::client::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT};
use crate::error::{AdminErrorKind, Error, Result};
use crate::tls::TlsConfig;
use crate::wire::Wire;

/// A connection speaking the admin text protocol to one server.
///
/// Commands are sent with `\r\n` (as `gearadmin` does; gearmand's
/// `create function` miscounts the name without the `\r`). A call that
/// times out leaves the reply unread, so the connection is then unusable
/// and later calls fail with [`Error::ConnectionLost`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = gearshift_server::Server::bind(gearshift_server::ServerConfig {
/// #     listen: vec!["127.0.0.1:0".parse()?], ..Default::default() }).await?;
/// # let addr = server.local_addrs()[0];
/// # tokio::spawn(server.run(std::future::pending()));
/// use gearshift_client::{AdminClient, AdminErrorKind, Client, Error};
///
/// let client = Client::builder().server(addr).build()?;
/// client.submit_background("resize", "a.png").await?;
///
/// let mut admin = AdminClient::connect(addr).await?;
/// let status = admin.status().await?;
/// let resize = status.iter().find(|s| s.function == "resize").unwrap();
/// assert_eq!((resize.total, resize.running, resize.workers), (1, 0, 0));
///
/// match admin.drop_function("nosuch").await {
///     Err(Error::Admin { kind: AdminErrorKind::FunctionNotFound, .. }) => {}
///     other => panic!("{other:?}"),
/// }
/// # Ok(()) }
/// ```
pub struct AdminClient {
    wire: Wire,
    addr: ServerAddr,
    timeout: Option<Duration>,
    broken: bool,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("addr", &self.addr)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// Connects to one server (port 4730 if none is given).
    ///
    /// ```no_run
    /// # async fn f() -> gearshift_client::Result<()> {
    /// let mut admin = gearshift_client::AdminClient::connect("127.0.0.1:4730").await?;
    /// println!("{}", admin.version().await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(addr: impl ToString) -> Result<AdminClient> {
        AdminClient::connect_with(addr, None).await
    }

    /// Connects over TLS (see [`TlsConfig`]) when `tls` is set, else like
    /// [`connect`](Self::connect).
    ///
    /// ```no_run
    /// # async fn f() -> gearshift_client::Result<()> {
    /// use gearshift_client::{AdminClient, TlsConfig};
    /// let tls = TlsConfig::builder().ca_file("/etc/gearman/ca.pem").build()?;
    /// let mut admin = AdminClient::connect_with("gearman.internal", Some(&tls)).await?;
    /// println!("{}", admin.version().await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(addr: impl ToString, tls: Option<&TlsConfig>) -> Result<AdminClient> {
        let addr = ServerAddr::new(addr);
        addr.check()?;
        let wire = Wire::connect(&addr, DEFAULT_CONNECT_TIMEOUT, tls).await?;
        Ok(AdminClient {
            wire,
            addr,
            timeout: Some(DEFAULT_TIMEOUT),
            broken: false,
        })
    }

    /// The limit on each command (30 s by default; `None`: no limit).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) {
    /// admin.set_timeout(Some(std::time::Duration::from_secs(2)));
    /// # }
    /// ```
    pub fn set_timeout(&mut self, limit: Option<Duration>) {
        self.timeout = limit;
    }

    /// `status`: every function's queued+running, running and worker counts.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for s in admin.status().await? {
    ///     println!("{}: {} jobs, {} running, {} workers", s.function, s.total, s.running, s.workers);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn status(&mut self) -> Result<Vec<FunctionStatus>> {
        let lines = self.list("status").await?;
        lines.iter().map(|l| FunctionStatus::parse(l)).collect()
    }

    /// `prioritystatus`: queued jobs per priority, per function.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for p in admin.priority_status().await? {
    ///     println!("{}: {}/{}/{}", p.function, p.high, p.normal, p.low);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn priority_status(&mut self) -> Result<Vec<PriorityStatus>> {
        let lines = self.list("prioritystatus").await?;
        lines.iter().map(|l| PriorityStatus::parse(l)).collect()
    }

    /// `workers`: every connection (clients included) and its functions.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let workers = admin.workers().await?;
    /// let busy = workers.iter().filter(|w| !w.functions.is_empty()).count();
    /// # let _ = busy; Ok(()) }
    /// ```
    pub async fn workers(&mut self) -> Result<Vec<WorkerInfo>> {
        let lines = self.list("workers").await?;
        lines.iter().map(|l| WorkerInfo::parse(l)).collect()
    }

    /// `show jobs`: every job with its retry count and flags.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for j in admin.show_jobs().await? {
    ///     println!("{} retried {} times", j.handle, j.retries);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show_jobs(&mut self) -> Result<Vec<JobInfo>> {
        let lines = self.list("show jobs").await?;
        lines.iter().map(|l| JobInfo::parse(l)).collect()
    }

    /// `show unique jobs`: the unique id of every job (empty for none).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let uniques = admin.show_unique_jobs().await?;
    /// # let _ = uniques; Ok(()) }
    /// ```
    pub async fn show_unique_jobs(&mut self) -> Result<Vec<String>> {
        self.list("show unique jobs").await
    }

    /// `cancel job H`: waiting clients get WORK_FAIL; an unknown handle is
    /// [`AdminErrorKind::UnknownJob`].
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.cancel_job("H:host:17").await?;
    /// # Ok(()) }
    /// ```
    pub async fn cancel_job(&mut self, handle: &str) -> Result<()> {
        self.ok(&format!("cancel job {handle}")).await.map(drop)
    }

    /// `create function F`.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.create_function("reports").await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_function(&mut self, name: &str) -> Result<()> {
        self.ok(&format!("create function {name}")).await.map(drop)
    }

    /// `drop function F`: refused ([`AdminErrorKind::FunctionBusy`] or
    /// [`AdminErrorKind::FunctionNotFound`]) unless the function is idle.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.drop_function("reports").await?;
    /// # Ok(()) }
    /// ```
    pub async fn drop_function(&mut self, name: &str) -> Result<()> {
        self.ok(&format!("drop function {name}")).await.map(drop)
    }

    /// `maxqueue F N`: at most `limit` jobs for the function (≤ 0: unlimited).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.max_queue("reports", 1000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn max_queue(&mut self, function: &str, limit: i64) -> Result<()> {
        self.ok(&format!("maxqueue {function} {limit}"))
            .await
            .map(drop)
    }

    /// `maxqueue F H N L`: limits per priority (high, normal, low).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.max_queue_by_priority("reports", 10, 100, 1000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn max_queue_by_priority(
        &mut self,
        function: &str,
        high: i64,
        normal: i64,
        low: i64,
    ) -> Result<()> {
        self.ok(&format!("maxqueue {function} {high} {normal} {low}"))
            .await
            .map(drop)
    }

    /// `version`: the server's version string.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// println!("{}", admin.version().await?);
    /// # Ok(()) }
    /// ```
    pub async fn version(&mut self) -> Result<String> {
        self.ok("version").await
    }

    /// `getpid`: the server's process id.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let pid = admin.getpid().await?;
    /// # let _ = pid; Ok(()) }
    /// ```
    pub async fn getpid(&mut self) -> Result<u32> {
        let text = self.ok("getpid").await?;
        text.trim()
            .parse()
            .map_err(|_| Error::protocol(format!("bad getpid reply {text:?}")))
    }

    /// `verbose`: the server's log level name.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// println!("{}", admin.verbose().await?);
    /// # Ok(()) }
    /// ```
    pub async fn verbose(&mut self) -> Result<String> {
        self.ok("verbose").await
    }

    /// `shutdown [graceful]` (Gearshift; gearmand removed it in 1.1.15 and
    /// answers [`AdminErrorKind::UnknownCommand`]).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.shutdown(true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&mut self, graceful: bool) -> Result<()> {
        let line = if graceful {
            "shutdown graceful"
        } else {
            "shutdown"
        };
        self.ok(line).await.map(drop)
    }

    /// `show job H` (Gearshift): one job, live or kept after it ended (a
    /// dead job, or a finished one under a `keep_results` policy), with its
    /// history. A handle the server does not know (or no longer keeps) is
    /// [`AdminErrorKind::UnknownJob`].
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let job = admin.show_job("H:host:17").await?;
    /// println!("{} after {} attempts: {:?}", job.state, job.attempts, job.error);
    /// for h in &job.history {
    ///     println!("{} {} {}", h.time, h.event, h.detail);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show_job(&mut self, handle: &str) -> Result<JobDetail> {
        let handle = word("handle", handle)?;
        let lines = self.list(&format!("show job {handle}")).await?;
        JobDetail::parse(&lines)
    }

    /// `show dead [F]` (Gearshift): the background jobs that failed for good
    /// under a policy, all of them or one function's.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for d in admin.show_dead(Some("resize")).await? {
    ///     println!("{} died at {} after {} attempts", d.handle, d.died_at, d.attempts);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show_dead(&mut self, function: Option<&str>) -> Result<Vec<DeadJob>> {
        let line = match function {
            Some(f) => format!("show dead {}", word("function", f)?),
            None => "show dead".to_owned(),
        };
        let lines = self.list(&line).await?;
        lines.iter().map(|l| DeadJob::parse(l)).collect()
    }

    /// `show workers` (Gearshift): the worker registry, every connection
    /// that registered a function or holds a job, with its counters.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for w in admin.show_workers().await? {
    ///     println!("{} {}: {} done, {} failed, running {:?}", w.client_id, w.address, w.done, w.failed, w.held);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show_workers(&mut self) -> Result<Vec<WorkerEntry>> {
        let lines = self.list("show workers").await?;
        lines.iter().map(|l| WorkerEntry::parse(l)).collect()
    }

    /// `retry dead H|all [F]` (Gearshift): queues dead jobs again, `target`
    /// being a handle or `all` (narrowed to `function` if given); returns
    /// how many went back to their queue (0 for a handle not in the dead set).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let n = admin.retry_dead("all", Some("resize")).await?;
    /// println!("{n} jobs queued again");
    /// # Ok(()) }
    /// ```
    pub async fn retry_dead(&mut self, target: &str, function: Option<&str>) -> Result<u64> {
        self.dead_command("retry", target, function).await
    }

    /// `drop dead H|all [F]` (Gearshift): forgets dead jobs, `target` being
    /// a handle or `all` (narrowed to `function` if given); returns how many.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let n = admin.drop_dead("H:host:17", None).await?;
    /// assert!(n <= 1);
    /// # Ok(()) }
    /// ```
    pub async fn drop_dead(&mut self, target: &str, function: Option<&str>) -> Result<u64> {
        self.dead_command("drop", target, function).await
    }

    /// `pause F` (Gearshift): the function's jobs are still accepted and
    /// queued, but not handed to workers until [`AdminClient::resume`]. A
    /// function the server has not seen yet is created paused.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.pause("resize").await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&mut self, function: &str) -> Result<()> {
        let function = word("function", function)?;
        self.ok(&format!("pause {function}")).await.map(drop)
    }

    /// `resume F` (Gearshift): hands the function's jobs out again.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.resume("resize").await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume(&mut self, function: &str) -> Result<()> {
        let function = word("function", function)?;
        self.ok(&format!("resume {function}")).await.map(drop)
    }

    /// `show schedules` (Gearshift): every recurring job, submitted by a
    /// client (SUBMIT_JOB_SCHED) or declared in the config file, with its
    /// next firing.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// for s in admin.show_schedules().await? {
    ///     println!("{} {} [{}] next {:?} ({})", s.handle, s.function, s.when, s.next, s.source);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show_schedules(&mut self) -> Result<Vec<ScheduleEntry>> {
        let lines = self.list("show schedules").await?;
        lines.iter().map(|l| ScheduleEntry::parse(l)).collect()
    }

    /// `drop schedule H` (Gearshift): removes a schedule a client submitted;
    /// no job it already submitted is touched. A handle naming no schedule
    /// is [`AdminErrorKind::UnknownSchedule`]; one from the config file is
    /// [`AdminErrorKind::ScheduleInConfig`] (remove it there and reload).
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// admin.drop_schedule("H:host:17").await?;
    /// # Ok(()) }
    /// ```
    pub async fn drop_schedule(&mut self, handle: &str) -> Result<()> {
        let handle = word("handle", handle)?;
        self.ok(&format!("drop schedule {handle}")).await.map(drop)
    }

    async fn dead_command(
        &mut self,
        verb: &str,
        target: &str,
        function: Option<&str>,
    ) -> Result<u64> {
        let mut line = format!("{verb} dead {}", word("target", target)?);
        if let Some(f) = function {
            line.push(' ');
            line.push_str(word("function", f)?);
        }
        let text = self.ok(&line).await?;
        text.trim()
            .parse()
            .map_err(|_| Error::protocol(format!("bad {verb} dead reply {text:?}")))
    }

    /// Sends any command line and returns its one-line reply after `OK`
    /// (empty for a bare `OK`); `ERR …` becomes [`Error::Admin`].
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let version = admin.command("version").await?;
    /// # let _ = version; Ok(()) }
    /// ```
    pub async fn command(&mut self, line: &str) -> Result<String> {
        self.ok(line).await
    }

    /// Sends any command whose reply is a list ended by `.` and returns its lines.
    ///
    /// ```no_run
    /// # async fn f(mut admin: gearshift_client::AdminClient) -> gearshift_client::Result<()> {
    /// let raw = admin.list("status").await?;
    /// # let _ = raw; Ok(()) }
    /// ```
    pub async fn list(&mut self, line: &str) -> Result<Vec<String>> {
        self.send_line(line)?;
        let read = crate::client::within(self.timeout, self.read_list()).await;
        self.settle(read)
    }

    async fn ok(&mut self, line: &str) -> Result<String> {
        self.send_line(line)?;
        let read = crate::client::within(self.timeout, self.read_ok()).await;
        self.settle(read)
    }

    /// Queues one command line.
    fn send_line(&mut self, line: &str) -> Result<()> {
        if self.broken {
            return Err(Error::ConnectionLost);
        }
        if line.contains(['\n', '\r']) {
            return Err(Error::InvalidArgument("a command is one line".into()));
        }
        self.wire.queue_raw(line.as_bytes());
        self.wire.queue_raw(b"\r\n");
        Ok(())
    }

    /// After a failure that may leave a reply unread, the connection is unusable.
    fn settle<T>(&mut self, result: Result<T>) -> Result<T> {
        if matches!(
            result,
            Err(Error::Timeout
                | Error::ConnectionLost
                | Error::Io(_)
                | Error::Protocol(_)
                | Error::TlsPort { .. })
        ) {
            self.broken = true;
        }
        result
    }

    async fn next_line(&mut self) -> Result<String> {
        match self.wire.recv_line().await? {
            Some(line) => Ok(text(line)),
            None => Err(Error::ConnectionLost),
        }
    }

    async fn read_ok(&mut self) -> Result<String> {
        let line = self.next_line().await?;
        if let Some(rest) = line.strip_prefix("ERR ") {
            return Err(admin_error(rest));
        }
        match line.strip_prefix("OK") {
            Some(rest) => Ok(rest.trim_start().to_owned()),
            None => Err(Error::protocol(format!("unexpected admin reply {line:?}"))),
        }
    }

    async fn read_list(&mut self) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        loop {
            let line = self.next_line().await?;
            if line == "." {
                return Ok(lines);
            }
            if lines.is_empty() && !line.contains('\t') {
                if let Some(rest) = line.strip_prefix("ERR ") {
                    return Err(admin_error(rest));
                }
            }
            lines.push(line);
        }
    }
}

/// One word of a command line: the server splits lines at spaces, so an
/// argument may hold none (nor be empty).
fn word<'a>(what: &str, value: &'a str) -> Result<&'a str> {
    if value.is_empty() || value.contains(' ') {
        return Err(Error::InvalidArgument(format!(
            "the {what} {value:?} must be one word (non-empty, no spaces)"
        )));
    }
    Ok(value)
}

fn text(line: BytesMut) -> String {
    String::from_utf8_lossy(&line).into_owned()
}

fn admin_error(message: &str) -> Error {
    Error::Admin {
        kind: AdminErrorKind::classify(message),
        message: message.to_owned(),
    }
}
