//! Whole-file tests: parsing, defaults and the errors' lines and messages.

use std::path::Path;
use std::sync::Arc;

use gearshift_core::policy::{
    Backoff, Policies, Policy, Reason, Reasons, Retention, Rule, TimeoutUnit,
};

use super::*;

/// The line, column and message of a refused text.
fn refused(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(PolicyFileError::Invalid {
            line,
            column,
            message,
            ..
        }) => (line, column, message),
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

fn only_policy(text: &str) -> Policy {
    let file = parse(text).expect("parses");
    assert_eq!(file.policies.rules.len(), 1);
    (*file.policies.rules[0].policy).clone()
}

const FULL: &str = r#"# a comment
[retention]
dead_ttl = "7d"
max_kept = 5000
max_dead = 200
max_kept_bytes = 1048576

[[function]]
match = "resize_*"
max_attempts = 5
retry_on = ["fail", "exception", "timeout", "worker_lost"]
backoff = "fixed"
initial_delay = "1500ms"
max_delay = "1h30m"
jitter = false
timeout = "30s"
keep_results = "24h"
require_worker = true
can_do_timeout_unit = "milliseconds"

[[function]]
match = "mail_?"
retry_on = ["worker_lost", "worker_lost"]
timeout = 90
can_do_timeout_unit = "seconds"

[[schedule]]
cron = "*/5 * * * *"
function = "resize_thumbs"
workload = "all"
unique = "thumbs"
priority = "high"
"#;

#[test]
fn full_example() {
    let file = parse(FULL).expect("parses");
    let resize = Policy {
        max_attempts: 5,
        retry_on: Reasons::ALL,
        backoff: Backoff::Fixed,
        initial_delay: 1_500,
        max_delay: 5_400_000,
        jitter: false,
        timeout: Some(30_000),
        keep_results: 86_400_000,
        require_worker: true,
        timeout_unit: TimeoutUnit::Milliseconds,
    };
    let mail = Policy {
        retry_on: Reasons::of(&[Reason::WorkerLost]),
        timeout: Some(90_000),
        timeout_unit: TimeoutUnit::Seconds,
        ..Policy::default()
    };
    let expected = PolicyFile {
        policies: Policies {
            rules: vec![
                Rule {
                    pattern: "resize_*".into(),
                    policy: Arc::new(resize),
                },
                Rule {
                    pattern: "mail_?".into(),
                    policy: Arc::new(mail),
                },
            ],
            retention: Retention {
                dead_ttl: 7 * 86_400_000,
                max_kept: 5000,
                max_dead: 200,
                max_kept_bytes: 1 << 20,
            },
        },
        schedules: vec![ScheduleDecl {
            cron: "*/5 * * * *".into(),
            function: "resize_thumbs".into(),
            workload: "all".into(),
            unique: Some("thumbs".into()),
            priority: "high".into(),
        }],
        access: None,
        gearmonkey: None,
        etcd: None,
    };
    assert_eq!(file, expected);
}

#[test]
fn the_etcd_table_is_checked() {
    let text = "[etcd]\nendpoints = [\"http://127.0.0.1:2379\", \"https://e2:2379\"]\nprefix = \"/q/\"\nharvest_after = 30\nlayout = \"split\"\n";
    let e = parse(text).expect("valid").etcd.expect("present");
    assert_eq!(e.endpoints, ["http://127.0.0.1:2379", "https://e2:2379"]);
    assert_eq!(
        (e.prefix.as_deref(), e.harvest_after),
        (Some("/q/"), Some(30))
    );
    assert_eq!(e.layout.as_deref(), Some("split"));
    assert_eq!(parse("").expect("empty").etcd, None);
    for (bad, line) in [
        ("[etcd]\nendpoints = [\"127.0.0.1:2379\"]\n", "line 2"),
        ("[etcd]\nlayout = \"three\"\n", "line 2"),
        ("[etcd]\n\nharvest_after = 0\n", "line 3"),
        ("[etcd]\nendpoint = \"http://x:1\"\n", "line 2"),
    ] {
        let e = parse(bad).expect_err(bad).to_string();
        assert!(e.contains(line), "{bad}: {e}");
    }
}

#[test]
fn gearmonkey_sections_fold_into_one() {
    let text = "[[gearmonkey]]\nmatch = \"resize_*\"\nurl = \"redis://127.0.0.1:6379/0\"\n\n[[gearmonkey]]\nmatch = \"mail_?\"\n";
    let g = parse(text).expect("valid").gearmonkey.expect("present");
    assert_eq!(g.matches, ["resize_*", "mail_?"]);
    assert_eq!(g.url.as_deref(), Some("redis://127.0.0.1:6379/0"));
    assert_eq!(parse("").expect("empty").gearmonkey, None);
    let two = "[[gearmonkey]]\nurl = \"redis://a:1\"\n[[gearmonkey]]\nurl = \"redis://b:1\"\n";
    let e = parse(two).expect_err("two Redis").to_string();
    assert!(e.contains("line 4") && e.contains("same Redis"), "{e}");
    let routed =
        parse("[[gearmonkey]]\nmatch = \"pdf_*\"\nroute = \"gearmonkey\"\n").expect("routed");
    assert_eq!(routed.gearmonkey.expect("present").routed, ["pdf_*"]);
    let e = parse("[[gearmonkey]]\nroute = \"redis\"\n")
        .expect_err("bad route")
        .to_string();
    assert!(e.contains("line 2") && e.contains("route"), "{e}");
    let e = parse("[[gearmonkey]]\nmatches = \"x\"\n")
        .expect_err("unknown key")
        .to_string();
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn the_access_section() {
    let text = "[access]\nsubmit = [\"10.0.0.0/8\", \"cert:CN=app\"]\nwork = [\"cert:*\"]\nadmin_read = [\"loopback\", \"*\"]\n";
    let access = parse(text)
        .expect("parses")
        .access
        .expect("an access section");
    use crate::access::Who;
    assert_eq!(
        access.submit,
        Some(vec![
            Who::Nets(crate::allow::AllowList::parse(["10.0.0.0/8"]).expect("net")),
            Who::Cert("CN=app".into())
        ])
    );
    assert_eq!(access.work, Some(vec![Who::AnyCert]));
    assert_eq!(access.admin_read, Some(vec![Who::Loopback, Who::Anyone]));
    assert_eq!(access.admin_change, None);
    let (line, column, message) = refused("[access]\nwork = [\"loopback\",\n  \"10.0.0.0/40\"]\n");
    assert_eq!((line, column), (3, 3), "{message}");
    assert!(message.contains("prefix"), "{message}");
    let (line, _, message) = refused("[access]\nread = []\n");
    assert_eq!(line, 2, "{message}");
    assert!(message.contains("unknown field"), "{message}");
}

#[test]
fn defaults() {
    assert_eq!(parse("").expect("empty parses"), PolicyFile::default());
    assert_eq!(
        parse("# nothing but a comment\n\n[retention]\n")
            .expect("parses")
            .policies
            .retention,
        Retention::default()
    );
    assert_eq!(
        only_policy("[[function]]\nmatch = \"*\"\n"),
        Policy::default()
    );
    let d = Policy::default();
    assert_eq!(d.max_attempts, 1);
    assert_eq!(
        d.retry_on,
        Reasons::of(&[Reason::Fail, Reason::Exception, Reason::Timeout])
    );
    assert_eq!((d.initial_delay, d.max_delay), (1_000, 600_000));
    assert_eq!(Retention::default().dead_ttl, 30 * 86_400_000);
    let s = parse("[[schedule]]\ncron = \"0 3 * * 7\"\nfunction = \"f\"\nworkload = \"\"\n")
        .expect("parses")
        .schedules;
    assert_eq!(
        s,
        vec![ScheduleDecl {
            cron: "0 3 * * 7".into(),
            function: "f".into(),
            workload: String::new(),
            unique: None,
            priority: "normal".into(),
        }]
    );
    // An empty retry_on retries nothing.
    let p = only_policy("[[function]]\nmatch = \"x\"\nretry_on = []\nmax_attempts = 3\n");
    assert_eq!(p.retry_on, Reasons::default());
}

#[test]
fn first_match_order_is_kept() {
    let text = "[[function]]\nmatch = \"img_fast*\"\nmax_attempts = 2\n\n\
                [[function]]\nmatch = \"img_*\"\nmax_attempts = 9\n\n\
                [[function]]\nmatch = \"*\"\nmax_attempts = 4\n";
    let p = parse(text).expect("parses").policies;
    let patterns: Vec<_> = p.rules.iter().map(|r| r.pattern.as_str()).collect();
    assert_eq!(patterns, ["img_fast*", "img_*", "*"]);
    let attempts = |name: &str| p.lookup(name.as_bytes()).map(|p| p.max_attempts);
    assert_eq!(attempts("img_fast_png"), Some(2));
    assert_eq!(attempts("img_png"), Some(9));
    assert_eq!(attempts("mail"), Some(4));
}

#[test]
fn perl_prefixed_names_may_be_matched_and_scheduled() {
    // Gearman::Client->new(prefix => "app") submits "app\tFUNC".
    let text = "[[function]]\nmatch = \"app\\t*\"\nmax_attempts = 3\n\n\
                [[schedule]]\ncron = \"* * * * *\"\nfunction = \"app\\tnightly\"\nworkload = \"\"\n";
    let file = parse(text).expect("parses");
    let attempts = |name: &[u8]| file.policies.lookup(name).map(|p| p.max_attempts);
    assert_eq!(attempts(b"app\tresize"), Some(3));
    assert_eq!(attempts(b"other\tresize"), None);
    assert_eq!(file.schedules[0].function, "app\tnightly");
    let (line, _, msg) =
        refused("[[schedule]]\ncron = \"* * * * *\"\nfunction = \"a\\rb\"\nworkload = \"\"\n");
    assert_eq!(line, 3);
    assert!(msg.contains("control character (byte 0x0d)"), "{msg}");
}

#[test]
fn bare_seconds_are_durations() {
    let p = only_policy("[[function]]\nmatch = \"x\"\ntimeout = 7\nkeep_results = \"7\"\n");
    assert_eq!((p.timeout, p.keep_results), (Some(7_000), 7_000));
}

#[test]
fn unknown_key_names_its_line() {
    let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\n\n\n\n\nmax_atempts = 3\n");
    assert_eq!((line, column), (7, 1));
    assert!(msg.contains("unknown field `max_atempts`"), "{msg}");
    assert!(msg.contains("max_attempts"), "{msg}");
    let (line, _, msg) = refused("[retention]\nmax_kept = 1\nkeep = 2\n");
    assert_eq!(line, 3);
    assert!(msg.contains("`keep`"), "{msg}");
    let (line, _, msg) = refused("\n[retension]\ndead_ttl = \"1d\"\n");
    assert_eq!(line, 2);
    assert!(msg.contains("`retension`"), "{msg}");
    let (line, _, msg) = refused(
        "[[schedule]]\ncron = \"* * * * *\"\nfunction = \"f\"\nworkload = \"\"\nprio = \"high\"\n",
    );
    assert_eq!(line, 5);
    assert!(msg.contains("`prio`"), "{msg}");
}

#[test]
fn the_full_message_reads_well() {
    let e = parse("[[function]]\nmatch = \"a\"\nmax_atempts = 3\n").expect_err("refused");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "policy file line 3, column 1: unknown field `max_atempts`, expected one of"
        ),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
}

#[test]
fn bad_duration_names_key_and_line() {
    let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\ninitial_delay = \"1x\"\n");
    assert_eq!((line, column), (3, 17));
    assert!(msg.contains("`initial_delay`"), "{msg}");
    assert!(msg.contains("unknown unit"), "{msg}");
    let (line, _, msg) = refused("[retention]\n\ndead_ttl = \"-3d\"\n");
    assert_eq!(line, 3);
    assert!(
        msg.contains("`dead_ttl`") && msg.contains("negative"),
        "{msg}"
    );
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\ntimeout = -4\n");
    assert_eq!(line, 3);
    assert!(
        msg.contains("`timeout`") && msg.contains("negative"),
        "{msg}"
    );
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\nkeep_results = 1.5\n");
    assert_eq!(line, 4);
    assert!(msg.contains("expected a duration"), "{msg}");
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\ntimeout = \"0s\"\n");
    assert_eq!(line, 3);
    assert!(msg.contains("`timeout` is 0"), "{msg}");
}

