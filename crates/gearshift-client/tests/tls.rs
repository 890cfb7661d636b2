//! TLS from the client, the worker and the admin client, through a TLS
//! front made here (a tokio-rustls acceptor forwarding to an in-process
//! plain Gearshift), with certificates generated at test time by rcgen: a
//! round trip, admin commands, a worker's reconnect, an untrusted server,
//! a front that requires a client certificate, and TLS to a plain server.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bounded, eventually, within, Kind, RunningWorker, TestServer};
use gearshift_client::{AdminClient, Client, Error, TlsConfig, WorkError, Worker};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// A CA and PEM files it signed, in a temporary directory.
struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("gs-client-tls-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Gearshift test CA {tag}"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write CA");
        Pki { dir, ca }
    }

    /// The CA bundle file.
    fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `names` signed by this CA: (chain PEM, key PEM),
    /// also written as `{stem}.pem` and `{stem}.key`.
    fn issue(&self, stem: &str, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .expect("params")
            .signed_by(&key, &self.ca)
            .expect("certificate");
        let (cert, key) = (cert.pem(), key.serialize_pem());
        std::fs::write(self.dir.join(format!("{stem}.pem")), &cert).expect("write cert");
        std::fs::write(self.dir.join(format!("{stem}.key")), &key).expect("write key");
        (cert, key)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS listener forwarding every connection, once its handshake is done,
/// to a plain server.
struct Front {
    addr: std::net::SocketAddr,
    /// Handshakes completed (so connections forwarded).
    forwarded: Arc<AtomicUsize>,
    conns: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Front {
    /// Serves `cert`/`key`; with `client_ca`, a client certificate signed
    /// by it is required.
    async fn start(backend: std::net::SocketAddr, pki: &Pki, client_ca: Option<&Pki>) -> Front {
        let (cert, key) = pki.issue("server", &["localhost", "127.0.0.1"]);
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("chain");
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
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
        let config = builder.with_single_cert(chain, key).expect("server config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let forwarded = Arc::new(AtomicUsize::new(0));
        let conns = Arc::new(Mutex::new(JoinSet::new()));
        let (f, c) = (forwarded.clone(), conns.clone());
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, f) = (acceptor.clone(), f.clone());
                c.lock().expect("lock").spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    f.fetch_add(1, Ordering::SeqCst);
                    let Ok(mut plain) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Front {
            addr,
            forwarded,
            conns,
            accept,
        }
    }

    /// `localhost:port`: the server name comes from the host.
    fn server(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }

    fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }

    /// Drops every forwarded connection (the front keeps listening).
    fn kick(&self) {
        self.conns.lock().expect("lock").abort_all();
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.accept.abort();
        self.kick();
    }
}

fn client(server: &str, tls: TlsConfig) -> Client {
    Client::builder()
        .server(server)
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(1))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .tls(tls)
        .build()
        .expect("client")
}

fn reverser(server: &str, tls: TlsConfig) -> Worker {
    Worker::builder()
        .server(server)
        .connect_timeout(Duration::from_secs(1))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .tls(tls)
        .function("reverse", |job| async move {
            let mut v = job.data().to_vec();
            v.reverse();
            Ok::<_, WorkError>(v)
        })
        .build()
        .expect("worker")
}

