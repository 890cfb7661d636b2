//! TLS on the Gearman port (`--ssl`): the server's certificate and key,
//! optional client certificates checked against a CA, and the session of
//! each TLS connection. A session is pumped through an in-process pipe
//! ([`crate::pipe`]), so the I/O threads serve its plaintext side like any
//! TCP connection. A
//! SIGHUP reads the files again ([`TlsServer::reload`]) for the handshakes
//! that follow.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::pipe::{ReadHalf, WriteHalf};
use crate::sock::StdSock;

/// Longest a client may take over its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a client closed, how long its last replies may take to go out.
const LINGER: Duration = Duration::from_secs(5);

/// Where the TLS material is (gearmand's flags and environment variables).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, PEM.
    pub certificate: PathBuf,
    /// The server's private key, PEM.
    pub key: PathBuf,
    /// CAs whose client certificates are accepted, PEM; with it a client
    /// may present a certificate (its subject becomes its identity).
    pub ca: Option<PathBuf>,
    /// Refuse clients without a certificate the CA signed.
    pub verify_client: bool,
}

/// A loaded TLS configuration, ready to accept sessions; its clones share
/// what a reload puts in force.
#[derive(Clone)]
pub struct TlsServer {
    acceptor: Arc<RwLock<TlsAcceptor>>,
    files: Arc<TlsFiles>,
    /// Client certificates are required.
    pub verify_client: bool,
}

impl PartialEq for TlsServer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.acceptor, &other.acceptor)
    }
}

impl Eq for TlsServer {}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("verify_client", &self.verify_client)
            .finish_non_exhaustive()
    }
}

pub(crate) fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
}

/// The private key of a PEM file; an error names the file.
pub fn load_key(path: &Path, what: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, what)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        format!(
            "the {what} {} holds no usable private key: {e}",
            path.display()
        )
    })
}

/// The certificates of a PEM file; an error when it holds none.
pub fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the {what} {} is not valid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "the {what} {} holds no certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

impl TlsServer {
    /// Loads and checks the files: any problem is an error naming the file.
    pub fn load(files: &TlsFiles) -> Result<TlsServer, String> {
        Ok(TlsServer {
            acceptor: Arc::new(RwLock::new(Self::acceptor_of(files)?)),
            files: Arc::new(files.clone()),
            verify_client: files.verify_client,
        })
    }

    /// Reads the files again (a renewed certificate, key or CA) for the
    /// handshakes that follow; sessions already open keep theirs. A file
    /// that does not load leaves the ones in force, and says why.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = Self::acceptor_of(&self.files)?;
        *self
            .acceptor
            .write()
            .unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// The configuration in force, for a listener that chooses it by the
    /// client's hello.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        (self.acceptor.read().unwrap_or_else(PoisonError::into_inner))
            .config()
            .clone()
    }

    /// The certificate file, for log lines.
    pub fn certificate(&self) -> &Path {
        &self.files.certificate
    }

    fn acceptor_of(files: &TlsFiles) -> Result<TlsAcceptor, String> {
        let certs = load_certs(&files.certificate, "certificate")?;
        let key = load_key(&files.key, "key")?;
        let builder = rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &files.ca {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in load_certs(ca, "CA file")? {
                    roots
                        .add(c)
                        .map_err(|e| format!("the CA file {}: {e}", ca.display()))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), ring());
                let verifier = if files.verify_client {
                    verifier.build()
                } else {
                    verifier.allow_unauthenticated().build()
                };
                builder.with_client_cert_verifier(
                    verifier.map_err(|e| format!("the CA file {}: {e}", ca.display()))?,
                )
            }
            None if files.verify_client => return Err(
                "--ssl-verify-client needs --ssl-ca-file (the CAs that sign client certificates)"
                    .into(),
            ),
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "the certificate {} and the key {} do not go together: {e}",
                files.certificate.display(),
                files.key.display()
            )
        })?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// Runs the handshake on `tcp`; on success starts pumping the session
    /// and returns the plaintext end for an I/O thread, with the
    /// subject of the client's certificate if it presented one.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        peer: std::net::SocketAddr,
    ) -> Option<(StdSock, Option<String>)> {
        let tls = self.handshake(tcp, peer).await?;
        let identity = identity_of(&tls);
        Some((plaintext_end(tls), identity))
    }
}

