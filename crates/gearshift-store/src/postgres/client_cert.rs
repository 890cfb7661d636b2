//! libpq's client certificate (`sslcert` and `sslkey`): which files, as
//! libpq picks them, and the key's permissions checked as libpq checks
//! them, so a server that authenticates by certificate (`cert` in
//! pg_hba.conf, or `clientcert=verify-full`) takes the store's connections.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The certificate chain and key a connection offers.
pub(super) type Offered = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Where the certificate and key are: `sslcert`, else `PGSSLCERT`, else
/// `~/.postgresql/postgresql.crt`; `sslkey`, else `PGSSLKEY`, else
/// `~/.postgresql/postgresql.key`.
pub(super) fn files(
    sslcert: Option<String>,
    sslkey: Option<String>,
    env: impl Fn(&str) -> Option<String>,
) -> (Option<PathBuf>, Option<PathBuf>) {
    let home = env("HOME").filter(|h| !h.is_empty());
    let pick = |given: Option<String>, var: &str, default: &str| {
        given
            .or_else(|| env(var).filter(|v| !v.is_empty()))
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| Path::new(h).join(default)))
    };
    (
        pick(sslcert, "PGSSLCERT", ".postgresql/postgresql.crt"),
        pick(sslkey, "PGSSLKEY", ".postgresql/postgresql.key"),
    )
}

/// What to offer: nothing when there is no certificate file (as in libpq,
/// whether or not one was named); else the chain and its key, which must
/// exist, parse, and be readable by its owner only (by root and its group,
/// for a key root owns).
pub(super) fn load(cert: Option<&Path>, key: Option<&Path>) -> Result<Option<Offered>, String> {
    let Some(cert) = cert.filter(|c| c.exists()) else {
        return Ok(None);
    };
    let Some(key) = key.filter(|k| k.exists()) else {
        return Err(format!(
            "the client certificate {} has no private key file{}: give one with sslkey (PEM)",
            cert.display(),
            key.map_or(String::new(), |k| format!(
                " ({} does not exist)",
                k.display()
            ))
        ));
    };
    check_key_mode(key)?;
    let bad = |what: &Path, e: &dyn std::fmt::Display| {
        format!(
            "cannot read the client certificate's {}: {e}",
            what.display()
        )
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, &e))?;
    if chain.is_empty() {
        return Err(bad(cert, &"no PEM certificate in it"));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    Ok(Some((chain, private)))
}

/// libpq's rule: a key root owns may be read by its group, any other by
/// its owner alone.
fn check_key_mode(key: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let (allowed, as_text) = match meta.uid() {
        0 => (0o640, "u=rw,g=r (0640)"),
        _ => (0o600, "u=rw (0600)"),
    };
    if meta.mode() & 0o777 & !allowed != 0 {
        return Err(format!(
            "the private key file {} can be read or written by others (mode {:04o}); \
             make it {as_text} or less",
            key.display(),
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_files_come_from_the_string_then_the_env_then_home() {
        let env = |name: &str| match name {
            "HOME" => Some("/home/g".to_owned()),
            "PGSSLKEY" => Some("/env/k.pem".to_owned()),
            _ => None,
        };
        let (c, k) = files(Some("/url/c.pem".into()), None, env);
        assert_eq!(c.as_deref(), Some(Path::new("/url/c.pem")));
        assert_eq!(k.as_deref(), Some(Path::new("/env/k.pem")));
        let (c, k) = files(None, Some("/url/k.pem".into()), env);
        assert_eq!(
            c.as_deref(),
            Some(Path::new("/home/g/.postgresql/postgresql.crt"))
        );
        assert_eq!(k.as_deref(), Some(Path::new("/url/k.pem")));
        assert_eq!(files(None, None, |_| None), (None, None));
    }

    #[test]
    fn no_certificate_file_offers_nothing_and_a_missing_key_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        assert!(matches!(load(Some(&cert), Some(&key)), Ok(None)));
        assert!(matches!(load(None, None), Ok(None)));
        std::fs::write(&cert, "x").expect("write");
        let e = load(Some(&cert), Some(&key)).expect_err("no key");
        assert!(
            e.contains("k.pem does not exist") && e.contains("sslkey"),
            "{e}"
        );
    }

    #[test]
    fn a_key_others_can_read_is_refused_as_libpq_refuses_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("k.pem");
        std::fs::write(&key, "x").expect("write");
        let owned_by_root = std::fs::metadata(&key).map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        });
        let mode = |m: u32| std::fs::set_permissions(&key, std::fs::Permissions::from_mode(m));
        mode(0o600).expect("chmod");
        check_key_mode(&key).expect("0600");
        mode(0o604).expect("chmod");
        let e = check_key_mode(&key).expect_err("world-readable");
        assert!(e.contains("0604"), "{e}");
        mode(0o640).expect("chmod");
        // Root's own key may be read by its group.
        assert_eq!(check_key_mode(&key).is_ok(), owned_by_root.expect("stat"));
    }
}
