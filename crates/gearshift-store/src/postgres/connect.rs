//! Connecting: the URL (or libpq `key=value` string) with libpq's
//! environment defaults, a password-free name for messages, and how
//! driver errors become [`StoreError`]s.

use std::path::Path;

use postgres::config::Host;
use postgres::{Client, Config, NoTls};

use crate::StoreError;

/// Parses `url` and fills what it leaves out from the environment, as
/// libpq does (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`).
pub(super) fn config(url: &str) -> Result<Config, StoreError> {
    // Not echoed: it may hold a password.
    let mut config: Config = url
        .parse()
        .map_err(|e: postgres::Error| StoreError::BadUrl(causes(&e)))?;
    libpq_defaults(&mut config, |name| std::env::var(name).ok());
    Ok(config)
}

/// Connects without TLS (TLS is not supported yet).
pub(super) fn connect(config: &Config, server: &str) -> Result<Client, StoreError> {
    config
        .connect(NoTls)
        .map_err(|e| unreachable_or_refused(&e, server, "the connection"))
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
