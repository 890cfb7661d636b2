//! A throwaway PostgreSQL cluster for tests: initdb in a temporary
//! directory, trust authentication, 127.0.0.1 on a free port, fsync off.
//! As root the server runs as the `postgres` user (PostgreSQL refuses
//! root). A watcher process stops it and removes its directory when the
//! test process exits, so a shared cluster in a static is cleaned up too.
//! [`Cluster::start_tls`] turns on TLS with a given certificate.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// A running cluster.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    pub port: u16,
    as_postgres: bool,
    /// More server options (`-c ssl=on ...`).
    extra: String,
}

/// TLS for [`Cluster::start_tls`].
// Not every test binary that includes this module uses it.
#[allow(dead_code)]
pub struct ServerTls {
    /// The server's certificate (and any intermediates), PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
    /// TCP connections to any database but `postgres` (which
    /// [`Cluster::fresh_db`] connects to, plain) must use TLS.
    pub tls_only: bool,
    /// With `tls_only`: those connections authenticate with a client
    /// certificate signed by this CA (PEM) naming their user (`cert`).
    pub client_ca_pem: Option<String>,
}

/// The directory of the server programs: `PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` with an initdb. Panics (fails the test)
/// when there is none: the project's test command installs PostgreSQL.
fn pg_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("PG_BIN") {
        let bin = PathBuf::from(b);
        assert!(
            bin.join("initdb").exists(),
            "PG_BIN={} has no initdb: point it at PostgreSQL's server programs",
            bin.display()
        );
        return bin;
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server programs (no /usr/lib/postgresql/*/bin/initdb): install \
             Debian's postgresql package, or set PG_BIN"
        ),
    }
}

fn is_root() -> bool {
    std::env::var("USER").map(|u| u == "root").unwrap_or(false)
        || Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.trim_ascii() == b"0")
            .unwrap_or(false)
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl Cluster {
    /// initdb and start a new cluster.
    #[allow(dead_code)]
    pub fn start() -> Cluster {
        Cluster::start_with(None)
    }

    /// initdb and start a new cluster that serves TLS.
    #[allow(dead_code)]
    pub fn start_tls(tls: &ServerTls) -> Cluster {
        Cluster::start_with(Some(tls))
    }

    fn start_with(tls: Option<&ServerTls>) -> Cluster {
        static N: AtomicU32 = AtomicU32::new(0);
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!(
            "gearshift-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir));
        }
        let mut c = Cluster {
            bin,
            dir,
            port: free_port(),
            as_postgres,
            extra: String::new(),
        };
        c.watch();
        c.pg("initdb")
            .arg("-D")
            .arg(c.data())
            .args(["-U", "gearshift", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .map(|s| assert!(s.success(), "initdb failed"))
            .expect("run initdb");
        if let Some(tls) = tls {
            c.set_up_tls(tls);
        }
        c.resume();
        c
    }

    /// Puts the certificate and key in the data directory (the key readable
    /// by the server's user only, or PostgreSQL refuses it) and, for
    /// `tls_only`, makes pg_hba.conf take TLS only (`hostssl`).
    fn set_up_tls(&mut self, tls: &ServerTls) {
        use std::os::unix::fs::PermissionsExt;
        let data = self.data();
        let client_ca = tls.client_ca_pem.clone().unwrap_or_default();
        for (name, pem) in [
            ("server.crt", &tls.cert_pem),
            ("server.key", &tls.key_pem),
            ("client-ca.crt", &client_ca),
        ] {
            let path = data.join(name);
            std::fs::write(&path, pem).expect("write the server's TLS files");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod the server's TLS files");
            if self.as_postgres {
                run(Command::new("chown").arg("postgres:postgres").arg(&path));
            }
        }
        if tls.tls_only {
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
            // The first matching line wins: plain for `postgres`, else TLS.
            let mut new = String::from("host postgres all 127.0.0.1/32 trust\n");
            for line in text.lines() {
                match line.strip_prefix("host ") {
                    // `cert`: a client certificate naming the user.
                    Some(rest) if tls.client_ca_pem.is_some() => new.push_str(&format!(
                        "hostssl {}cert\n",
                        rest.trim_end().trim_end_matches("trust")
                    )),
                    Some(rest) => new.push_str(&format!("hostssl {rest}\n")),
                    None => new.push_str(&format!("{line}\n")),
                }
            }
            std::fs::write(&hba, new).expect("write pg_hba.conf");
        }
        self.extra = " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key".into();
        if tls.client_ca_pem.is_some() {
            self.extra.push_str(" -c ssl_ca_file=client-ca.crt");
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A server program, run as `postgres` when we are root.
    fn pg(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Starts the server (again, after [`Cluster::stop`]) on its port.
    pub fn resume(&self) {
        let opts = format!(
            "-k {} -p {} -c listen_addresses=127.0.0.1 -c fsync=off{}",
            self.dir.display(),
            self.port,
            self.extra
        );
        let ok = self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-w", "-t", "60", "-o", &opts, "start"])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl start")
            .success();
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        assert!(ok, "pg_ctl start failed:\n{log}");
    }

    /// Stops the server at once (no shutdown checkpoint).
    pub fn stop(&self) {
        let _ = self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// A watcher that stops the server and removes its directory once this
    /// process is gone (statics are never dropped). It must outlive us, so
    /// it is never waited for.
    #[allow(clippy::zombie_processes)]
    fn watch(&self) {
        let as_user = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
             {as_user}'{pg_ctl}' -D '{data}' -m immediate -w stop >/dev/null 2>&1; \
             rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.data().display(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the cluster watcher");
    }

    /// A URL for database `db` as the test user.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://gearshift@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database; returns its URL.
    pub fn fresh_db(&self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}", N.fetch_add(1, Ordering::Relaxed));
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .expect("connect to the test cluster");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        self.url(&name)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(c: &mut Command) {
    let s = c.status().expect("run a setup command");
    assert!(s.success(), "{c:?} failed");
}

/// The cluster every test of this binary shares (a database each).
#[allow(dead_code)]
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(Cluster::start)
}
