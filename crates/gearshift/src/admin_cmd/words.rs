//! What the admin text protocol can carry: one line, split into words at
//! spaces, so a function name or handle holding a space or a line break
//! would reach the server as other words (or other lines). Such a name is
//! refused before anything is sent, naming the HTTP API route that does the
//! same (docs/http.md), since the server must answer gearmand's lines as
//! gearmand does. Other control bytes (a Perl prefix's TAB) travel as they
//! are, and the server takes them as gearmand does.

use super::AdminCommand;

/// One argument of a command: what it is, its value, and the HTTP request
/// that does the command's work with it.
struct Arg<'a> {
    what: &'static str,
    value: &'a str,
    route: String,
}

/// The refusal for a command whose name or handle the text protocol cannot
/// carry, or `None` when every argument is one plain word.
pub(super) fn refusal(command: &AdminCommand) -> Option<String> {
    args(command).into_iter().find_map(|a| {
        let why = if a.value.contains(' ') {
            "holds a space"
        } else if a.value.contains(['\n', '\r']) {
            "holds a line break"
        } else {
            return None;
        };
        Some(format!(
            "the {} {:?} {why}, which the admin text protocol cannot carry (it splits a \
             line into words at spaces); the HTTP API does the same: {}",
            a.what, a.value, a.route
        ))
    })
}

fn args(command: &AdminCommand) -> Vec<Arg<'_>> {
    fn function(value: &str, route: String) -> Arg<'_> {
        Arg {
            what: "function name",
            value,
            route,
        }
    }
    fn handle(value: &str, route: String) -> Arg<'_> {
        Arg {
            what: "handle",
            value,
            route,
        }
    }
    let f = |name: &str, rest: &str| format!("/api/v1/functions/{}{rest}", segment(name));
    match command {
        AdminCommand::Cancel { handle: h } => vec![handle(
            h,
            format!("POST /api/v1/jobs/{}/cancel", segment(h)),
        )],
        AdminCommand::Job { handle: h } => {
            vec![handle(h, format!("GET /api/v1/jobs/{}", segment(h)))]
        }
        AdminCommand::DropSchedule { handle: h } => vec![handle(
            h,
            format!("DELETE /api/v1/schedules/{}", segment(h)),
        )],
        AdminCommand::CreateFunction { function: n } => {
            vec![function(n, format!("POST {}", f(n, "")))]
        }
        AdminCommand::DropFunction { function: n } => {
            vec![function(n, format!("DELETE {}", f(n, "")))]
        }
        AdminCommand::Pause { function: n } => {
            vec![function(n, format!("POST {}", f(n, "/pause")))]
        }
        AdminCommand::Resume { function: n } => {
            vec![function(n, format!("POST {}", f(n, "/resume")))]
        }
        AdminCommand::Maxqueue {
            function: n,
            limits,
        } => {
            let body = match limits[..] {
                [h, m, l] => format!(r#"{{"high": {h}, "normal": {m}, "low": {l}}}"#),
                [n, ..] => format!(r#"{{"limit": {n}}}"#),
                [] => r#"{"limit": N}"#.to_owned(),
            };
            vec![function(
                n,
                format!("POST {} with {body}", f(n, "/maxqueue")),
            )]
        }
        AdminCommand::Dead { function: Some(n) } => vec![function(
            n,
            format!("GET /api/v1/dead?function={}", segment(n)),
        )],
        AdminCommand::RetryDead {
            target,
            function: n,
        } => dead_args(target, n.as_deref(), "POST", "/retry"),
        AdminCommand::DropDead {
            target,
            function: n,
        } => dead_args(target, n.as_deref(), "DELETE", ""),
        _ => Vec::new(),
    }
}

/// `retry-dead` / `drop-dead H|all [F]`.
fn dead_args<'a>(
    target: &'a str,
    function: Option<&'a str>,
    method: &str,
    verb: &str,
) -> Vec<Arg<'a>> {
    let mut out = Vec::new();
    if target != "all" {
        out.push(Arg {
            what: "handle",
            value: target,
            route: format!("{method} /api/v1/dead/{}{verb}", segment(target)),
        });
    }
    if let Some(f) = function {
        let route = if verb.is_empty() {
            format!("{method} /api/v1/dead?function={}", segment(f))
        } else {
            format!(
                "{method} /api/v1/dead{verb} with {{\"function\": {}}}",
                serde_json::Value::from(f)
            )
        };
        out.push(Arg {
            what: "function name",
            value: f,
            route,
        });
    }
    out
}

/// `s` as one URL path segment or query value: bytes outside the
/// unreserved set (and `:`, `@`, which handles use) as `%XX`.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_names_the_http_route() {
        let pause = AdminCommand::Pause {
            function: "my func".into(),
        };
        let why = refusal(&pause).expect("refused");
        assert!(
            why.contains("POST /api/v1/functions/my%20func/pause"),
            "{why}"
        );
        assert!(why.contains("holds a space"), "{why}");
        let q = AdminCommand::Maxqueue {
            function: "a b".into(),
            limits: vec![10],
        };
        let why = refusal(&q).expect("refused");
        assert!(
            why.contains(r#"POST /api/v1/functions/a%20b/maxqueue with {"limit": 10}"#),
            "{why}"
        );
        let nl = AdminCommand::DropFunction {
            function: "x\ny".into(),
        };
        let why = refusal(&nl).expect("refused");
        assert!(why.contains("line break"), "{why}");
        assert!(why.contains("DELETE /api/v1/functions/x%0Ay"), "{why}");
        // A TAB (Perl's prefix) is one word to the text protocol.
        let tab = AdminCommand::Pause {
            function: "p\tf".into(),
        };
        assert_eq!(refusal(&tab), None);
    }

    #[test]
    fn plain_words_pass() {
        for c in [
            AdminCommand::Pause {
                function: "resize_v2".into(),
            },
            AdminCommand::RetryDead {
                target: "all".into(),
                function: Some("f".into()),
            },
            AdminCommand::Job {
                handle: "H:host:17".into(),
            },
            AdminCommand::Status,
        ] {
            assert_eq!(refusal(&c), None, "{c:?}");
        }
        let dead = AdminCommand::DropDead {
            target: "all".into(),
            function: Some("my f".into()),
        };
        let why = refusal(&dead).expect("refused");
        assert!(why.contains("DELETE /api/v1/dead?function=my%20f"), "{why}");
        assert_eq!(segment("H:host:1"), "H:host:1");
        assert_eq!(segment("é/"), "%C3%A9%2F");
    }
}
