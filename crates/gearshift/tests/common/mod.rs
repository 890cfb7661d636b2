//! Helpers of the command-line tests: a `gearshift serve --store memory`
//! (or gearmand) child on a free loopback port, `gearshift` child processes
//! killed on drop, and runs bounded in time.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Upper bound on one wait.
pub const WAIT: Duration = Duration::from_secs(10);

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_gearshift");

/// Whether `addr` answers the admin `version` as gearmand 1.1 does.
fn answers_as_gearmand(addr: &str) -> bool {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    if c.write_all(b"version\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = c.read(&mut buf).unwrap_or(0);
    buf[..n].starts_with(b"OK 1.")
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind probe");
    l.local_addr().expect("probe addr").port()
}

/// Polls `check` every 20 ms until it is true, panicking after [`WAIT`].
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed (and reaped) on drop.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`TERM`, `INT`) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{name} failed");
    }

    /// Waits for the exit, panicking after `limit`.
    pub fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "process did not exit within {limit:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the exit and reads all of stdout and stderr (which must be piped).
    pub fn finish(mut self, limit: Duration) -> Out {
        let stdout = self.child.stdout.take().map(reader);
        let stderr = self.child.stderr.take().map(reader);
        let status = self.wait_within(limit);
        let take = |r: Option<mpsc::Receiver<Vec<u8>>>| {
            r.map(|rx| rx.recv_timeout(WAIT).expect("output reader"))
                .unwrap_or_default()
        };
        Out {
            status,
            stdout: String::from_utf8_lossy(&take(stdout)).into_owned(),
            stderr: String::from_utf8_lossy(&take(stderr)).into_owned(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child's stderr read on a thread as it comes, so that a test can wait
/// for a line instead of sleeping (see [`Proc::watch_stderr`]).
pub struct Watched {
    seen: std::sync::Arc<std::sync::Mutex<(Vec<u8>, bool)>>,
}

impl Watched {
    /// What the child wrote so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("stderr lock").0).into_owned()
    }

    /// Waits until the child wrote `needle`, panicking after [`WAIT`] with
    /// what it wrote.
    pub fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.text().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "never wrote {needle:?} to stderr; wrote: {:?}",
                self.text()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the child wrote, once its stderr closed (bounded by [`WAIT`]).
    pub fn all(&self) -> String {
        let deadline = Instant::now() + WAIT;
        while !self.seen.lock().expect("stderr lock").1 {
            assert!(Instant::now() < deadline, "stderr still open");
            thread::sleep(Duration::from_millis(10));
        }
        self.text()
    }
}

impl Proc {
    /// Reads its stderr (which must be piped) on a thread from now on;
    /// [`Proc::finish`] then returns an empty stderr.
    pub fn watch_stderr(&mut self) -> Watched {
        let mut pipe = self.child.stderr.take().expect("stderr piped");
        let seen = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), false)));
        let out = seen.clone();
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => out
                        .lock()
                        .expect("stderr lock")
                        .0
                        .extend_from_slice(&chunk[..n]),
                }
            }
            out.lock().expect("stderr lock").1 = true;
        });
        Watched { seen }
    }
}

/// Reads a pipe to its end on a thread.
fn reader(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// What a finished `gearshift` run printed.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The exit code (-1 if killed by a signal).
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
}

/// A job server child process.
pub struct Server {
    pub addr: String,
    pub port: u16,
    pub proc: Proc,
    /// Its log file, removed with it.
    pub log: Option<tempfile::TempPath>,
}

impl Server {
    /// `gearshift serve --store memory` on a free port.
    pub fn gearshift() -> Server {
        Server::gearshift_with(&["--store", "memory"])
    }

    /// `gearshift serve` with these extra flags on port 0: the port it got
    /// is read from its log, so tests running side by side never race for
    /// a port.
    pub fn gearshift_with(flags: &[&str]) -> Server {
        Server::gearshift_env(flags, &[])
    }

