//! TLS between nodes (`--link-tls-ca` and friends): a node opens each link
//! and relay to another with the line `gearshift-tls`, then a TLS session
//! in which both present a certificate the cluster's CA signed; the usual
//! preamble, with the cluster's secret, and everything after it travel
//! inside. A node set up so takes no link or relay in the clear, unless
//! `--link-tls-allow-clear` lets a cluster turn node TLS on one node at a
//! time: then it also takes them in the clear, and links in the clear to a
//! node that refuses TLS. A SIGHUP reads the files again
//! ([`LinkTls::reload`]) for the links and relays opened after it.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};

use crate::sock::StdSock;
use crate::tls::{load_certs, load_key, ring, HANDSHAKE_TIMEOUT};

/// The line a node sends before its TLS session begins.
pub const TLS_MARKER: &[u8] = b"gearshift-tls\n";

/// The ALPN protocol a node's HTTP calls to another offer, so an HTTP port
/// that also serves HTTPS to everyone (`--http-tls`) knows them apart.
pub const NODE_ALPN: &[u8] = b"gearshift-node";

/// Where this node's link certificate, its key and the cluster's CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkTlsFiles {
    /// This node's certificate chain (PEM), valid for the address other
    /// nodes dial it at, for both server and client authentication.
    pub certificate: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA that signs every node's certificate (PEM).
    pub ca: PathBuf,
    /// While node TLS is being turned on: nodes in the clear are taken,
    /// and a node that refuses TLS is linked to in the clear.
    pub allow_clear: bool,
}

/// Both ends of node TLS, loaded; its clones share what a reload puts in
/// force.
#[derive(Clone)]
pub struct LinkTls(Arc<Shared>);

struct Shared {
    files: LinkTlsFiles,
    ends: RwLock<Arc<Ends>>,
    /// How many reloads took effect.
    generation: AtomicU64,
}

struct Ends {
    client: Arc<rustls::ClientConfig>,
    connector: TlsConnector,
    acceptor: TlsAcceptor,
}

impl PartialEq for LinkTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LinkTls {}

impl std::fmt::Debug for LinkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkTls")
    }
}

impl LinkTls {
    /// Loads and checks the files: any problem is an error naming the file.
    pub fn load(files: &LinkTlsFiles) -> Result<LinkTls, String> {
        Ok(LinkTls(Arc::new(Shared {
            ends: RwLock::new(Arc::new(Ends::load(files)?)),
            files: files.clone(),
            generation: AtomicU64::new(0),
        })))
    }

    /// Reads the files again (a renewed certificate, key or CA) for the
    /// links and relays opened from now on; those open keep their session.
    /// A file that does not load leaves the ones in force, and says why.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = Arc::new(Ends::load(&self.0.files)?);
        *self.0.ends.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// How many reloads took effect (an HTTP client built on
    /// [`LinkTls::client_config`] is built again when it moves).
    pub fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    /// This node's certificate file, for log lines.
    pub fn certificate(&self) -> &std::path::Path {
        &self.0.files.certificate
    }

    fn ends(&self) -> Arc<Ends> {
        (self.0.ends.read().unwrap_or_else(PoisonError::into_inner)).clone()
    }

    /// Opens TLS on a new connection to the node at `addr` (`host:port`,
    /// whose host its certificate must name).
    pub async fn dial(
        &self,
        mut tcp: TcpStream,
        addr: &str,
    ) -> io::Result<client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(host_of(addr).to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
        tcp.write_all(TLS_MARKER).await?;
        let connector = self.ends().connector.clone();
        tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }

    /// Opens a connection to the node at `addr` in TLS or, with
    /// `--link-tls-allow-clear`, in the clear when that node refuses TLS
    /// (it closes at the marker: it has no node TLS yet). A certificate
    /// the node's handshake fails on is never a reason to go clear.
    pub async fn dial_or_clear(&self, tcp: TcpStream, addr: &str) -> io::Result<Dialed> {
        match self.dial(tcp, addr).await {
            Ok(s) => Ok(Dialed::Tls(Box::new(s))),
            Err(e) if self.allows_clear() && refused_tls(&e) => {
                tracing::warn!(node = %addr, "the node refused TLS; linking in the clear (--link-tls-allow-clear)");
                let again = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(addr));
                let tcp = (again.await).map_err(|_| {
                    io::Error::new(io::ErrorKind::TimedOut, "connecting in the clear timed out")
                })??;
                Ok(Dialed::Clear(tcp))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether nodes in the clear are taken too (`--link-tls-allow-clear`).
    pub fn allows_clear(&self) -> bool {
        self.0.files.allow_clear
    }

    /// The taking node's side, once the marker was read.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<server::TlsStream<TcpStream>> {
        let acceptor = self.ends().acceptor.clone();
        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }

    /// The dialing side's configuration, for an HTTP client that calls
    /// other nodes' HTTP ports over TLS.
    pub fn client_config(&self) -> rustls::ClientConfig {
        let mut c = (*self.ends().client).clone();
        c.alpn_protocols = vec![NODE_ALPN.to_vec()];
        c
    }

    /// The taking side's configuration, for an HTTP port that chooses it
    /// by the client's ALPN.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.ends().acceptor.config().clone()
    }
}

