//! Connecting: the URL (or libpq `key=value` string) with libpq's
//! environment defaults, its TLS settings, a password-free name for
//! messages, and how driver errors become [`StoreError`]s.

use std::fmt;
use std::path::{Path, PathBuf};

use postgres::config::{Host, SslMode as DriverSslMode};
use postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls_params::{take_tls_params, TlsParams};
use tracing::{debug, warn};

use super::tls;
use crate::StoreError;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// Plain; TLS only if the server refuses a plain connection.
    Allow,
    /// TLS if the server offers it, else plain (libpq's default).
    Prefer,
    /// TLS; the certificate is checked only if a root certificate file
    /// exists (as libpq does).
    Require,
    /// TLS with a certificate signed by a root in `sslrootcert`.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    const ALL: [(&'static str, SslMode); 6] = [
        ("disable", SslMode::Disable),
        ("allow", SslMode::Allow),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    fn parse(text: &str) -> Option<SslMode> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, mode)| *mode)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Self::ALL
            .iter()
            .find(|(_, mode)| mode == self)
            .map_or("?", |(name, _)| name);
        f.write_str(name)
    }
}

/// The TLS a connection string and the environment ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `sslmode`, else `PGSSLMODE`, else `prefer`.
    pub mode: SslMode,
    /// `sslrootcert`, else `PGSSLROOTCERT`, else `~/.postgresql/root.crt`
    /// (used only if it exists, as libpq does).
    pub root_cert: Option<PathBuf>,
    /// The client certificate (offered only if it exists, as libpq does)
    /// and its key ([`super::client_cert::files`]).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

/// Parses `url` and fills what it leaves out from the environment, as
/// libpq does (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`,
/// `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`).
pub(super) fn config(url: &str) -> Result<(Config, TlsSettings), StoreError> {
    let env = |name: &str| std::env::var(name).ok();
    let (rest, params) = take_tls_params(url)?;
    // Not echoed: it may hold a password.
    let mut config: Config = rest
        .parse()
        .map_err(|e: postgres::Error| StoreError::BadUrl(causes(&e)))?;
    libpq_defaults(&mut config, env);
    Ok((config, tls_settings(params, env)?))
}

