//! TLS on the Gearman port (rustls with ring): [`TlsConfig`], built once by
//! [`TlsConfigBuilder`] and shared by every connection of a client, worker
//! or admin client.
//!
//! The server's certificate must chain to a CA from the given PEM bundle
//! (or, when none is given, from the system's bundle file: `SSL_CERT_FILE`
//! or one of the usual paths) and name the host of the server address
//! (or [`TlsConfigBuilder::server_name`]). A client certificate is sent
//! when one is configured, for servers that verify clients (gearmand's
//! `--ssl-verify-client`). There is no fallback to plain TCP.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::addr::ServerAddr;
use crate::error::{Error, Result};

/// Where system CA bundles usually are (Debian/Ubuntu/Alpine, Fedora/RHEL,
/// openSUSE, macOS/BSD), tried in order when no CA is given and
/// `SSL_CERT_FILE` is not set.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// PEM text, from a file or given inline.
#[derive(Debug, Clone)]
enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Pem {
    /// The bytes and a name for messages.
    fn load(&self) -> Result<(std::borrow::Cow<'_, [u8]>, String)> {
        match self {
            Pem::File(path) => std::fs::read(path)
                .map(|b| (b.into(), path.display().to_string()))
                .map_err(|e| Error::TlsConfig(format!("cannot read {}: {e}", path.display()))),
            Pem::Bytes(b) => Ok((b.as_slice().into(), "the PEM given".to_owned())),
        }
    }
}

/// TLS settings for connections to Gearman servers; cheap to clone.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("gs-tls-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let ca = rcgen::generate_simple_self_signed(vec!["gearman.local".into()])?;
/// # std::fs::write(dir.join("ca.pem"), ca.cert.pem())?;
/// use gearshift_client::{Client, TlsConfig};
///
/// let tls = TlsConfig::builder().ca_file(dir.join("ca.pem")).build()?;
/// let client = Client::builder().server("gearman.local:4730").tls(tls).build()?;
/// # let _ = client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Starts a [`TlsConfigBuilder`].
    pub fn builder() -> TlsConfigBuilder {
        TlsConfigBuilder::default()
    }

    /// Runs the TLS handshake on a connected `tcp`, within `limit`.
    pub(crate) async fn handshake(
        &self,
        addr: &ServerAddr,
        tcp: TcpStream,
        limit: Duration,
    ) -> Result<TlsStream<TcpStream>> {
        let failed = |source| Error::TlsHandshake {
            addr: addr.to_string(),
            source,
        };
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => host_name(addr).map_err(|why| {
                failed(std::io::Error::new(std::io::ErrorKind::InvalidInput, why))
            })?,
        };
        match tokio::time::timeout(limit, self.connector.connect(name, tcp)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(failed(hint(e))),
            Err(_) => Err(failed(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no handshake reply in time (is it a TLS port?)",
            ))),
        }
    }
}

/// A handshake error in words: certificate trouble says what is wrong and
/// what fixes it (the rustls name kept in brackets, for searching); a server
/// that seems to speak no TLS (it closed, or answered with bytes that are no
/// TLS record) gets a hint.
fn hint(e: std::io::Error) -> std::io::Error {
    let rustls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    if let Some(words) = rustls.and_then(in_words) {
        return std::io::Error::new(e.kind(), words);
    }
    let garbled = rustls.is_some_and(|r| matches!(r, rustls::Error::InvalidMessage(_)));
    if garbled || e.kind() == std::io::ErrorKind::UnexpectedEof {
        std::io::Error::new(
            e.kind(),
            format!("{e} (is the server speaking TLS on that port?)"),
        )
    } else {
        e
    }
}

/// The docs that show how to make certificates that work.
const RECIPE: &str = "see docs/tls.md";

