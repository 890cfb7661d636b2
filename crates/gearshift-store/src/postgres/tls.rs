//! The rustls side of libpq's `sslmode`: which certificate checks a mode
//! makes, and the connector that makes them (ring as the crypto provider).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::connect::{SslMode, TlsSettings};

/// What a connection's certificate check is, as libpq decides it: a root
/// certificate file that exists is always used (in every mode, as libpq
/// does); without one only `require` and weaker modes connect, unchecked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Check {
    /// Any certificate (the handshake's signatures are still verified).
    Nothing,
    /// Signed by one of the roots in `file`.
    Chain,
    /// Signed by a root, and naming the host connected to.
    ChainAndName,
}

/// The check for `settings`, or why the mode cannot be met; `exists` says
/// whether a file is there (a parameter for the tests).
pub(super) fn check_for(
    settings: &TlsSettings,
    exists: impl Fn(&Path) -> bool,
) -> Result<Check, String> {
    let file = settings.root_cert.as_deref().filter(|p| exists(p));
    match (settings.mode, file) {
        (SslMode::VerifyFull, Some(_)) => Ok(Check::ChainAndName),
        (SslMode::Disable, _) => Ok(Check::Nothing),
        (_, Some(_)) => Ok(Check::Chain),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => Err(match &settings.root_cert {
            Some(p) => format!(
                "sslmode={} needs the root certificate file {}, which does not exist; \
                 give one with sslrootcert (PEM), or use sslmode=require (no certificate check)",
                settings.mode,
                p.display()
            ),
            None => format!(
                "sslmode={} needs a root certificate file: give one with sslrootcert (PEM)",
                settings.mode
            ),
        }),
        (_, None) => Ok(Check::Nothing),
    }
}

/// A rustls connector for `settings` (None for `disable`).
pub(super) fn connector(settings: &TlsSettings) -> Result<Option<MakeRustlsConnect>, String> {
    if settings.mode == SslMode::Disable {
        return Ok(None);
    }
    let check = check_for(settings, Path::exists)?;
    let roots = match (&check, &settings.root_cert) {
        (Check::Chain | Check::ChainAndName, Some(file)) => Some(Arc::new(load_roots(file)?)),
        _ => None,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Verifier {
        roots,
        check_name: check == Check::ChainAndName,
        provider: provider.clone(),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("rustls: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let (cert, key) = (
        settings.client_cert.as_deref(),
        settings.client_key.as_deref(),
    );
    let config = match super::client_cert::load(cert, key)? {
        None => builder.with_no_client_auth(),
        Some((chain, private)) => builder.with_client_auth_cert(chain, private).map_err(|e| {
            format!(
                "the client certificate {} and key {} do not go together: {e}",
                cert.map_or(String::new(), |c| c.display().to_string()),
                key.map_or(String::new(), |k| k.display().to_string())
            )
        })?,
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// Every certificate in a PEM file; at least one.
fn load_roots(file: &Path) -> Result<RootCertStore, String> {
    let bad = |e: &dyn std::fmt::Display| {
        format!(
            "cannot read the root certificates in {}: {e}",
            file.display()
        )
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(file).map_err(|e| bad(&e))? {
        roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    if roots.is_empty() {
        return Err(bad(&"no PEM certificate in it"));
    }
    Ok(roots)
}

/// One verifier for the three checks (rustls's own always checks the name,
/// which `verify-ca` and `require` with a root file must not).
#[derive(Debug)]
struct Verifier {
    /// None: no chain check.
    roots: Option<Arc<RootCertStore>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.check_name {
            verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn settings(mode: SslMode, root: Option<&str>) -> TlsSettings {
        TlsSettings {
            mode,
            root_cert: root.map(PathBuf::from),
            client_cert: None,
            client_key: None,
        }
    }

    #[test]
    fn a_root_file_that_exists_is_checked_in_every_tls_mode() {
        let there = |_: &Path| true;
        for mode in [
            SslMode::Allow,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
        ] {
            assert_eq!(
                check_for(&settings(mode, Some("/r.crt")), there),
                Ok(Check::Chain),
                "{mode}"
            );
        }
        assert_eq!(
            check_for(&settings(SslMode::VerifyFull, Some("/r.crt")), there),
            Ok(Check::ChainAndName)
        );
        assert_eq!(
            check_for(&settings(SslMode::Disable, Some("/r.crt")), there),
            Ok(Check::Nothing)
        );
    }

    #[test]
    fn without_a_root_file_only_the_weak_modes_connect() {
        let absent = |_: &Path| false;
        for mode in [SslMode::Allow, SslMode::Prefer, SslMode::Require] {
            assert_eq!(
                check_for(&settings(mode, Some("/r.crt")), absent),
                Ok(Check::Nothing)
            );
        }
        let e = check_for(&settings(SslMode::VerifyFull, Some("/r.crt")), absent)
            .expect_err("verify-full without roots");
        assert!(
            e.contains("sslmode=verify-full") && e.contains("/r.crt"),
            "{e}"
        );
        let e = check_for(&settings(SslMode::VerifyCa, None), absent).expect_err("no file");
        assert!(e.contains("sslrootcert"), "{e}");
    }

    #[test]
    fn a_root_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("root.crt");
        std::fs::write(&file, "not a certificate\n").expect("write");
        let e = load_roots(&file).expect_err("no certificate");
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = load_roots(&dir.path().join("missing.crt")).expect_err("missing");
        assert!(e.contains("missing.crt"), "{e}");
    }
}
