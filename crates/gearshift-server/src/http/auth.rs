//! Who may do what (docs/http.md): loopback peers read and, with no token
//! configured, change; other hosts read only with `--http-public-read` or
//! the token, and change only with the token. 401 for a missing or wrong
//! token, 403 for a refused peer.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A GET of the API, metrics, events or the dashboard.
    Read,
    /// A POST or DELETE, or a gearmand-protocol submission.
    Change,
}

/// The access settings.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    token: Option<String>,
    public_read: bool,
}

impl Auth {
    /// Access rules with an optional token and `--http-public-read`.
    pub fn new(token: Option<String>, public_read: bool) -> Self {
        Auth {
            token: token.filter(|t| !t.is_empty()),
            public_read,
        }
    }

    /// Whether a request may go on: `loopback` is the peer's kind,
    /// `authorization` its `Authorization` header.
    pub fn check(
        &self,
        access: Access,
        loopback: bool,
        authorization: Option<&[u8]>,
    ) -> Result<(), ApiError> {
        let token_ok = || match (&self.token, authorization.and_then(bearer)) {
            (Some(want), Some(got)) => constant_time_eq(want.as_bytes(), got),
            _ => false,
        };
        let missing = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "a valid token is needed: Authorization: Bearer TOKEN",
            )
        };
        match access {
            Access::Read if loopback || self.public_read => Ok(()),
            Access::Read => match self.token {
                Some(_) if token_ok() => Ok(()),
                Some(_) => Err(missing()),
                None => Err(refused()),
            },
            Access::Change => match self.token {
                Some(_) if token_ok() => Ok(()),
                Some(_) => Err(missing()),
                None if loopback => Ok(()),
                None => Err(refused()),
            },
        }
    }
}

fn refused() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "only loopback peers may do this without a configured token",
    )
}

/// The token of a `Bearer TOKEN` header.
fn bearer(h: &[u8]) -> Option<&[u8]> {
    let rest = h.strip_prefix(b"Bearer ")?;
    Some(rest.trim_ascii())
}

/// Compares without an early exit, so timing does not reveal how much of
/// a guessed token was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// What a request to `path` with `method` does.
pub fn access_of(method: &Method, path: &str) -> Access {
    let readable = path == "/"
        || path.starts_with("/api/")
        || path == "/metrics"
        || path.starts_with("/assets/");
    if readable && (method == Method::GET || method == Method::HEAD) {
        Access::Read
    } else {
        Access::Change
    }
}

/// Whether a change submits a job (the API's, or gearmand's HTTP protocol,
/// whose paths are function names).
fn submits(method: &Method, path: &str) -> bool {
    let ours = path.starts_with("/api/") || path == "/metrics" || path.starts_with("/assets/");
    (method == Method::POST && path == "/api/v1/jobs") || (!ours && path != "/")
}

/// Applies the access rules and [`Auth::check`] to every request.
pub async fn middleware(
    State(app): State<super::State>,
    ConnectInfo(super::listener::Peer(peer)): ConnectInfo<super::listener::Peer>,
    req: Request,
    next: Next,
) -> Response {
    let access = access_of(req.method(), req.uri().path());
    // The Gearman port's access rules first (by address: HTTP has no client
    // certificates); peers that may make admin changes are trusted as
    // loopback is.
    let rights = app.ctx.access.get().rights(peer.ip(), None);
    let denied = match access {
        Access::Read if !rights.read => Some("the access rules do not let this peer read"),
        Access::Change if submits(req.method(), req.uri().path()) && !rights.submit => {
            Some("the access rules do not let this peer submit jobs")
        }
        _ => None,
    };
    if let Some(why) = denied {
        tracing::warn!(%peer, path = req.uri().path(), "HTTP request refused: {why}");
        return ApiError::new(StatusCode::FORBIDDEN, why).into_response();
    }
    let loopback = rights.change;
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match app.ctx.auth.check(access, loopback, authorization) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(a: &Auth, access: Access, loopback: bool, h: Option<&str>) -> u16 {
        match a.check(access, loopback, h.map(str::as_bytes)) {
            Ok(()) => 200,
            Err(e) => e.status.as_u16(),
        }
    }

    #[test]
    fn no_token_loopback_only() {
        let a = Auth::new(None, false);
        assert_eq!(status(&a, Access::Read, true, None), 200);
        assert_eq!(status(&a, Access::Change, true, None), 200);
        assert_eq!(status(&a, Access::Read, false, None), 403);
        assert_eq!(status(&a, Access::Change, false, None), 403);
        assert_eq!(status(&a, Access::Change, false, Some("Bearer x")), 403);
    }

    #[test]
    fn public_read_opens_reads_only() {
        let a = Auth::new(None, true);
        assert_eq!(status(&a, Access::Read, false, None), 200);
        assert_eq!(status(&a, Access::Change, false, None), 403);
        let t = Auth::new(Some("s3cret".into()), true);
        assert_eq!(status(&t, Access::Read, false, None), 200);
        assert_eq!(status(&t, Access::Change, false, None), 401);
        assert_eq!(
            status(&t, Access::Change, false, Some("Bearer s3cret")),
            200
        );
    }

    #[test]
    fn token_rules() {
        let a = Auth::new(Some("s3cret".into()), false);
        assert_eq!(status(&a, Access::Read, true, None), 200);
        assert_eq!(status(&a, Access::Change, true, None), 401);
        assert_eq!(status(&a, Access::Change, true, Some("Bearer nope")), 401);
        assert_eq!(status(&a, Access::Change, true, Some("Bearer s3cret")), 200);
        assert_eq!(status(&a, Access::Read, false, None), 401);
        assert_eq!(status(&a, Access::Read, false, Some("Bearer s3cret")), 200);
        assert_eq!(
            status(&a, Access::Change, false, Some("Bearer s3cret")),
            200
        );
        assert_eq!(status(&a, Access::Change, false, Some("Basic s3cret")), 401);
        assert_eq!(status(&a, Access::Change, false, Some("Bearer s3cre")), 401);
    }

    #[test]
    fn constant_time_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn submissions_by_gearmand_protocol_are_changes() {
        assert_eq!(access_of(&Method::GET, "/reverse"), Access::Change);
        assert_eq!(access_of(&Method::GET, "/api/v1/jobs"), Access::Read);
        assert_eq!(access_of(&Method::POST, "/api/v1/jobs"), Access::Change);
        assert_eq!(access_of(&Method::GET, "/"), Access::Read);
    }
}