fn trusting(pki: &Pki) -> TlsConfig {
    TlsConfig::builder()
        .ca_file(pki.ca_file())
        .build()
        .expect("tls config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_work_result_and_reconnect() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let pki = Pki::new("roundtrip");
        let front = Front::start(server.addr, &pki, None).await;
        let worker = RunningWorker::spawn(reverser(&front.server(), trusting(&pki)));
        let client = client(&front.server(), trusting(&pki));

        let out = within("a job over TLS", client.run("reverse", "abc"))
            .await
            .expect("run");
        assert_eq!(out, "cba");
        // Large enough for several TLS records each way.
        let big = vec![b'x'; 300_000];
        let out = within("a big job", client.run("reverse", big.clone()))
            .await
            .expect("big run");
        assert_eq!(out.len(), big.len());
        assert_eq!(front.forwarded(), 2, "client and worker went through TLS");

        // Every connection drops: the worker reconnects (over TLS again).
        front.kick();
        eventually("the worker to reconnect", || async {
            front.forwarded() >= 3
        })
        .await;
        let out = within("a job after the reconnect", client.run("reverse", "xyz"))
            .await
            .expect("run after reconnect");
        assert_eq!(out, "zyx");
        worker.stop().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_over_tls() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let pki = Pki::new("admin");
        let front = Front::start(server.addr, &pki, None).await;
        let tls = trusting(&pki);
        let client = client(&front.server(), tls.clone());
        within("submit", client.submit_background("queued", "x"))
            .await
            .expect("submit");

        let mut admin = within(
            "admin connect",
            AdminClient::connect_with(front.server(), Some(&tls)),
        )
        .await
        .expect("admin over TLS");
        assert!(!admin.version().await.expect("version").is_empty());
        let status = admin.status().await.expect("status");
        let queued = status
            .iter()
            .find(|s| s.function == "queued")
            .expect("function listed");
        assert_eq!(queued.total, 1);
        // By address too: the certificate names 127.0.0.1.
        let mut by_ip = AdminClient::connect_with(front.addr, Some(&tls))
            .await
            .expect("admin by IP");
        assert_eq!(by_ip.status().await.expect("status").len(), status.len());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_server_fails_the_handshake() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let pki = Pki::new("server-ca");
        let other = Pki::new("other-ca");
        let front = Front::start(server.addr, &pki, None).await;

        let err = AdminClient::connect_with(front.server(), Some(&trusting(&other)))
            .await
            .expect_err("an untrusted certificate");
        match &err {
            Error::TlsHandshake { addr, .. } => assert_eq!(addr, &front.server()),
            other => panic!("{other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains("TLS handshake with localhost:"), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(!err.is_transient());

        // The client reports the handshake as the last failure.
        let client = client(&front.server(), trusting(&other));
        let err = within("a refused submit", client.submit_background("f", "x"))
            .await
            .expect_err("an untrusted certificate");
        assert!(
            matches!(&err, Error::NoServerAvailable { last } if last.contains("UnknownIssuer")),
            "{err:?}"
        );

        // A name the certificate lacks fails too.
        let misnamed = TlsConfig::builder()
            .ca_file(pki.ca_file())
            .server_name("gearman.example")
            .build()
            .expect("config");
        let err = AdminClient::connect_with(front.server(), Some(&misnamed))
            .await
            .expect_err("a misnamed certificate");
        assert!(
            err.to_string().contains(
                "the server's certificate is not valid for \"gearman.example\" \
                 (it carries localhost, 127.0.0.1) [NotValidForName]"
            ),
            "{err}"
        );

        // Nothing reached the server in plain text.
        assert_eq!(front.forwarded(), 0);
        let mut admin = server.admin().await;
        assert!(admin.status().await.expect("status").is_empty());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_when_required() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let pki = Pki::new("mtls");
        let clients = Pki::new("mtls-clients");
        let front = Front::start(server.addr, &pki, Some(&clients)).await;
        clients.issue("client", &["worker-1"]);
        let with_cert = TlsConfig::builder()
            .ca_file(pki.ca_file())
            .client_cert_files(
                clients.dir.join("client.pem"),
                clients.dir.join("client.key"),
            )
            .build()
            .expect("config");

        let worker = RunningWorker::spawn(reverser(&front.server(), with_cert.clone()));
        let client = client(&front.server(), with_cert.clone());
        let out = within(
            "a job with client certificates",
            client.run("reverse", "ab"),
        )
        .await
        .expect("run");
        assert_eq!(out, "ba");
        let mut admin = AdminClient::connect_with(front.server(), Some(&with_cert))
            .await
            .expect("admin with a client certificate");
        admin.status().await.expect("status");
        worker.stop().await;

        // Without one the front refuses (TLS 1.3: the client may learn it
        // only at its first read, as a lost connection).
        let before = front.forwarded();
        let outcome = async {
            let mut admin =
                AdminClient::connect_with(front.server(), Some(&trusting(&pki))).await?;
            admin.status().await
        };
        let err = within("a refused admin", outcome)
            .await
            .expect_err("no client certificate");
        assert!(
            matches!(
                err,
                Error::TlsHandshake { .. } | Error::ConnectionLost | Error::Io(_)
            ),
            "{err:?}"
        );
        assert_eq!(front.forwarded(), before);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_a_plain_server_fails_cleanly() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let pki = Pki::new("plain");
        let tls = TlsConfig::builder()
            .ca_file(pki.ca_file())
            .server_name("localhost")
            .build()
            .expect("config");
        let err = within(
            "a handshake with a plain server",
            AdminClient::connect_with(server.addr, Some(&tls)),
        )
        .await
        .expect_err("not a TLS server");
        assert!(
            matches!(&err, Error::TlsHandshake { addr, .. } if *addr == server.addr.to_string()),
            "{err:?}"
        );
        let client = client(&server.addr.to_string(), tls);
        let err = within(
            "a submit to a plain server",
            client.submit_background("f", "x"),
        )
        .await
        .expect_err("not a TLS server");
        assert!(err.to_string().contains("TLS handshake with"), "{err}");
        assert!(err.to_string().contains("speaking TLS"), "{err}");
    })
    .await
}

#[test]
fn bad_files_are_config_errors() {
    let pki = Pki::new("files");
    let empty = pki.dir.join("empty.pem");
    std::fs::write(&empty, "not PEM at all\n").expect("write");
    let err = TlsConfig::builder()
        .ca_file(&empty)
        .build()
        .expect_err("no certificate");
    assert!(
        matches!(&err, Error::TlsConfig(m) if m.contains("no PEM certificate") && m.contains("empty.pem")),
        "{err:?}"
    );
    let err = TlsConfig::builder()
        .ca_file(pki.dir.join("missing.pem"))
        .build()
        .expect_err("missing file");
    assert!(err.to_string().contains("cannot read"), "{err}");

    // A key that is not the certificate's.
    let (cert, _) = pki.issue("a", &["a"]);
    let (_, other_key) = pki.issue("b", &["b"]);
    let err = TlsConfig::builder()
        .ca_file(pki.ca_file())
        .client_cert_pem(cert, other_key)
        .build()
        .expect_err("mismatched key");
    assert!(matches!(err, Error::TlsConfig(_)), "{err:?}");
    let err = TlsConfig::builder()
        .ca_file(pki.ca_file())
        .client_cert_files(pki.dir.join("a.pem"), &empty)
        .build()
        .expect_err("no key");
    assert!(err.to_string().contains("no usable private key"), "{err}");
}