#[test]
fn bad_retry_word_names_its_line() {
    let (line, column, msg) =
        refused("[[function]]\nmatch = \"a\"\nretry_on = [\n  \"fail\",\n  \"worker_gone\",\n]\n");
    assert_eq!((line, column), (5, 3));
    assert!(
        msg.contains("\"worker_gone\"") && msg.contains("worker_lost"),
        "{msg}"
    );
}

#[test]
fn max_attempts_zero_names_its_line() {
    let (line, column, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = 0\n");
    assert_eq!((line, column), (3, 16));
    assert!(msg.contains("at least 1"), "{msg}");
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = \"5\"\n");
    assert_eq!(line, 3);
    assert!(msg.contains("expected a whole number"), "{msg}");
    let (line, _, _) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = 4294967296\n");
    assert_eq!(line, 3);
    let (line, _, msg) = refused("[retention]\nmax_dead = -1\n");
    assert_eq!(line, 2);
    assert!(msg.contains("`max_dead`"), "{msg}");
}

#[test]
fn max_delay_below_initial_delay() {
    let (line, _, msg) =
        refused("[[function]]\nmatch = \"a\"\ninitial_delay = \"2m\"\nmax_delay = \"1m\"\n");
    assert_eq!(line, 4);
    assert!(
        msg.contains("`max_delay` \"1m\" is less than `initial_delay` \"2m\""),
        "{msg}"
    );
    // Against the default max_delay: the line of initial_delay.
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\ninitial_delay = \"1h\"\n");
    assert_eq!(line, 4);
    assert!(msg.contains("\"10m\" (the default)"), "{msg}");
    // Equal is fine.
    let p = only_policy("[[function]]\nmatch = \"a\"\ninitial_delay = 5\nmax_delay = \"5s\"\n");
    assert_eq!((p.initial_delay, p.max_delay), (5_000, 5_000));
}

