//! `--tls` on `submit`, `work`, `admin` and `bench`: the built binary
//! through a TLS front made here (tokio-rustls, certificates from rcgen at
//! test time) that forwards to a plain `gearshift serve --store memory`;
//! libgearman's environment variables as fallbacks; clear errors for bad
//! files, an untrusted server and a plain server.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{Out, Server};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// A CA (its `ca.pem` in `dir`) and certificates it signs.
struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

fn pki(dir: &Path, name: &str) -> Pki {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("test CA {name}"));
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write CA");
    Pki { dir, ca }
}

impl Pki {
    fn ca(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    /// Writes `{stem}.pem` and `{stem}.key` for `names`; returns the paths.
    fn issue(&self, stem: &str, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .expect("params")
            .signed_by(&key, &self.ca)
            .expect("certificate");
        let (c, k) = (
            self.dir.join(format!("{stem}.pem")),
            self.dir.join(format!("{stem}.key")),
        );
        std::fs::write(&c, cert.pem()).expect("write cert");
        std::fs::write(&k, key.serialize_pem()).expect("write key");
        (c.display().to_string(), k.display().to_string())
    }
}

/// A TLS listener forwarding to `backend`, on its own runtime.
struct Front {
    server: String,
    forwarded: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

fn front(backend: &str, pki: &Pki, client_ca: Option<&Pki>) -> Front {
    let (cert, key) = pki.issue("server", &["localhost", "127.0.0.1"]);
    let chain = CertificateDer::pem_file_iter(&cert)
        .expect("read cert")
        .collect::<Result<Vec<_>, _>>()
        .expect("chain");
    let key = PrivateKeyDer::from_pem_file(&key).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(ca.ca.der().clone()).expect("client CA");
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .expect("verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let acceptor = TlsAcceptor::from(Arc::new(
        builder.with_single_cert(chain, key).expect("server config"),
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let forwarded = Arc::new(AtomicUsize::new(0));
    let (f, backend) = (forwarded.clone(), backend.to_owned());
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, f, backend) = (acceptor.clone(), f.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                f.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut plain) = TcpStream::connect(&backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    Front {
        server: format!("localhost:{port}"),
        forwarded,
        _rt: rt,
    }
}

impl Front {
    fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }
}

/// `gearshift ARGS…` with `env` set (libgearman's variables and SSL_CERT_FILE cleared first).
fn run(s: &Server, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = s.cmd(args);
    for v in [
        "GEARMAND_CA_CERTIFICATE",
        "GEARMAN_CLIENT_PEM",
        "GEARMAN_CLIENT_KEY",
        "SSL_CERT_FILE",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    common::Proc {
        child: c.spawn().expect("spawn gearshift"),
    }
    .finish(common::WAIT)
}

#[test]
fn submit_work_admin_and_bench_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::gearshift();
    let ca = pki(dir.path(), "server");
    let f = front(&s.addr, &ca, None);
    let tls = ["-s", &f.server, "--tls-ca", &ca.ca()];

    let mut args = vec!["work", "-f", "upper"];
    args.extend_from_slice(&tls);
    args.extend_from_slice(&["--", "tr", "a-z", "A-Z"]);
    let mut worker = s.spawn(&args);
    s.wait_workers("upper", 1);

    let mut args = vec!["submit", "-f", "upper"];
    args.extend_from_slice(&tls);
    args.push("hello");
    let out = run(&s, &args, &[]);
    assert_eq!((out.code(), out.stdout.as_str()), (0, "HELLO"), "{out:?}");

    // --tls with the CA from libgearman's variable; flags after the admin word.
    let out = run(
        &s,
        &["admin", "status", "--json", "-s", &f.server, "--tls"],
        &[("GEARMAND_CA_CERTIFICATE", &ca.ca())],
    );
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(out.stdout.contains("\"upper\""), "{out:?}");

    // --tls alone: the system bundle, here SSL_CERT_FILE.
    let out = run(
        &s,
        &["admin", "version", "-s", &f.server, "--tls"],
        &[("SSL_CERT_FILE", &ca.ca())],
    );
    assert_eq!(out.code(), 0, "{out:?}");

    // The variable alone does not turn TLS on: plain TCP to the plain port works.
    let out = run(
        &s,
        &["admin", "version"],
        &[("GEARMAND_CA_CERTIFICATE", &ca.ca())],
    );
    assert_eq!(out.code(), 0, "{out:?}");

    // Every bench scenario: clients, workers and admin queries over TLS.
    let mut args = vec!["bench", "-n", "200", "-c", "2", "-w", "2", "--json"];
    args.extend_from_slice(&tls);
    let out = run(&s, &args, &[]);
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(out.stdout.lines().count(), 4, "{out:?}");

    worker.signal("TERM");
    let status = worker.wait_within(common::WAIT);
    assert!(status.success(), "{status:?}");
    // worker, submit, admin twice, bench (several): all through the front.
    assert!(f.forwarded() >= 5, "{}", f.forwarded());
}

#[test]
fn client_certificate_from_flags_or_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::gearshift();
    let ca = pki(dir.path(), "server");
    let clients = pki(dir.path(), "clients");
    let f = front(&s.addr, &ca, Some(&clients));
    let (cert, key) = clients.issue("client", &["client"]);

