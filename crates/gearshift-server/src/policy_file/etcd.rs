//! The `[etcd]` table: the etcd bridge's settings (docs/etcd.md), each
//! one a `--etcd*` flag gives too (the flag wins). Read at start; a SIGHUP
//! does not change the bridge.

use serde::Deserialize;
use toml::Spanned;

use super::raw::{bad, Bad};

/// The `[etcd]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEtcd {
    endpoints: Option<Vec<Spanned<String>>>,
    prefix: Option<String>,
    user: Option<String>,
    password: Option<String>,
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    function_field: Option<Spanned<String>>,
    default_function: Option<Spanned<String>>,
    harvest_after: Option<Spanned<i64>>,
    layout: Option<Spanned<String>>,
}

/// What the `[etcd]` table says (unset fields: the flags' defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdDecl {
    /// `http://` or `https://` endpoints.
    pub endpoints: Vec<String>,
    /// Key prefix.
    pub prefix: Option<String>,
    /// etcd user.
    pub user: Option<String>,
    /// Its password.
    pub password: Option<String>,
    /// CA bundle file (PEM).
    pub ca: Option<String>,
    /// Client certificate file (PEM).
    pub cert: Option<String>,
    /// Its key file (PEM).
    pub key: Option<String>,
    /// Where a job names its function.
    pub function_field: Option<String>,
    /// The function of a job that names none.
    pub default_function: Option<String>,
    /// Seconds without a heartbeat before a worker is harvested.
    pub harvest_after: Option<u64>,
    /// `single` or `split`.
    pub layout: Option<String>,
}

fn non_empty(v: Option<Spanned<String>>, what: &str) -> Result<Option<String>, Bad> {
    match v {
        Some(s) if s.get_ref().is_empty() => {
            bad(s.span().start, format!("`{what}` must not be empty"))
        }
        other => Ok(other.map(Spanned::into_inner)),
    }
}

/// Checks the table.
pub(super) fn build(raw: Option<RawEtcd>) -> Result<Option<EtcdDecl>, Bad> {
    let Some(raw) = raw else { return Ok(None) };
    let mut endpoints = Vec::new();
    for e in raw.endpoints.unwrap_or_default() {
        let text = e.get_ref();
        if !(text.starts_with("http://") || text.starts_with("https://")) {
            return bad(
                e.span().start,
                "an etcd endpoint is http://HOST:PORT or https://HOST:PORT",
            );
        }
        endpoints.push(e.into_inner());
    }
    let harvest_after = match raw.harvest_after {
        Some(h) if *h.get_ref() < 1 => {
            return bad(
                h.span().start,
                "`harvest_after` is a number of seconds, at least 1",
            )
        }
        Some(h) => u64::try_from(h.into_inner()).ok(),
        None => None,
    };
    if let Some(l) = &raw.layout {
        if !matches!(l.get_ref().as_str(), "single" | "split") {
            return bad(
                l.span().start,
                "`layout` is \"single\" (jobs/) or \"split\" (new/, running/, finished/)",
            );
        }
    }
    Ok(Some(EtcdDecl {
        endpoints,
        prefix: raw.prefix,
        user: raw.user,
        password: raw.password,
        ca: raw.ca,
        cert: raw.cert,
        key: raw.key,
        function_field: non_empty(raw.function_field, "function_field")?,
        default_function: non_empty(raw.default_function, "default_function")?,
        harvest_after,
        layout: raw.layout.map(Spanned::into_inner),
    }))
}
