//! The TLS settings libpq takes in a connection string (`sslmode`,
//! `sslrootcert`, `sslcert`, `sslkey`), taken out of a URL or `key=value`
//! string before the driver, which knows none of them, reads the rest.

use crate::StoreError;

/// The TLS settings a connection string gives.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct TlsParams {
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
}

impl TlsParams {
    /// Keeps `value` if `key` is one of ours (the last one wins, as in
    /// libpq); false for any other key.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            "sslmode" => self.sslmode = Some(value),
            "sslrootcert" => self.sslrootcert = Some(value),
            "sslcert" => self.sslcert = Some(value),
            "sslkey" => self.sslkey = Some(value),
            _ => return false,
        }
        true
    }
}

/// Takes the TLS settings out of a URL or `key=value` string (the driver
/// knows neither `verify-*` nor the certificate files); the rest is
/// returned as written, for the driver. Errors never echo the string.
pub(super) fn take_tls_params(url: &str) -> Result<(String, TlsParams), StoreError> {
    let bad = |what: &str| StoreError::BadUrl(what.to_owned());
    let prefix = ["postgres://", "postgresql://"]
        .into_iter()
        .find(|p| url.starts_with(p));
    let mut params = TlsParams::default();
    let Some(prefix) = prefix else {
        let rest = take_conninfo_params(url, &mut params).map_err(bad)?;
        return Ok((rest, params));
    };
    // As the driver reads a URL: the credentials end at the first `@`,
    // the parameters start at the next `?`, `key=value` joined by `&`.
    let after_creds = url[prefix.len()..]
        .find('@')
        .map_or(prefix.len(), |i| prefix.len() + i + 1);
    let Some(q) = url[after_creds..].find('?').map(|i| after_creds + i) else {
        return Ok((url.to_owned(), params));
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| bad("a URL parameter is not UTF-8 once percent-decoded"))
    };
    let mut kept = Vec::new();
    for pair in url[q + 1..].split('&').filter(|p| !p.is_empty()) {
        let ours = match pair.split_once('=') {
            Some((k, v)) => params.take(&decode(k)?, decode(v)?),
            None => false,
        };
        if !ours {
            kept.push(pair);
        }
    }
    let mut rest = url[..q].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, params))
}

/// [`take_tls_params`] for libpq's `key = value ...` form: values may be
/// single-quoted, and a backslash escapes the next character.
fn take_conninfo_params(s: &str, params: &mut TlsParams) -> Result<String, &'static str> {
    let mut rest = String::new();
    let mut it = s.char_indices().peekable();
    let skip_ws = |it: &mut std::iter::Peekable<std::str::CharIndices>| {
        while it.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_ws(&mut it);
        let Some(&(start, _)) = it.peek() else { break };
        let mut key = String::new();
        while let Some((_, c)) = it.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        skip_ws(&mut it);
        if it.next().map(|(_, c)| c) != Some('=') {
            return Err("expected `=` after a keyword in the connection string");
        }
        skip_ws(&mut it);
        let quoted = it.next_if(|(_, c)| *c == '\'').is_some();
        let mut value = String::new();
        let mut closed = !quoted;
        while let Some((_, c)) = it.next() {
            match c {
                '\'' if quoted => {
                    closed = true;
                    break;
                }
                '\\' => value.extend(it.next().map(|(_, c)| c)),
                c if c.is_whitespace() && !quoted => break,
                c => value.push(c),
            }
        }
        if !closed {
            return Err("unterminated quoted value in the connection string");
        }
        let end = it.peek().map_or(s.len(), |&(i, _)| i);
        if !params.take(&key, value) {
            rest.push_str(s[start..end].trim_end());
            rest.push(' ');
        }
    }
    Ok(rest.trim_end().to_owned())
}

#[cfg(test)]
impl TlsParams {
    /// `sslmode` and `sslrootcert` as given.
    pub(super) fn with(mode: Option<&str>, root: Option<&str>) -> TlsParams {
        TlsParams {
            sslmode: mode.map(String::from),
            sslrootcert: root.map(String::from),
            ..TlsParams::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> (String, TlsParams) {
        take_tls_params(url).expect("split")
    }

    fn params(mode: Option<&str>, root: Option<&str>) -> TlsParams {
        TlsParams::with(mode, root)
    }

    #[test]
    fn tls_params_come_out_of_a_url() {
        assert_eq!(
            split("postgres://u:p@h:1/d?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"),
            (
                "postgres://u:p@h:1/d".into(),
                params(Some("verify-full"), Some("/etc/ca.pem"))
            )
        );
        assert_eq!(
            split("postgresql://h/d?connect_timeout=3&sslmode=require&application_name=x"),
            (
                "postgresql://h/d?connect_timeout=3&application_name=x".into(),
                params(Some("require"), None)
            )
        );
        // A `?` in the password is not the query; no query, no change.
        assert_eq!(
            split("postgres://u:p?x@h/d"),
            ("postgres://u:p?x@h/d".into(), params(None, None))
        );
        // The last one wins, as in libpq.
        assert_eq!(
            split("postgres://h/d?sslmode=disable&sslmode=verify-ca").1,
            params(Some("verify-ca"), None)
        );
        // The client certificate's files too, in either form.
        for url in [
            "postgres://h/d?sslcert=%2Fc.pem&sslkey=/k.pem",
            "sslcert='/c.pem' sslkey=/k.pem",
        ] {
            let p = split(url).1;
            assert_eq!(
                (p.sslcert, p.sslkey),
                (Some("/c.pem".into()), Some("/k.pem".into()))
            );
        }
    }

    #[test]
    fn tls_params_come_out_of_a_conninfo_string() {
        assert_eq!(
            split("host=h sslmode = verify-ca  sslrootcert='/my certs/ca.pem' dbname=d"),
            (
                "host=h dbname=d".into(),
                params(Some("verify-ca"), Some("/my certs/ca.pem"))
            )
        );
        assert_eq!(
            split(r"password='it\'s' sslrootcert=a\ b"),
            (r"password='it\'s'".into(), params(None, Some("a b")))
        );
        assert_eq!(split("").0, "");
    }

    #[test]
    fn a_broken_conninfo_string_is_refused_without_echoing_it() {
        for bad in ["password='hunter2", "hunter2 host=h"] {
            let text = take_tls_params(bad).expect_err(bad).to_string();
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