#[test]
fn bad_cron_names_line_and_field() {
    let text = "[[schedule]]\nfunction = \"f\"\nworkload = \"w\"\ncron = \"0 24 * * *\"\n";
    let (line, column, msg) = refused(text);
    assert_eq!((line, column), (4, 11));
    assert!(
        msg.contains("field 2 (hour)") && msg.contains("0-23"),
        "{msg}"
    );
    let (line, column, msg) =
        refused("[[schedule]]\ncron = \"* * *\"\nfunction = \"f\"\nworkload = \"w\"\n");
    assert_eq!((line, column), (2, 9));
    assert!(msg.contains("5"), "{msg}");
    // A string written with escapes: the value's start.
    let (line, column, _) =
        refused("[[schedule]]\ncron = \"\\u0030 * * * 9\"\nfunction = \"f\"\nworkload = \"w\"\n");
    assert_eq!((line, column), (2, 8));
}

#[test]
fn bad_schedule_fields() {
    let base = "[[schedule]]\ncron = \"* * * * *\"\n";
    let (line, _, msg) = refused(&format!("{base}function = \"f\"\n"));
    assert!(msg.contains("missing field `workload`"), "{msg}");
    assert_eq!(line, 1);
    let (line, _, msg) = refused(&format!(
        "{base}function = \"f\"\nworkload = \"\"\npriority = \"urgent\"\n"
    ));
    assert_eq!(line, 5);
    assert!(msg.contains("\"high\", \"normal\" or \"low\""), "{msg}");
    let (line, _, msg) = refused(&format!("{base}function = \"\"\nworkload = \"\"\n"));
    assert_eq!(line, 3);
    assert!(msg.contains("`function` is empty"), "{msg}");
    let long = "u".repeat(65);
    let (line, _, msg) = refused(&format!(
        "{base}function = \"f\"\nworkload = \"\"\nunique = \"{long}\"\n"
    ));
    assert_eq!(line, 5);
    assert!(msg.contains("65 bytes"), "{msg}");
}