impl Ends {
    fn load(files: &LinkTlsFiles) -> Result<Ends, String> {
        let certs = load_certs(&files.certificate, "link certificate")?;
        let mut roots = RootCertStore::empty();
        for c in load_certs(&files.ca, "link CA file")? {
            roots
                .add(c)
                .map_err(|e| format!("the link CA file {}: {e}", files.ca.display()))?;
        }
        let roots = Arc::new(roots);
        let mismatch = |e: rustls::Error| {
            format!(
                "the link certificate {} and key {} do not go together: {e}",
                files.certificate.display(),
                files.key.display()
            )
        };
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), ring())
            .build()
            .map_err(|e| format!("the link CA file {}: {e}", files.ca.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), load_key(&files.key, "link key")?)
            .map_err(mismatch)?;
        let client = rustls::ClientConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, load_key(&files.key, "link key")?)
            .map_err(mismatch)?;
        let client = Arc::new(client);
        Ok(Ends {
            connector: TlsConnector::from(client.clone()),
            client,
            acceptor: TlsAcceptor::from(Arc::new(server)),
        })
    }
}

/// A connection to another node as [`LinkTls::dial_or_clear`] opened it.
pub enum Dialed {
    /// In a TLS session.
    Tls(Box<client::TlsStream<TcpStream>>),
    /// In the clear: the node refused TLS.
    Clear(TcpStream),
}

/// Whether a failed handshake is the other node closing at the marker
/// rather than a TLS failure (a certificate, a timeout).
fn refused_tls(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// Whether a connection starts a TLS handshake (a record of type 22),
/// waiting up to the handshake timeout for its first byte.
pub async fn starts_tls(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await;
    matches!(peeked, Ok(Ok(1))) && first[0] == 0x16
}

/// The host of `host:port` (`[::1]:4730` gives `::1`).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Reads one line (its `\n` dropped) and nothing past it: what follows is
/// the link's, read by whoever takes the stream.
pub async fn read_line<S: AsyncRead + Unpin>(s: &mut S, max: usize) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    loop {
        let b = s
            .read_u8()
            .await
            .map_err(|e| format!("reading the preamble: {e}"))?;
        if b == b'\n' {
            return Ok(line);
        }
        if line.len() == max {
            return Err("preamble too long".into());
        }
        line.push(b);
    }
}

/// A node's connection as taken: in the clear, or in TLS.
pub enum NodeStream {
    /// In the clear.
    Plain(TcpStream),
    /// In a TLS session.
    Tls(Box<server::TlsStream<TcpStream>>),
}

impl NodeStream {
    /// The socket an I/O thread registers: the TCP socket, or the
    /// plaintext end of a pipe the session is pumped through.
    pub fn into_std(self, peer: std::net::SocketAddr) -> Option<StdSock> {
        match self {
            NodeStream::Plain(s) => (s.into_std().map(StdSock::Tcp))
                .map_err(
                    |e| tracing::warn!(%peer, error = %e, "cannot hand a node's connection over"),
                )
                .ok(),
            NodeStream::Tls(s) => Some(crate::tls::plaintext_end(*s)),
        }
    }
}

impl AsyncRead for NodeStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            NodeStream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for NodeStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NodeStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            NodeStream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Plain(s) => Pin::new(s).poll_flush(cx),
            NodeStream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            NodeStream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("127.0.0.1:4730"), "127.0.0.1");
        assert_eq!(host_of("node-a.example:4730"), "node-a.example");
        assert_eq!(host_of("[::1]:4730"), "::1");
    }

    #[test]
    fn only_a_closed_connection_counts_as_refusing_tls() {
        use io::ErrorKind::*;
        for kind in [
            UnexpectedEof,
            ConnectionReset,
            ConnectionAborted,
            BrokenPipe,
        ] {
            assert!(refused_tls(&io::Error::from(kind)), "{kind:?}");
        }
        // A certificate rustls refuses, or a node that never answers.
        for kind in [InvalidData, TimedOut, InvalidInput] {
            assert!(!refused_tls(&io::Error::from(kind)), "{kind:?}");
        }
    }

    #[tokio::test]
    async fn a_line_is_read_without_what_follows() {
        let mut input: &[u8] = b"gearshift-link s n\nFRAMES";
        assert_eq!(
            read_line(&mut input, 64).await.expect("a line"),
            b"gearshift-link s n"
        );
        assert_eq!(input, b"FRAMES");
        let mut long: &[u8] = b"xxxxxxxx\n";
        assert!(read_line(&mut long, 4).await.is_err());
        let mut cut: &[u8] = b"no end";
        assert!(read_line(&mut cut, 64).await.is_err());
    }
}
