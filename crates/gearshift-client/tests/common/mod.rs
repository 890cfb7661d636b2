//! Shared helpers of the integration tests: start an in-process Gearshift
//! or a real gearmand 1.1.20 on a free loopback port (the process is killed
//! on drop, even when a test panics), run workers that can be stopped or
//! aborted, and bound every scenario in time.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use gearshift_client::{AdminClient, Client, Worker, WorkerBuilder};
use gearshift_core::CoreConfig;
use gearshift_server::{Server, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound on one whole scenario.
pub const SCENARIO_LIMIT: Duration = Duration::from_secs(20);
/// Upper bound on one wait inside a scenario.
pub const WAIT: Duration = Duration::from_secs(5);
/// The gearmand binary the compatibility runs use.
pub const GEARMAND: &str = "/usr/sbin/gearmand";

/// Which server a scenario runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Gearshift, in this process.
    Gearshift,
    /// gearmand 1.1.20, as a child process.
    Gearmand,
}

/// Generates one `#[tokio::test]` per server kind for a scenario
/// `async fn name(kind: Kind)`.
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gearshift() {
                $crate::common::bounded(super::$name($crate::common::Kind::Gearshift)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gearmand() {
                $crate::common::bounded(super::$name($crate::common::Kind::Gearmand)).await
            }
        }
    )*};
}

/// Runs a scenario, failing it if it takes longer than [`SCENARIO_LIMIT`].
pub async fn bounded(scenario: impl Future<Output = ()>) {
    if tokio::time::timeout(SCENARIO_LIMIT, scenario)
        .await
        .is_err()
    {
        panic!("scenario did not finish within {SCENARIO_LIMIT:?}");
    }
}