/// The TLS settings from what the string gave and the environment.
fn tls_settings(
    params: TlsParams,
    env: impl Fn(&str) -> Option<String>,
) -> Result<TlsSettings, StoreError> {
    let given = |p: Option<String>, var: &str| p.or_else(|| env(var).filter(|v| !v.is_empty()));
    let mode = match given(params.sslmode, "PGSSLMODE") {
        None => SslMode::Prefer,
        Some(text) => SslMode::parse(&text).ok_or_else(|| {
            StoreError::BadUrl(format!(
                "sslmode {text:?} is none of disable, allow, prefer, require, verify-ca, \
                 verify-full"
            ))
        })?,
    };
    let root_cert = match given(params.sslrootcert, "PGSSLROOTCERT") {
        Some(s) if s == "system" => {
            return Err(StoreError::BadUrl(
                "sslrootcert=system (the system's trusted roots) is not supported: give a PEM \
                 file of root certificates"
                    .into(),
            ))
        }
        Some(path) => Some(PathBuf::from(path)),
        None => env("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| Path::new(&h).join(".postgresql/root.crt")),
    };
    let (client_cert, client_key) = super::client_cert::files(params.sslcert, params.sslkey, env);
    Ok(TlsSettings {
        mode,
        root_cert,
        client_cert,
        client_key,
    })
}

/// The TLS half of connecting: the settings and the rustls connector
/// built from them once (its root certificates read at open).
pub(super) struct Tls {
    settings: TlsSettings,
    connector: Option<MakeRustlsConnect>,
}

impl Tls {
    /// Reads the root certificates `settings` calls for, if any.
    pub(super) fn new(settings: TlsSettings, server: &str) -> Result<Tls, StoreError> {
        let connector = tls::connector(&settings).map_err(|why| StoreError::Tls {
            server: server.into(),
            why,
        })?;
        Ok(Tls {
            settings,
            connector,
        })
    }

    /// The `sslmode` in force.
    pub(super) fn mode(&self) -> SslMode {
        self.settings.mode
    }
}

/// Connects as `tls.mode()` says, with libpq's fallbacks: `allow` tries
/// TLS when the server refuses a plain connection, `prefer` a plain one
/// when the TLS handshake fails. A Unix socket is always plain (libpq
/// never uses TLS on one).
pub(super) fn connect(config: &Config, tls: &Tls, server: &str) -> Result<Client, StoreError> {
    let plain = || {
        let mut c = config.clone();
        c.ssl_mode(DriverSslMode::Disable);
        c.connect(NoTls)
    };
    let local = config
        .get_hosts()
        .iter()
        .all(|h| matches!(h, Host::Unix(_)));
    let Some(connector) = tls.connector.as_ref().filter(|_| !local) else {
        return plain().map_err(|e| unreachable_or_refused(&e, server, "the connection"));
    };
    let secure = |mode| {
        let mut c = config.clone();
        c.ssl_mode(mode);
        c.connect(connector.clone())
    };
    let result = match tls.mode() {
        SslMode::Disable => plain(),
        SslMode::Allow => match plain() {
            Err(e) if e.as_db_error().is_some() => {
                debug!(%server, error = %e, "plain connection refused; trying TLS (sslmode=allow)");
                secure(DriverSslMode::Require)
            }
            r => r,
        },
        SslMode::Prefer => match secure(DriverSslMode::Prefer) {
            Err(e) if is_tls_error(&e) => {
                warn!(%server, error = %causes(&e), "TLS failed; connecting without it (sslmode=prefer)");
                plain()
            }
            r => r,
        },
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            secure(DriverSslMode::Require)
        }
    };
    result.map_err(|e| {
        let mut err = unreachable_or_refused(&e, server, "the connection");
        if let StoreError::Unreachable { why, .. } = &mut err {
            if is_tls_error(&e) {
                why.push_str(&tls_hint(&tls.settings));
            }
        }
        err
    })
}

/// A failed TLS negotiation or handshake (the driver's error kind is not
/// public; its text is fixed).
fn is_tls_error(e: &postgres::Error) -> bool {
    e.to_string().contains("TLS")
}

/// What the check was, for a failed handshake's message.
fn tls_hint(settings: &TlsSettings) -> String {
    match &settings.root_cert {
        Some(p) if settings.mode != SslMode::Disable && p.exists() => format!(
            " (sslmode={}, checked against the root certificates in {})",
            settings.mode,
            p.display()
        ),
        _ => format!(" (sslmode={})", settings.mode),
    }
}