/// Plain words for the rustls errors an operator meets: the server's
/// certificate refused, or the server refusing ours.
fn in_words(e: &rustls::Error) -> Option<String> {
    use rustls::{AlertDescription as A, CertificateError as C};
    let cert = "the server's certificate";
    let words = match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => format!(
                "{cert} is not signed by a CA this client trusts [UnknownIssuer]: give the \
                 certificate of the CA that signed it as the CA file (without one the system's \
                 CA bundle is used), {RECIPE}"
            ),
            C::NotValidForName => format!(
                "{cert} does not carry the name this client connected to [NotValidForName]: \
                 connect by a name it carries, or set the server name to expect"
            ),
            C::NotValidForNameContext {
                expected,
                presented,
            } => {
                let carries = if presented.is_empty() {
                    "no name in subjectAltName".to_owned()
                } else {
                    let names: Vec<&str> = presented.iter().map(|n| plain_name(n)).collect();
                    names.join(", ")
                };
                format!(
                    "{cert} is not valid for {:?} (it carries {carries}) [NotValidForName]: \
                     connect by a name it carries, or set the server name to expect; \
                     the name must be in subjectAltName, {RECIPE}",
                    expected.to_str()
                )
            }
            C::Expired => format!("{cert} has expired [Expired]: the server needs a new one"),
            C::ExpiredContext { time, not_after } => format!(
                "{cert} expired {} ago [Expired]: the server needs a new one (or this \
                 machine's clock is wrong)",
                span(time.as_secs().saturating_sub(not_after.as_secs()))
            ),
            C::NotValidYet => format!(
                "{cert} is not valid yet [NotValidYet]: check this machine's clock and the \
                 certificate's dates"
            ),
            C::NotValidYetContext { time, not_before } => format!(
                "{cert} is only valid {} from now [NotValidYet]: check this machine's clock \
                 and the certificate's dates",
                span(not_before.as_secs().saturating_sub(time.as_secs()))
            ),
            C::Revoked => format!("{cert} has been revoked [Revoked]"),
            C::BadSignature => format!(
                "{cert}'s signature does not verify [BadSignature]: it was not signed by the \
                 key of the CA it names"
            ),
            C::BadEncoding => format!("{cert} cannot be parsed [BadEncoding]"),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => format!(
                "{cert} is not for TLS servers [InvalidPurpose]: its extendedKeyUsage must \
                 include serverAuth, {RECIPE}"
            ),
            C::UnhandledCriticalExtension => format!(
                "{cert} has a critical extension this client does not know \
                 [UnhandledCriticalExtension]"
            ),
            C::Other(other) if format!("{:?}", other.0) == "CaUsedAsEndEntity" => format!(
                // webpki's error, reached only through rustls's opaque OtherError.
                "{cert} is a CA certificate (basicConstraints CA:TRUE) used as the server's own \
                 [CaUsedAsEndEntity]; rustls refuses that: give the server a leaf certificate \
                 signed by that CA and trust the CA, {RECIPE}"
            ),
            other => format!("{cert} was refused: {other}"),
        },
        rustls::Error::AlertReceived(A::CertificateRequired) => {
            "the server requires a client certificate [CertificateRequired]: give one and its key"
                .to_owned()
        }
        rustls::Error::AlertReceived(a @ (A::UnknownCA | A::BadCertificate)) => format!(
            "the server refused this client's certificate [{a:?}]: it must be signed by a CA \
             the server trusts"
        ),
        _ => return None,
    };
    Some(words)
}

/// A name as webpki lists it (`DnsName("a.b")`, `IpAddress(10.0.0.1)`),
/// without the wrapping.
fn plain_name(listed: &str) -> &str {
    let inner = ["DnsName(", "IpAddress(", "UniformResourceIdentifier("]
        .iter()
        .find_map(|p| listed.strip_prefix(p)?.strip_suffix(')'));
    inner.map_or(listed, |n| n.trim_matches('"'))
}

/// A span of seconds, roughly ("3 days", "5 hours", "40 s").
fn span(secs: u64) -> String {
    match secs {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 2 * 3_600 => format!("{} hours", s / 3_600),
        s if s >= 2 * 60 => format!("{} minutes", s / 60),
        s => format!("{s} s"),
    }
}

/// The host of `host:port` as a TLS server name (a DNS name or an IP).
fn host_name(addr: &ServerAddr) -> std::result::Result<ServerName<'static>, String> {
    let s = addr.as_str();
    let host = s.rsplit_once(':').map_or(s, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a valid TLS server name (set one explicitly)"))
}

/// Settings of a [`TlsConfig`]; start with [`TlsConfig::builder`].
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("gs-tls-doc2-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
/// # std::fs::write(dir.join("ca.pem"), ca.cert.pem())?;
/// # std::fs::write(dir.join("client.pem"), ca.cert.pem())?;
/// # std::fs::write(dir.join("client.key"), ca.signing_key.serialize_pem())?;
/// let tls = gearshift_client::TlsConfig::builder()
///     .ca_file(dir.join("ca.pem"))
///     .client_cert_files(dir.join("client.pem"), dir.join("client.key"))
///     .server_name("gearman.internal")
///     .build()?;
/// # let _ = tls;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct TlsConfigBuilder {
    cas: Vec<Pem>,
    client: Option<(Pem, Pem)>,
    server_name: Option<String>,
}