#[test]
fn bad_match() {
    let (line, _, msg) = refused("[[function]]\nmax_attempts = 2\n");
    assert_eq!(line, 1);
    assert!(msg.contains("missing field `match`"), "{msg}");
    let (line, _, msg) = refused("[[function]]\nmatch = \"\"\n");
    assert_eq!(line, 2);
    assert!(msg.contains("empty"), "{msg}");
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\\nb\"\n");
    assert_eq!(line, 2);
    assert!(msg.contains("control character (byte 0x0a)"), "{msg}");
    let (line, _, msg) = refused(
        "[[function]]\nmatch = \"a*\"\n[[function]]\nmatch = \"b\"\n[[function]]\nmatch = \"a*\"\n",
    );
    assert_eq!(line, 6);
    assert!(msg.contains("line 2"), "{msg}");
    let (_, _, msg) = refused("[[function]]\nmatch = \"a\"\nbackoff = \"linear\"\n");
    assert!(msg.contains("\"exponential\" or \"fixed\""), "{msg}");
    let (_, _, msg) = refused("[[function]]\nmatch = \"a\"\ncan_do_timeout_unit = \"ms\"\n");
    assert!(
        msg.contains("\"auto\", \"seconds\" or \"milliseconds\""),
        "{msg}"
    );
}

