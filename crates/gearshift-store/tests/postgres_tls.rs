//! TLS from the PostgreSQL store to a throwaway cluster that serves it with
//! a certificate made here (a test CA signs it for `localhost`): libpq's
//! `sslmode` values, `sslrootcert`, and the errors when a check fails.

mod pg_cluster;

use std::path::PathBuf;
use std::sync::OnceLock;

use gearshift_store::{PgOptions, PgStore, StoreError};
use pg_cluster::{Cluster, ServerTls};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// The cluster, and root certificate files: the CA that signed the
/// server's certificate, and another one.
struct Setup {
    cluster: Cluster,
    ca: PathBuf,
    other_ca: PathBuf,
    _dir: tempfile::TempDir,
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA")
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let ca_cert = new_ca("Gearshift test CA");
        let key = KeyPair::generate().expect("server key");
        // For `localhost` only: 127.0.0.1 is a name verify-full refuses.
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .expect("server params")
            .signed_by(&key, &ca_cert)
            .expect("server certificate");
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        let other_ca = dir.path().join("other-ca.pem");
        std::fs::write(&ca, ca_cert.pem()).expect("write the CA");
        std::fs::write(&other_ca, new_ca("Another CA").pem()).expect("write the other CA");
        let cluster = Cluster::start_tls(&ServerTls {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            tls_only: true,
        });
        Setup {
            cluster,
            ca,
            other_ca,
            _dir: dir,
        }
    })
}

/// A new database (TLS only, as every one but `postgres`) and a URL for it
/// on `host` with `params`; the password is there to be kept out of
/// messages (trust authentication ignores it).
fn url(host: &str, params: &str) -> (String, String) {
    let s = setup();
    let fresh = s.cluster.fresh_db();
    let db = fresh
        .rsplit('/')
        .next()
        .expect("a database name")
        .to_string();
    let url = format!(
        "postgres://gearshift:hunter2@{host}:{}/{db}?{params}",
        s.cluster.port
    );
    (url, db)
}

fn open(url: &str) -> Result<PgStore, StoreError> {
    PgStore::open(url, PgOptions::default())
}

/// Whether the store's session on `db` uses TLS (as pg_stat_ssl sees it).
fn uses_tls(db: &str) -> bool {
    let mut admin = postgres::Client::connect(&setup().cluster.url("postgres"), postgres::NoTls)
        .expect("connect for a check");
    let row = admin
        .query_one(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = $1 AND a.application_name = 'gearshift'",
            &[&db],
        )
        .expect("the store's session");
    row.get(0)
}

fn error_text(r: Result<PgStore, StoreError>) -> String {
    let text = match r {
        Ok(_) => panic!("expected the open to fail"),
        Err(e) => e.to_string(),
    };
    eprintln!("{text}");
    assert!(!text.contains("hunter2"), "{text}");
    text
}

#[test]
fn require_prefer_and_allow_connect_over_tls() {
    for params in ["sslmode=require", "", "sslmode=allow"] {
        let (url, db) = url("127.0.0.1", params);
        let store = open(&url).unwrap_or_else(|e| panic!("{params}: {e}"));
        assert!(uses_tls(&db), "{params}: not over TLS");
        drop(store);
    }
}

#[test]
fn disable_is_refused_where_the_server_takes_tls_only() {
    let (url, _) = url("127.0.0.1", "sslmode=disable");
    let text = error_text(open(&url));
    assert!(text.contains("no encryption"), "{text}");
}

#[test]
fn verify_full_checks_the_root_and_the_host_name() {
    let s = setup();
    let ca = s.ca.display();
    let (good, db) = url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let store = open(&good).expect("verify-full with the right root");
    assert!(uses_tls(&db));
    drop(store);

    // The certificate names localhost, not 127.0.0.1: verify-ca does not
    // mind, verify-full does.
    let (by_ip, db) = url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}"));
    let store = open(&by_ip).expect("verify-ca by address");
    assert!(uses_tls(&db));
    drop(store);
    let (by_ip, _) = url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let text = error_text(open(&by_ip));
    assert!(text.contains("not valid for name"), "{text}");
    assert!(text.contains("sslmode=verify-full"), "{text}");
}

#[test]
fn a_wrong_root_certificate_fails_clearly() {
    let other = setup().other_ca.display().to_string();
    for mode in ["verify-full", "verify-ca", "require"] {
        let (url, _) = url("localhost", &format!("sslmode={mode}&sslrootcert={other}"));
        let text = error_text(open(&url));
        assert!(text.starts_with("cannot reach PostgreSQL at"), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(
            text.contains(&format!(
                "sslmode={mode}, checked against the root certificates in {other}"
            )),
            "{text}"
        );
    }
}

#[test]
fn prefer_falls_back_to_plain_when_the_handshake_fails() {
    // libpq's `prefer`: a failed check means a plain connection, which
    // only the `postgres` database takes here.
    let s = setup();
    let other = s.other_ca.display();
    let url = format!(
        "postgres://gearshift@127.0.0.1:{}/postgres?sslrootcert={other}",
        s.cluster.port
    );
    let store = open(&url).expect("prefer, plain after the failed check");
    assert!(!uses_tls("postgres"));
    drop(store);
}

#[test]
fn a_missing_root_certificate_file_is_named() {
    let (url, _) = url(
        "localhost",
        "sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
    );
    match open(&url) {
        Err(StoreError::Tls { why, .. }) => assert!(why.contains("/nonexistent/ca.pem"), "{why}"),
        Err(e) => panic!("expected a TLS setup error, got {e}"),
        Ok(_) => panic!("expected a TLS setup error"),
    }
}