    /// [`Server::gearshift_with`] with these environment variables set.
    pub fn gearshift_env(flags: &[&str], env: &[(&str, &str)]) -> Server {
        let log = tempfile::NamedTempFile::new()
            .expect("log file")
            .into_temp_path();
        let child = Command::new(BIN)
            .args(["serve", "-L", "127.0.0.1", "-p", "0", "--log-file"])
            .arg(&*log)
            .args(["--verbose", "INFO", "--job-handle-prefix", "H:test"])
            .args(flags)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn gearshift serve");
        let mut proc = Proc { child };
        let mut port = 0;
        eventually("the server to log its address", || {
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!("gearshift serve exited at start: {status}");
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            port = text
                .split("listening on 127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            port != 0
        });
        let mut server = Server::ready(port, proc);
        server.log = Some(log);
        server
    }

    /// gearmand 1.1 on a free port. The port is probed, then released, so
    /// another test's listener (a server on port 0) can take it first: then
    /// gearmand exits, or something else answers, and it is started again
    /// on another port.
    pub fn gearmand() -> Server {
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("/usr/sbin/gearmand")
                .args(["-L", "127.0.0.1", "-p"])
                .arg(port.to_string())
                .args(["-t", "1", "--log-file=none"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn gearmand (is gearman-job-server installed?)");
            let mut proc = Proc { child };
            let addr = format!("127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = proc.child.try_wait() {
                    break;
                }
                if answers_as_gearmand(&addr) {
                    return Server {
                        addr,
                        port,
                        proc,
                        log: None,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = proc.child.kill();
        }
        panic!("gearmand did not start on any of 5 free ports");
    }

    fn ready(port: u16, proc: Proc) -> Server {
        let addr = format!("127.0.0.1:{port}");
        let server = Server {
            addr: addr.clone(),
            port,
            proc,
            log: None,
        };
        eventually("the server to accept connections", || {
            TcpStream::connect(&addr).is_ok()
        });
        server
    }

    /// A `gearshift` command aimed at this server through `GEARSHIFT_SERVERS`.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("GEARSHIFT_SERVERS", &self.addr)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Starts `gearshift ARGS…` in the background.
    pub fn spawn(&self, args: &[&str]) -> Proc {
        Proc {
            child: self.cmd(args).spawn().expect("spawn gearshift"),
        }
    }

    /// Runs `gearshift ARGS…` with `input` on stdin, to its end (bounded).
    pub fn run(&self, args: &[&str], input: &[u8]) -> Out {
        let mut c = self.cmd(args);
        c.stdin(Stdio::piped());
        let mut p = Proc {
            child: c.spawn().expect("spawn gearshift"),
        };
        if let Some(mut stdin) = p.child.stdin.take() {
            stdin.write_all(input).expect("write stdin");
        }
        p.finish(WAIT)
    }

    /// `gearshift admin ARGS… --json`, parsed.
    pub fn admin_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.insert(0, "admin");
        all.push("--json");
        let out = self.run(&all, b"");
        assert_eq!(out.code(), 0, "admin {args:?} failed: {}", out.stderr);
        serde_json::from_str(&out.stdout).expect("admin --json prints JSON")
    }

    /// The `status` row of `function`, if the server lists it.
    pub fn status_of(&self, function: &str) -> Option<serde_json::Value> {
        let rows = self.admin_json(&["status"]);
        rows.as_array()?
            .iter()
            .find(|r| r["function"] == function)
            .cloned()
    }

    /// Waits until `n` workers are registered for `function`.
    pub fn wait_workers(&self, function: &str, n: u64) {
        eventually(&format!("{n} workers for {function}"), || {
            self.status_of(function)
                .is_some_and(|r| r["workers"].as_u64() == Some(n))
        });
    }

    /// Starts `gearshift work ARGS…` and waits until it registered `function`.
    pub fn worker(&self, function: &str, args: &[&str]) -> Proc {
        let mut all = vec!["work", "-f", function];
        all.extend_from_slice(args);
        let p = self.spawn(&all);
        self.wait_workers(function, 1);
        p
    }
}