impl TlsConfigBuilder {
    /// Trusts every certificate of a PEM bundle file (repeatable). Without
    /// any CA the system bundle is used (`SSL_CERT_FILE`, else the usual
    /// file paths).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cas.push(Pem::File(path.into()));
        self
    }

    /// Trusts every certificate of a PEM bundle given in memory.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.cas.push(Pem::Bytes(pem.into()));
        self
    }

    /// Presents this certificate chain and private key (PEM files) to
    /// servers that ask for one.
    pub fn client_cert_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// Like [`client_cert_files`](Self::client_cert_files), from PEM in memory.
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client = Some((Pem::Bytes(cert.into()), Pem::Bytes(key.into())));
        self
    }

    /// The name the server certificate must carry, for every server
    /// (default: the host of each server address).
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Reads and checks the files.
    ///
    /// ```
    /// use gearshift_client::{Error, TlsConfig};
    /// let err = TlsConfig::builder().ca_file("/nonexistent/ca.pem").build().unwrap_err();
    /// assert!(matches!(err, Error::TlsConfig(_)));
    /// assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    /// ```
    pub fn build(self) -> Result<TlsConfig> {
        let mut roots = RootCertStore::empty();
        if self.cas.is_empty() {
            let bundle = system_bundle()?;
            add_certs(&mut roots, &Pem::File(bundle))?;
        }
        for ca in &self.cas {
            add_certs(&mut roots, ca)?;
        }
        let server_name = self
            .server_name
            .map(|n| {
                ServerName::try_from(n.clone())
                    .map_err(|_| Error::TlsConfig(format!("{n:?} is not a valid TLS server name")))
            })
            .transpose()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::TlsConfig(e.to_string()))?
            .with_root_certificates(roots);
        let config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certs(cert)?;
                let (bytes, name) = key.load()?;
                let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
                    Error::TlsConfig(format!("no usable private key in {name}: {e}"))
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::TlsConfig(format!("client certificate and key: {e}")))?
            }
        };
        Ok(TlsConfig {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

/// Every certificate of a PEM source; at least one.
fn certs(pem: &Pem) -> Result<Vec<CertificateDer<'static>>> {
    let (bytes, name) = pem.load()?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::TlsConfig(format!("bad PEM in {name}: {e}")))?;
    if certs.is_empty() {
        return Err(Error::TlsConfig(format!("no PEM certificate in {name}")));
    }
    Ok(certs)
}

/// Adds a CA bundle's certificates to `roots`.
fn add_certs(roots: &mut RootCertStore, pem: &Pem) -> Result<()> {
    for cert in certs(pem)? {
        roots
            .add(cert)
            .map_err(|e| Error::TlsConfig(format!("unusable CA certificate: {e}")))?;
    }
    Ok(())
}

/// The system CA bundle file: `SSL_CERT_FILE`, else the first that exists.
fn system_bundle() -> Result<PathBuf> {
    if let Some(f) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        return Ok(f.into());
    }
    SYSTEM_BUNDLES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            Error::TlsConfig(
                "no CA certificates: give a CA file (PEM); no system bundle found \
                 (SSL_CERT_FILE is not set)"
                    .to_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_names_are_unwrapped() {
        assert_eq!(
            plain_name("DnsName(\"gearman.internal\")"),
            "gearman.internal"
        );
        assert_eq!(plain_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(plain_name("DirectoryName"), "DirectoryName");
    }

    #[test]
    fn certificate_errors_in_words() {
        use rustls::pki_types::UnixTime;
        use rustls::CertificateError as C;
        let words = |c: C| in_words(&rustls::Error::InvalidCertificate(c)).expect("words");
        let w = words(C::UnknownIssuer);
        assert!(
            w.starts_with(
                "the server's certificate is not signed by a CA this client trusts [UnknownIssuer]"
            ),
            "{w}"
        );
        let w = words(C::NotValidForNameContext {
            expected: ServerName::try_from("10.0.0.1").expect("name"),
            presented: vec!["DnsName(\"a.b\")".into(), "IpAddress(127.0.0.1)".into()],
        });
        assert!(w.starts_with("the server's certificate is not valid for \"10.0.0.1\" (it carries a.b, 127.0.0.1) [NotValidForName]"), "{w}");
        let w = words(C::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(10 * 86_400)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(86_400)),
        });
        assert!(
            w.starts_with("the server's certificate expired 9 days ago [Expired]"),
            "{w}"
        );
        let w = words(C::NotValidYetContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(0)),
            not_before: UnixTime::since_unix_epoch(Duration::from_secs(3 * 3_600)),
        });
        assert!(
            w.starts_with("the server's certificate is only valid 3 hours from now"),
            "{w}"
        );
        let w = in_words(&rustls::Error::AlertReceived(
            rustls::AlertDescription::UnknownCA,
        ));
        assert!(w.is_some_and(|w| w.contains("refused this client's certificate [UnknownCA]")));
        // Errors with nothing to add keep rustls's own words.
        assert!(in_words(&rustls::Error::DecryptError).is_none());
    }

    #[test]
    fn server_names_from_addresses() {
        let name = |a: &str| host_name(&ServerAddr::new(a)).map(|n| n.to_str().into_owned());
        assert_eq!(name("gearman.local:4730").as_deref(), Ok("gearman.local"));
        assert_eq!(name("127.0.0.1:1").as_deref(), Ok("127.0.0.1"));
        assert_eq!(name("::1").as_deref(), Ok("::1"));
    }
}
