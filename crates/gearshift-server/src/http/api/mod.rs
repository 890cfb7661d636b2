//! The `/api/v1` routes: reads are [`crate::Control`] calls that copy a
//! view out of the core, actions are typed calls, submissions go through
//! [`super::submit`]. Names are lossy UTF-8; workloads and results base64,
//! plus text when they are UTF-8.

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use gearshift_core::control::{ControlError, DeadSelect};
use gearshift_core::lifecycle::{Event, LastFailure, Step};
use gearshift_core::policy::{Backoff, Policy, Reason};
use gearshift_core::view::{
    DeadView, FunctionView, JobDetail, JobQuery, JobSummary, ScheduleView, StateFilter, WorkerView,
    MAX_PAGE,
};
use gearshift_proto::Priority;
use serde_json::{json, Map, Value};

use super::submit::{Outcome, Submission};
use super::{json_reply, ApiError};

type Reply = Result<Response, ApiError>;

fn ok(v: &Value) -> Reply {
    Ok(json_reply(StatusCode::OK, v))
}

/// Bytes as a JSON string (U+FFFD for what is not UTF-8).
pub fn lossy(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn opt_lossy(b: Option<&Bytes>) -> Value {
    b.map_or(Value::Null, |b| lossy(b))
}

/// Adds `{key}_base64` and, when UTF-8, `{key}` text.
fn put_payload(m: &mut Map<String, Value>, key: &str, b: &[u8]) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(b);
    m.insert(format!("{key}_base64"), Value::String(b64));
    if let Ok(s) = std::str::from_utf8(b) {
        m.insert(key.to_owned(), Value::String(s.to_owned()));
    }
}

/// A priority's word.
pub fn priority_word(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// The query's pairs, percent-decoded (`+` is a space).
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, Vec<u8>)> {
    let Some(raw) = raw else { return Vec::new() };
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                String::from_utf8_lossy(&percent_decode(k)).into_owned(),
                percent_decode(v),
            )
        })
        .collect()
}

/// Decodes `%XX` escapes and `+`.
pub fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

fn get<'a>(q: &'a [(String, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice())
}

/// `limit` and `cursor`.
fn paging(q: &[(String, Vec<u8>)]) -> Result<(usize, Option<u64>), ApiError> {
    let num = |key: &str| -> Result<Option<u64>, ApiError> {
        match get(q, key) {
            None => Ok(None),
            Some(v) => std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .map(Some)
                .ok_or_else(|| ApiError::bad(format!("`{key}` must be a whole number"))),
        }
    };
    let limit = match num("limit")? {
        None => 100,
        Some(0) => return Err(ApiError::bad("`limit` must be at least 1")),
        Some(n) => (n as usize).min(MAX_PAGE),
    };
    Ok((limit, num("cursor")?))
}

fn cursor(next: Option<u64>) -> Value {
    next.map_or(Value::Null, |n| Value::String(n.to_string()))
}

fn path_of(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(s)| s)
        .map_err(|e| ApiError::bad(format!("bad path: {e}")))
}

fn body_of(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|e| {
        let status = e.status();
        let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "the body is larger than the server's packet limit".to_owned()
        } else {
            format!("cannot read the body: {e}")
        };
        ApiError::new(status, msg)
    })
}

/// An optional JSON object body.
fn json_body(b: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if b.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(b) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad("the body must be a JSON object")),
        Err(e) => Err(ApiError::bad(format!("the body is not valid JSON: {e}"))),
    }
}

mod actions;
mod reads;

pub use actions::*;
pub use reads::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), b"a b c");
        assert_eq!(percent_decode("%zz%4"), b"%zz%4");
        assert_eq!(percent_decode("H%3Ahost%3A1"), b"H:host:1");
        assert_eq!(percent_decode("%ff"), vec![0xff]);
    }

    #[test]
    fn queries() {
        let q = query_pairs(Some("function=a&function=b&limit=5"));
        assert_eq!(q.len(), 3);
        assert_eq!(paging(&q).ok(), Some((5, None)));
        let bad = query_pairs(Some("cursor=x"));
        assert!(paging(&bad).is_err());
        let big = query_pairs(Some("limit=5000&cursor=42"));
        assert_eq!(paging(&big).ok(), Some((MAX_PAGE, Some(42))));
    }
}