/// Fills in what libpq would take from the environment when the
/// connection string leaves it out; no host at all means the local socket
/// directory (Debian's `/var/run/postgresql`, else `/tmp`).
pub fn libpq_defaults(config: &mut Config, env: impl Fn(&str) -> Option<String>) {
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(hosts) => {
                for h in hosts.split(',').filter(|h| !h.is_empty()) {
                    config.host(h);
                }
            }
            None => {
                let dir = ["/var/run/postgresql", "/tmp"]
                    .into_iter()
                    .find(|d| Path::new(d).is_dir())
                    .unwrap_or("/tmp");
                config.host_path(dir);
            }
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = env("PGPORT").and_then(|p| p.parse().ok()) {
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = env("PGUSER") {
            config.user(&user);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = env("PGDATABASE") {
            config.dbname(&db);
        }
    }
    if config.get_password().is_none() {
        if let Some(pw) = env("PGPASSWORD") {
            config.password(pw);
        }
    }
}

/// `postgres://user@host:port/dbname`, without the password.
pub fn describe(config: &Config) -> String {
    // One port serves every host; none means the default.
    let ports = config.get_ports();
    let port = |i: usize| match ports {
        [] => 5432,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(5432),
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| match h {
            Host::Tcp(name) => format!("{name}:{}", port(i)),
            Host::Unix(dir) => format!("{}:{}", dir.display(), port(i)),
        })
        .collect();
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    format!(
        "postgres://{user}{}/{}",
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    )
}

/// An error with its causes (the driver's own message is often only
/// "error connecting to server"; the cause says why).
pub fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// A driver error as a store error: a lost or refused connection is
/// [`StoreError::Unreachable`]; anything the server answered with (an SQL
/// error) is [`StoreError::Database`].
pub(super) fn unreachable_or_refused(e: &postgres::Error, server: &str, what: &str) -> StoreError {
    if e.as_db_error().is_some() {
        StoreError::Database {
            server: server.into(),
            what: what.into(),
            why: causes(e),
        }
    } else {
        StoreError::Unreachable {
            server: server.into(),
            why: causes(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_fall_back_to_the_env_then_libpq_defaults() {
        let env = |k: &str| match k {
            "PGSSLMODE" => Some("verify-full".to_string()),
            "PGSSLROOTCERT" => Some("/env/ca.pem".to_string()),
            _ => None,
        };
        let s = tls_settings(TlsParams::with(None, None), env).expect("settings");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/env/ca.pem")));
        let s = tls_settings(TlsParams::with(Some("require"), Some("/url.pem")), env)
            .expect("settings");
        assert_eq!(s.mode, SslMode::Require);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/url.pem")));

        let home = |k: &str| (k == "HOME").then(|| "/home/g".to_string());
        let s = tls_settings(TlsParams::with(None, None), home).expect("settings");
        assert_eq!(s.mode, SslMode::Prefer);
        assert_eq!(
            s.root_cert.as_deref(),
            Some(Path::new("/home/g/.postgresql/root.crt"))
        );
    }

    #[test]
    fn a_bad_sslmode_or_sslrootcert_system_is_refused() {
        let e =
            tls_settings(TlsParams::with(Some("verify"), None), |_| None).expect_err("bad mode");
        assert!(e.to_string().contains("verify-full"), "{e}");
        let e = tls_settings(TlsParams::with(None, Some("system")), |_| None).expect_err("system");
        assert!(e.to_string().contains("not supported"), "{e}");
        for (name, mode) in SslMode::ALL {
            assert_eq!(SslMode::parse(&mode.to_string()), Some(mode), "{name}");
        }
    }

    #[test]
    fn verify_modes_parse_through_config() {
        let (c, s) = config("postgres://u:pw@h:1/d?sslmode=verify-full&sslrootcert=/ca.pem")
            .expect("config");
        assert_eq!(describe(&c), "postgres://u@h:1/d");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/ca.pem")));
    }

    #[test]
    fn env_fills_what_the_url_leaves_out() {
        let mut c: Config = "postgres:///".parse().expect("parse");
        let env = |k: &str| match k {
            "PGHOST" => Some("db.example".to_string()),
            "PGPORT" => Some("6543".to_string()),
            "PGUSER" => Some("gs".to_string()),
            "PGDATABASE" => Some("jobs".to_string()),
            "PGPASSWORD" => Some("secret".to_string()),
            _ => None,
        };
        libpq_defaults(&mut c, env);
        assert_eq!(describe(&c), "postgres://gs@db.example:6543/jobs");
        assert_eq!(c.get_password(), Some(&b"secret"[..]));
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_it() {
        let e = config("postgres://me:hunter2@h:notaport/d").expect_err("bad port");
        let text = e.to_string();
        assert!(
            text.starts_with("cannot parse the PostgreSQL URL: "),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn the_url_wins_over_the_env() {
        let mut c: Config = "postgres://me:pw@h:1/d".parse().expect("parse");
        libpq_defaults(&mut c, |_| Some("env".to_string()));
        assert_eq!(describe(&c), "postgres://me@h:1/d");
        assert_eq!(c.get_password(), Some(&b"pw"[..]));
    }
}