#[test]
fn messages_speak_of_the_file() {
    let (line, _, msg) =
        refused("[[function]]\nmatch = \"a\"\n\n[schedule]\ncron = \"* * * * *\"\n");
    assert_eq!(line, 4);
    assert!(
        msg.contains("write `[[schedule]]`, not `[schedule]`"),
        "{msg}"
    );
    let (_, _, msg) = refused("[function]\nmatch = \"a\"\n");
    assert!(msg.contains("write `[[function]]`"), "{msg}");
    let (line, _, msg) = refused("\nfunction = [1]\n");
    assert_eq!(line, 2);
    assert!(!msg.contains("Raw"), "{msg}");
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\n\n[[function]]\ntimeout = 3\n");
    assert_eq!(line, 4);
    assert!(msg.contains("missing field `match`"), "{msg}");
}

#[test]
fn toml_syntax_error_names_its_line() {
    let (line, _, msg) = refused("[[function]]\nmatch = \"a\"\nmax_attempts = = 3\n");
    assert_eq!(line, 3);
    assert!(!msg.is_empty());
    let (line, _, _) = refused("[[function]]\nmatch = \"a\n");
    assert_eq!(line, 2);
    let (line, _, _) = refused("[retention]\nmax_kept = 1\n[retention]\n");
    assert_eq!(line, 3);
}

#[test]
fn columns_count_characters() {
    assert_eq!(line_column("", 0), (1, 1));
    assert_eq!(line_column("ab\ncd", 4), (2, 2));
    assert_eq!(line_column("é\nxé=", 6), (2, 3));
    assert_eq!(line_column("é\nxé=", 5), (2, 2));
    assert_eq!(line_column("é", 1), (1, 1));
    assert_eq!(line_column("a\r\nb", 3), (2, 1));
    assert_eq!(line_column("ab", 99), (1, 3));
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("policies.toml");
    let missing = load(&path).expect_err("missing file").to_string();
    assert!(
        missing.starts_with("cannot read policy file ") && missing.contains("policies.toml"),
        "{missing}"
    );
    std::fs::write(&path, "[[function]]\nmatch = \"a\"\njitter = 1\n").expect("write");
    let e = load(&path).expect_err("refused").to_string();
    let want = format!("policy file {} line 3, column 10: ", path.display());
    assert!(e.starts_with(&want), "{e}");
    std::fs::write(&path, FULL).expect("write");
    assert_eq!(load(&path).expect("loads"), parse(FULL).expect("parses"));
}

#[test]
fn unplaced_errors_read_well() {
    let e = PolicyFileError::Unplaced {
        path: None,
        message: "m".into(),
    };
    assert_eq!(e.to_string(), "policy file: m");
    let e = e.in_path(Path::new("/etc/g.toml"));
    assert_eq!(e.to_string(), "policy file /etc/g.toml: m");
}

#[test]
fn shipped_example_parses() {
    let file = parse(include_str!("../../../../docs/gearshift.example.toml"))
        .expect("docs/gearshift.example.toml parses");
    assert_eq!(file.policies.rules.len(), 2);
    assert_eq!(file.schedules.len(), 1);
    assert_eq!(file.gearmonkey, None, "the bridge is off until uncommented");
    assert_eq!(file.etcd, None, "so is the etcd bridge");
}

#[test]
fn shipped_example_etcd_table_parses_uncommented() {
    let example = include_str!("../../../../docs/gearshift.example.toml");
    let start = example.find("# [etcd]").expect("the example has one");
    let section: String = example[start..]
        .lines()
        .take_while(|l| l.starts_with("# "))
        .map(|l| format!("{}\n", &l[2..]))
        .collect();
    let e = parse(&section).expect("the table parses").etcd;
    let e = e.expect("an [etcd] table");
    assert_eq!(e.endpoints, ["http://127.0.0.1:2379"]);
    assert_eq!(
        (e.harvest_after, e.layout.as_deref()),
        (Some(60), Some("single"))
    );
}

#[test]
fn shipped_example_gearmonkey_section_parses_uncommented() {
    let example = include_str!("../../../../docs/gearshift.example.toml");
    let start = example
        .find("# [[gearmonkey]]")
        .expect("the example has one");
    let section: String = example[start..]
        .lines()
        .take_while(|l| l.starts_with("# "))
        .map(|l| format!("{}\n", &l[2..]))
        .collect();
    let g = parse(&section).expect("the section parses").gearmonkey;
    let g = g.expect("a [[gearmonkey]] section");
    assert_eq!(g.url.as_deref(), Some("redis://127.0.0.1:6379/0"));
    assert_eq!(g.matches, vec!["resize_*".to_owned()]);
    assert!(g.routed.is_empty(), "route = auto routes nothing by force");
}
