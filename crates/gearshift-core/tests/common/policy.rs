//! Helpers for scenarios under per-function policies: a policy with fixed
//! delays and no jitter, putting it in force, and reading `show job`.

use std::sync::Arc;

use bytes::Bytes;
use gearshift_core::policy::{Backoff, Policies, Policy, Reason, Reasons, Rule};
use gearshift_proto::Request;

use super::{b, World};

pub fn checked(mut w: World) -> World {
    w.check = true;
    w
}

pub fn policy(max_attempts: u32, retry_on: &[Reason]) -> Policy {
    Policy {
        max_attempts,
        retry_on: Reasons::of(retry_on),
        backoff: Backoff::Exponential,
        initial_delay: 1_000,
        max_delay: 60_000,
        jitter: false,
        keep_results: 3_600_000,
        ..Policy::default()
    }
}

pub fn with_policy(w: &mut World, pattern: &str, p: Policy) {
    w.core.set_policies(Policies {
        rules: vec![Rule {
            pattern: pattern.into(),
            policy: Arc::new(p),
        }],
        ..Policies::default()
    });
}

/// A world with `p` on functions matching `pattern`, client 1 and worker 2
/// registered for `functions`.
pub fn setup(mut w: World, pattern: &str, p: Policy, functions: &[&str]) -> World {
    w.check = true;
    with_policy(&mut w, pattern, p);
    w.conns(&[1, 2]);
    w.can_do(2, functions);
    w
}

pub fn exception(w: &mut World, n: u64, handle: &Bytes, text: &str) {
    w.req(
        n,
        Request::WorkException {
            handle: handle.clone(),
            data: b(text),
        },
    );
}

/// `key: value` lines of `show job H` (history lines kept in order).
pub fn show_job(w: &mut World, handle: &Bytes) -> Vec<(String, String)> {
    let text = w.probe(&format!("show job {}", String::from_utf8_lossy(handle)));
    assert!(text.ends_with(".\n"), "{text:?}");
    text.lines()
        .take_while(|l| *l != ".")
        .map(|l| {
            let (k, v) = l.split_once(": ").expect("key: value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

pub fn value(fields: &[(String, String)], key: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
}

pub fn history(fields: &[(String, String)]) -> Vec<String> {
    fields
        .iter()
        .filter(|(k, _)| k == "history")
        .map(|(_, v)| v.split(' ').nth(1).unwrap_or("").to_owned())
        .collect()
}