/// The subject of the certificate the client presented, if any.
fn identity_of(tls: &tokio_rustls::server::TlsStream<TcpStream>) -> Option<String> {
    (tls.get_ref().1.peer_certificates())
        .and_then(|c| c.first())
        .and_then(|c| subject_of(c))
}

impl TlsServer {
    /// Runs the handshake on `tcp` within [`HANDSHAKE_TIMEOUT`]; None (and a
    /// log line naming `peer`) when it fails.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        peer: std::net::SocketAddr,
    ) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
        let acceptor = (self.acceptor.read().unwrap_or_else(PoisonError::into_inner)).clone();
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::info!(%peer, "closing connection: TLS handshake failed: {e}");
                None
            }
            Err(_) => {
                tracing::info!(%peer, "closing connection: no TLS handshake within {HANDSHAKE_TIMEOUT:?}");
                None
            }
        }
    }
}

/// Starts pumping an established session through a pipe and returns the
/// pipe's plaintext end for an I/O thread, shown as the session's socket.
pub fn plaintext_end(tls: tokio_rustls::server::TlsStream<TcpStream>) -> StdSock {
    let fd = tls.get_ref().0.as_raw_fd();
    let (end, r, w) = crate::pipe::pair(crate::pipe::SESSION_CAP);
    tokio::spawn(pump(tls, r, w));
    StdSock::Mem(end.shown_as(fd))
}

/// Starts pumping an established session (either side's) through a pipe
/// and returns the halves a task of this runtime reads and writes it by.
/// Every write reaches the session's socket at once (a TLS stream keeps
/// what a full socket did not take until it is written to or flushed again).
pub fn pumped<S>(tls: S) -> (ReadHalf, WriteHalf)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (ours, (r, w)) = crate::pipe::halves(crate::pipe::SESSION_CAP);
    tokio::spawn(pump(tls, r, w));
    ours
}

/// A TLS session's plaintext halves, for a task of this runtime, with the
/// subject of the client's certificate.
pub type Session = (ReadHalf, WriteHalf, Option<String>);

impl TlsServer {
    /// [`TlsServer::accept`] for a task that serves the session itself
    /// (a cluster node carrying it elsewhere). None: no session (logged).
    pub async fn accept_here(&self, tcp: TcpStream, peer: std::net::SocketAddr) -> Option<Session> {
        let tls = self.handshake(tcp, peer).await?;
        let identity = identity_of(&tls);
        let (r, w) = pumped(tls);
        Some((r, w, identity))
    }
}

/// A certificate's subject as `KEY=VALUE` parts joined by commas, in the
/// certificate's order, with the usual short keys (`C=DE,O=Acme,CN=app`).
pub fn subject_of(der: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let mut parts = Vec::new();
    for rdn in cert.subject().iter() {
        for attr in rdn.iter() {
            let oid = attr.attr_type().to_id_string();
            let key = match oid.as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.5" => "serialNumber",
                "2.5.4.6" => "C",
                "2.5.4.7" => "L",
                "2.5.4.8" => "ST",
                "2.5.4.10" => "O",
                "2.5.4.11" => "OU",
                "0.9.2342.19200300.100.1.1" => "UID",
                "0.9.2342.19200300.100.1.25" => "DC",
                "1.2.840.113549.1.9.1" => "emailAddress",
                other => other,
            };
            let value = attr.as_str().unwrap_or("?");
            parts.push(format!("{key}={value}"));
        }
    }
    Some(parts.join(","))
}

/// Copies between the TLS session and the server's side until either ends:
/// when the server closes, so does the session; when the client closes,
/// the server's last replies still go out.
async fn pump<S: tokio::io::AsyncRead + tokio::io::AsyncWrite>(
    tls: S,
    mut rd: ReadHalf,
    mut wr: WriteHalf,
) {
    let (mut tls_rd, mut tls_wr) = tokio::io::split(tls);
    let up = async {
        let r = copy(&mut tls_rd, &mut wr).await;
        let _ = wr.shutdown().await;
        r
    };
    let down = async {
        let r = copy(&mut rd, &mut tls_wr).await;
        let _ = tls_wr.shutdown().await;
        r
    };
    tokio::pin!(up, down);
    tokio::select! {
        _ = &mut down => {}
        _ = &mut up => {
            let _ = tokio::time::timeout(LINGER, down).await;
        }
    }
}

/// Copies until EOF or an error, flushing after every read so a reply
/// never waits in the TLS buffer.
async fn copy(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
    }
}