    let out = run(
        &s,
        &[
            "admin",
            "version",
            "-s",
            &f.server,
            "--tls-ca",
            &ca.ca(),
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
        &[],
    );
    assert_eq!(out.code(), 0, "{out:?}");

    let env = [
        ("GEARMAND_CA_CERTIFICATE", ca.ca()),
        ("GEARMAN_CLIENT_PEM", cert.clone()),
        ("GEARMAN_CLIENT_KEY", key.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run(
        &s,
        &["submit", "-b", "-f", "f", "-s", &f.server, "--tls", "x"],
        &env,
    );
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(out.stdout.starts_with("H:test"), "{out:?}");

    // Without a client certificate the front refuses.
    let out = run(
        &s,
        &["admin", "version", "-s", &f.server, "--tls-ca", &ca.ca()],
        &[],
    );
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(f.forwarded(), 2);
}

#[test]
fn tls_errors_are_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::gearshift();
    let ca = pki(dir.path(), "server");
    let other = pki(dir.path(), "other");
    let f = front(&s.addr, &ca, None);

    // A file that cannot be read: exit 2 before any connection.
    let out = run(
        &s,
        &["submit", "-f", "f", "--tls-ca", "/nonexistent/ca.pem", "x"],
        &[],
    );
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr.contains("cannot read /nonexistent/ca.pem"),
        "{out:?}"
    );
    let out = run(&s, &["admin", "status", "--tls-cert", &ca.ca()], &[]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(out.stderr.contains("--tls-cert needs --tls-key"), "{out:?}");

    // An untrusted server: every command names it and the reason.
    let other_ca = other.ca();
    for args in [
        vec!["submit", "-f", "f", "x"],
        vec!["admin", "status"],
        vec!["work", "-f", "f"],
        vec!["bench", "-n", "10"],
    ] {
        let mut args = args.clone();
        args.extend_from_slice(&["-s", &f.server, "--tls-ca", &other_ca]);
        let out = run(&s, &args, &[]);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("TLS handshake with {} failed", f.server))
                && out.stderr.contains("UnknownIssuer"),
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(f.forwarded(), 0);

    // --tls to the plain port: a handshake error, not a hang.
    let out = run(
        &s,
        &[
            "submit",
            "-f",
            "f",
            "--tls-ca",
            &ca.ca(),
            "--tls-server-name",
            "localhost",
            "x",
        ],
        &[],
    );
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(out.stderr.contains("TLS handshake with"), "{out:?}");
}

/// `gearshift serve --ssl` with this certificate and key (and `extra` flags).
fn tls_server(cert: &str, key: &str, extra: &[&str]) -> Server {
    let mut flags = vec![
        "--store",
        "memory",
        "--ssl",
        "--ssl-certificate",
        cert,
        "--ssl-key",
        key,
    ];
    flags.extend_from_slice(extra);
    Server::gearshift_with(&flags)
}

#[test]
fn plain_tcp_to_a_tls_port_is_named_with_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = pki(dir.path(), "server");
    let (cert, key) = ca.issue("server", &["localhost", "127.0.0.1"]);
    let s = tls_server(&cert, &key, &[]);
    let want = format!(
        "{} serves TLS (it answered plain TCP with a TLS alert): pass --tls / --tls-ca FILE",
        s.addr
    );
    for args in [
        vec!["submit", "-f", "f", "x"],
        vec!["submit", "-b", "-f", "f", "x"],
        vec!["admin", "status"],
        vec!["work", "-f", "f"],
    ] {
        let out = run(&s, &args, &[]);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(&want), "{args:?}: {}", out.stderr);
    }
    // The same port with TLS: it is a working server.
    let out = run(&s, &["admin", "version", "--tls-ca", &ca.ca()], &[]);
    assert_eq!(out.code(), 0, "{out:?}");
}

#[test]
fn a_ca_certificate_as_the_servers_own_is_explained() {
    // What `openssl req -x509` makes: self-signed, basicConstraints CA:TRUE.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&c, cert.pem()).expect("write cert");
    std::fs::write(&k, key.serialize_pem()).expect("write key");
    let (c, k) = (c.display().to_string(), k.display().to_string());
    let s = tls_server(&c, &k, &[]);
    for args in [
        vec!["submit", "-f", "f", "x"],
        vec!["admin", "status"],
        vec!["work", "-f", "f"],
    ] {
        let mut args = args.clone();
        args.extend_from_slice(&["--tls-ca", &c]);
        let out = run(&s, &args, &[]);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(
                "the server's certificate is a CA certificate (basicConstraints CA:TRUE) \
                 used as the server's own [CaUsedAsEndEntity]; rustls refuses that: give the \
                 server a leaf certificate signed by that CA"
            ) && out.stderr.contains("docs/tls.md"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn certificate_errors_are_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = pki(dir.path(), "server");
    let (cert, key) = ca.issue("server", &["gearman.internal"]);
    let s = tls_server(&cert, &key, &[]);
    // Connected as 127.0.0.1, a name the certificate does not carry.
    let out = run(&s, &["admin", "status", "--tls-ca", &ca.ca()], &[]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr.contains(
            "the server's certificate is not valid for \"127.0.0.1\" (it carries \
             gearman.internal) [NotValidForName]"
        ),
        "{}",
        out.stderr
    );
    // The name set explicitly: accepted.
    let out = run(
        &s,
        &[
            "admin",
            "status",
            "--tls-ca",
            &ca.ca(),
            "--tls-server-name",
            "gearman.internal",
        ],
        &[],
    );
    assert_eq!(out.code(), 0, "{out:?}");
}

#[test]
fn help_says_the_variables_never_turn_tls_on() {
    let s = Server::gearshift();
    for sub in ["submit", "work", "admin", "bench", "top"] {
        let out = run(&s, &[sub, "--help"], &[]);
        assert_eq!(out.code(), 0, "{out:?}");
        for (flag, var) in [
            ("--tls-ca", "GEARMAND_CA_CERTIFICATE"),
            ("--tls-cert", "GEARMAN_CLIENT_PEM"),
            ("--tls-key", "GEARMAN_CLIENT_KEY"),
        ] {
            // The flag's entry: its line and, in the long layout, the
            // indented lines under it, up to the next option.
            let at = out
                .stdout
                .find(&format!("{flag} <FILE>"))
                .unwrap_or_else(|| panic!("{sub} --help lacks {flag}: {}", out.stdout));
            let entry = &out.stdout[at..];
            let end = ["\n  -", "\n      --"]
                .iter()
                .filter_map(|m| entry.find(m))
                .min()
                .unwrap_or(entry.len());
            let line = entry[..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                line.contains(&format!("{var} names the file (it never turns TLS on)")),
                "{sub}: {line}"
            );
            assert!(!line.contains("[env:"), "{sub}: {line}");
        }
    }
}
