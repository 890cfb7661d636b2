//! TLS from the PostgreSQL store to a throwaway cluster that serves it with
//! a certificate made here (a test CA signs it for `localhost`): libpq's
//! `sslmode` values, `sslrootcert`, a client certificate (`sslcert`,
//! `sslkey`) where the server authenticates by one, and the errors when a
//! check fails.

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

/// A TLS-only cluster whose certificate `ca` signs (for `localhost` only:
/// 127.0.0.1 is a name verify-full refuses), taking client certificates
/// of `client_ca` if given; `ca` written to `dir`/ca.pem.
fn tls_cluster(dir: &std::path::Path, client_ca: Option<String>) -> (Cluster, PathBuf) {
    let ca_cert = new_ca("Gearshift test CA");
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .expect("server params")
        .signed_by(&key, &ca_cert)
        .expect("server certificate");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_cert.pem()).expect("write the CA");
    let cluster = Cluster::start_tls(&ServerTls {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        tls_only: true,
        client_ca_pem: client_ca,
    });
    (cluster, ca)
}

/// A new database of `cluster` (TLS only, as every one but `postgres`).
fn new_db(cluster: &Cluster) -> String {
    let fresh = cluster.fresh_db();
    fresh
        .rsplit('/')
        .next()
        .expect("a database name")
        .to_string()
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cluster, ca) = tls_cluster(dir.path(), None);
        let other_ca = dir.path().join("other-ca.pem");
        std::fs::write(&other_ca, new_ca("Another CA").pem()).expect("write the other CA");
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
    let db = new_db(&s.cluster);
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

/// A second cluster, whose TLS databases authenticate by client
/// certificate (pg_hba.conf's `cert`), and the files to present: a
/// certificate for `gearshift` and one for another user, both signed by
/// the client CA, and their keys.
struct CertSetup {
    cluster: Cluster,
    ca: PathBuf,
    dir: tempfile::TempDir,
}

fn cert_setup() -> &'static CertSetup {
    static SETUP: OnceLock<CertSetup> = OnceLock::new();
    SETUP.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let client_ca = new_ca("Gearshift client CA");
        let dir = tempfile::tempdir().expect("tempdir");
        for user in ["gearshift", "someone"] {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.distinguished_name.push(DnType::CommonName, user);
            let cert = params
                .signed_by(&key, &client_ca)
                .expect("client certificate");
            let (c, k) = client_files(dir.path(), user);
            std::fs::write(&c, cert.pem()).expect("write the client certificate");
            std::fs::write(&k, key.serialize_pem()).expect("write the client key");
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let (cluster, ca) = tls_cluster(dir.path(), Some(client_ca.pem()));
        CertSetup { cluster, ca, dir }
    })
}

fn client_files(dir: &std::path::Path, user: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{user}.crt")),
        dir.join(format!("{user}.key")),
    )
}

/// A new database of the certificate cluster and a URL for it with
/// `params` (verify-full against the server's CA); its name.
fn cert_url(params: &str) -> (String, String) {
    let s = cert_setup();
    let db = new_db(&s.cluster);
    let url = format!(
        "postgres://gearshift:hunter2@localhost:{}/{db}?sslmode=verify-full&sslrootcert={}&{params}",
        s.cluster.port,
        s.ca.display()
    );
    (url, db)
}

#[test]
fn a_client_certificate_authenticates_the_store() {
    let s = cert_setup();
    let (cert, key) = client_files(s.dir.path(), "gearshift");
    let (url, db) = cert_url(&format!(
        "sslcert={}&sslkey={}",
        cert.display(),
        key.display()
    ));
    let store = open(&url).expect("open with the client certificate");
    let mut admin = postgres::Client::connect(&s.cluster.url("postgres"), postgres::NoTls)
        .expect("connect for a check");
    let dn: Option<String> = admin
        .query_one(
            "SELECT s.client_dn FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = $1 AND a.application_name = 'gearshift'",
            &[&db],
        )
        .expect("the store's session")
        .get(0);
    assert_eq!(dn.as_deref(), Some("/CN=gearshift"));
    drop(store);
}

#[test]
fn without_the_right_client_certificate_the_server_refuses() {
    let s = cert_setup();
    // None offered (HOME's ~/.postgresql/postgresql.crt does not exist).
    let (url, _) = cert_url("sslcert=/nonexistent/c.crt");
    let text = error_text(open(&url));
    assert!(text.contains("certificate"), "{text}");
    // One that names another user.
    let (cert, key) = client_files(s.dir.path(), "someone");
    let (url, _) = cert_url(&format!(
        "sslcert={}&sslkey={}",
        cert.display(),
        key.display()
    ));
    let text = error_text(open(&url));
    assert!(text.contains("certificate authentication failed"), "{text}");
}

#[test]
fn a_client_key_others_can_read_or_a_missing_one_stops_the_open() {
    use std::os::unix::fs::PermissionsExt;
    let s = cert_setup();
    let (cert, key) = client_files(s.dir.path(), "gearshift");
    let loose = s.dir.path().join("loose.key");
    std::fs::copy(&key, &loose).expect("copy the key");
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    for (key, says) in [
        (loose, "0644"),
        (s.dir.path().join("none.key"), "does not exist"),
    ] {
        let (url, _) = cert_url(&format!(
            "sslcert={}&sslkey={}",
            cert.display(),
            key.display()
        ));
        match open(&url) {
            Err(StoreError::Tls { why, .. }) => {
                assert!(
                    why.contains(&key.display().to_string()) && why.contains(says),
                    "{why}"
                )
            }
            Err(e) => panic!("expected a TLS setup error, got {e}"),
            Ok(_) => panic!("expected a TLS setup error"),
        }
    }
}