/// Awaits `fut`, failing the test after [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Polls `check` every 20 ms until it is true, failing after [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        if tokio::time::Instant::now() > deadline {
            panic!("condition never became true: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A running test server of either kind.
pub struct TestServer {
    /// Which kind.
    pub kind: Kind,
    /// Where it listens.
    pub addr: SocketAddr,
    threads: u32,
    inner: Inner,
}

enum Inner {
    InProcess {
        stop: Option<oneshot::Sender<()>>,
        task: Option<JoinHandle<()>>,
    },
    Process {
        child: Option<Child>,
    },
    Stopped,
}

impl TestServer {
    /// Starts a server of `kind` on a free port.
    pub async fn start(kind: Kind) -> TestServer {
        TestServer::start_on(kind, 0).await
    }

    /// Starts a server of `kind` on `port` (0: a free one).
    pub async fn start_on(kind: Kind, port: u16) -> TestServer {
        match kind {
            Kind::Gearshift => start_gearshift(port).await,
            Kind::Gearmand => start_gearmand(port, 0).await,
        }
    }

    /// Like [`TestServer::start`], with gearmand given `-t threads` instead
    /// of `-t 0` (gearmand 1.1.20 never fires CAN_DO_TIMEOUT timers when it
    /// runs single-threaded).
    pub async fn start_threaded(kind: Kind, threads: u32) -> TestServer {
        match kind {
            Kind::Gearshift => start_gearshift(0).await,
            Kind::Gearmand => start_gearmand(0, threads).await,
        }
    }

    /// Stops the server and waits until it is gone: in-process Gearshift
    /// shuts down (it closes every connection), gearmand is killed.
    pub async fn stop(&mut self) {
        match std::mem::replace(&mut self.inner, Inner::Stopped) {
            Inner::InProcess { stop, task } => {
                if let Some(stop) = stop {
                    let _ = stop.send(());
                }
                if let Some(task) = task {
                    within("the in-process server to stop", task)
                        .await
                        .expect("server task");
                }
            }
            Inner::Process { child } => {
                if let Some(mut child) = child {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Inner::Stopped => {}
        }
    }

    /// Stops the server, then starts one of the same kind on the same port.
    pub async fn restart(&mut self) {
        self.stop().await;
        let again = match self.kind {
            Kind::Gearshift => start_gearshift(self.addr.port()).await,
            Kind::Gearmand => start_gearmand(self.addr.port(), self.threads).await,
        };
        *self = again;
    }

    /// A client for this server only, with short test-friendly limits.
    pub fn client(&self) -> Client {
        client_for(&[self])
    }

    /// An admin connection.
    pub async fn admin(&self) -> AdminClient {
        within("admin connect", AdminClient::connect(self.addr))
            .await
            .expect("admin connect")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.inner, Inner::Stopped) {
            Inner::Process {
                child: Some(mut child),
            } => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Inner::InProcess {
                stop: Some(stop), ..
            } => {
                let _ = stop.send(());
            }
            _ => {}
        }
    }
}

/// A client over several test servers.
pub fn client_for(servers: &[&TestServer]) -> Client {
    Client::builder()
        .servers(servers.iter().map(|s| s.addr))
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(1))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .build()
        .expect("client")
}

/// A worker builder for the given servers, reconnecting quickly.
pub fn worker_for(servers: &[&TestServer]) -> WorkerBuilder {
    Worker::builder()
        .servers(servers.iter().map(|s| s.addr))
        .connect_timeout(Duration::from_secs(1))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
}

async fn start_gearshift(port: u16) -> TestServer {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let cfg = ServerConfig {
        listen: vec![addr],
        // The test command runs the suite again with several I/O threads.
        io_threads: std::env::var("GEARSHIFT_TEST_IO_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        core: CoreConfig {
            handle_prefix: "H:test".to_owned(),
            pid: std::process::id(),
            ..CoreConfig::default()
        },
        ..ServerConfig::default()
    };
    // Rebinding a port just released can race the old listener's close.
    let mut tries = 0;
    let server = loop {
        match Server::bind(cfg.clone()).await {
            Ok(s) => break s,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot bind Gearshift on {addr}: {e}"),
        }
    };
    let addr = server.local_addrs()[0];
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    TestServer {
        kind: Kind::Gearshift,
        addr,
        threads: 0,
        inner: Inner::InProcess {
            stop: Some(tx),
            task: Some(task),
        },
    }
}

fn free_port() -> u16 {
    let l = StdListener::bind("127.0.0.1:0").expect("bind probe");
    l.local_addr().expect("probe addr").port()
}

async fn start_gearmand(port: u16, threads: u32) -> TestServer {
    let port = if port == 0 { free_port() } else { port };
    let child = Command::new(GEARMAND)
        .args([
            "-L",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            &threads.to_string(),
            "--log-file=none",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gearmand (is gearman-job-server installed?)");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let server = TestServer {
        kind: Kind::Gearmand,
        addr,
        threads,
        inner: Inner::Process { child: Some(child) },
    };
    eventually("gearmand to accept connections", || async {
        tokio::net::TcpStream::connect(addr).await.is_ok()
    })
    .await;
    server
}

/// A worker running in its own task.
pub struct RunningWorker {
    stop: Option<oneshot::Sender<()>>,
    /// Fires when `run` has taken the stop (its shutdown future resolved).
    taken: Option<oneshot::Receiver<()>>,
    task: Option<JoinHandle<()>>,
}

impl RunningWorker {
    /// Starts `worker.run` in a task.
    pub fn spawn(worker: Worker) -> RunningWorker {
        let (tx, rx) = oneshot::channel::<()>();
        let (taken_tx, taken) = oneshot::channel::<()>();
        let task = tokio::spawn(worker.run(async move {
            let _ = rx.await;
            let _ = taken_tx.send(());
        }));
        RunningWorker {
            stop: Some(tx),
            taken: Some(taken),
            task: Some(task),
        }
    }

    /// Asks for a graceful stop and waits until the worker has taken it:
    /// `run` polls its sessions right after its shutdown future resolves,
    /// in the same poll, so from then on no session asks for a new job.
    pub async fn request_stop_and_wait_taken(&mut self) {
        self.request_stop();
        if let Some(taken) = self.taken.take() {
            within("the worker to take the stop", taken)
                .await
                .expect("shutdown future resolved");
        }
    }

    /// Asks for a graceful stop without waiting.
    pub fn request_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Asks for a graceful stop and waits until `run` returned.
    pub async fn stop(mut self) {
        self.request_stop();
        if let Some(task) = self.task.take() {
            within("the worker to stop", task)
                .await
                .expect("worker task");
        }
    }

    /// Waits for `run` to return (after [`RunningWorker::request_stop`]).
    pub async fn join(mut self) {
        if let Some(task) = self.task.take() {
            within("the worker to return", task)
                .await
                .expect("worker task");
        }
    }

    /// True once `run` returned.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Kills the worker task: its connections drop mid-job.
    pub async fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
