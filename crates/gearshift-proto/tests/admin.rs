//! The admin text parser against gearmand 1.1's rules (`text.cc`, and the
//! behaviour verified on 1.1.20): case-insensitive command words, word
//! splitting on runs of spaces, each command's arity, the exact ERR strings,
//! the maxqueue forms and the five-word limit.

use bytes::{Bytes, BytesMut};
use gearshift_proto::admin::{
    split_words, unknown_command, ERR_DROP_BUSY, ERR_FUNCTION_NOT_FOUND, ERR_UNKNOWN_ERROR,
    ERR_UNKNOWN_JOB, ERR_UNKNOWN_SHOW_ARGUMENTS, LIST_END, MAX_WORDS, OK_CRLF,
};
use gearshift_proto::{decode_frame, parse_admin, AdminCommand, Frame};
use proptest::prelude::*;

fn reply(bytes: &'static [u8]) -> AdminCommand {
    AdminCommand::Reply(Bytes::from_static(bytes))
}

fn unknown(word: &str) -> AdminCommand {
    reply_owned(format!(
        "ERR UNKNOWN_COMMAND Unknown+server+command{word}\r\n"
    ))
}

fn invalid_args(word: &str) -> AdminCommand {
    reply_owned(format!(
        "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+{word}\r\n"
    ))
}

fn reply_owned(s: String) -> AdminCommand {
    AdminCommand::Reply(Bytes::from(s))
}

fn maxqueue(function: &'static str, limits: [i64; 3]) -> AdminCommand {
    AdminCommand::MaxQueue {
        function: Bytes::from_static(function.as_bytes()),
        limits,
    }
}

fn p(line: &str) -> AdminCommand {
    parse_admin(line.as_bytes())
}

// ---- Reply constants ----

#[test]
fn exact_reply_strings() {
    assert_eq!(OK_CRLF, b"OK\r\n");
    assert_eq!(LIST_END, b".\n");
    assert_eq!(
        ERR_UNKNOWN_SHOW_ARGUMENTS,
        b"ERR UNKNOWN_SHOW_ARGUMENTS\r\n"
    );
    assert_eq!(ERR_UNKNOWN_JOB, b"ERR UNKNOWN_JOB\r\n");
    assert_eq!(ERR_UNKNOWN_ERROR, b"ERR UNKNOWN_ERROR\r\n");
    assert_eq!(
        ERR_DROP_BUSY,
        b"ERR there are still connected workers or executing clients\r\n"
    );
    assert_eq!(ERR_FUNCTION_NOT_FOUND, b"ERR function not found\r\n");
    // No separator between "command" and the command word.
    assert_eq!(
        &unknown_command(b"bogus")[..],
        b"ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n"
    );
    assert_eq!(MAX_WORDS, 5);
}

// ---- Case-insensitivity ----

#[test]
fn command_words_are_case_insensitive() {
    for line in ["status", "STATUS", "Status", "sTaTuS"] {
        assert_eq!(p(line), AdminCommand::Status, "{line}");
    }
    assert_eq!(p("WORKERS"), AdminCommand::Workers);
    assert_eq!(p("PriorityStatus"), AdminCommand::PriorityStatus);
    assert_eq!(p("SHOW JOBS"), AdminCommand::ShowJobs);
    assert_eq!(p("Show Unique Jobs"), AdminCommand::ShowUniqueJobs);
    assert_eq!(
        p("CANCEL JOB H:x:1"),
        AdminCommand::CancelJob("H:x:1".into())
    );
    assert_eq!(
        p("Create Function f"),
        AdminCommand::CreateFunction("f".into())
    );
    assert_eq!(p("DROP FUNCTION f"), AdminCommand::DropFunction("f".into()));
    assert_eq!(p("MaxQueue f 3"), maxqueue("f", [3, 3, 3]));
    assert_eq!(p("GETPID"), AdminCommand::GetPid);
    assert_eq!(p("Verbose"), AdminCommand::Verbose);
    assert_eq!(p("VERSION"), AdminCommand::Version);
}

/// Arguments keep their case: function names and handles are case-sensitive data.
#[test]
fn arguments_keep_their_case() {
    assert_eq!(
        p("create function MyFunc"),
        AdminCommand::CreateFunction("MyFunc".into())
    );
    assert_eq!(
        p("drop function MyFunc"),
        AdminCommand::DropFunction("MyFunc".into())
    );
    assert_eq!(
        p("cancel job H:Lap:1"),
        AdminCommand::CancelJob("H:Lap:1".into())
    );
    assert_eq!(p("maxqueue MyFunc 1"), maxqueue("MyFunc", [1, 1, 1]));
}

// ---- Word splitting ----

#[test]
fn runs_of_spaces_collapse() {
    assert_eq!(split_words(b"show    jobs"), vec![&b"show"[..], b"jobs"]);
    assert_eq!(p("show    jobs"), AdminCommand::ShowJobs);
    assert_eq!(p("show  unique   jobs"), AdminCommand::ShowUniqueJobs);
    assert_eq!(
        p("cancel   job   H:x:1"),
        AdminCommand::CancelJob("H:x:1".into())
    );
    assert_eq!(p("maxqueue  f  1  2  3"), maxqueue("f", [1, 2, 3]));
}

#[test]
fn leading_spaces_give_an_empty_first_word() {
    assert_eq!(split_words(b" status"), vec![&b""[..], b"status"]);
    assert_eq!(split_words(b"   status"), vec![&b""[..], b"status"]);
    assert_eq!(p(" status"), unknown(""));
    assert_eq!(p("   version"), unknown(""));
}

#[test]
fn trailing_spaces_give_one_empty_last_word() {
    assert_eq!(split_words(b"show jobs "), vec![&b"show"[..], b"jobs", b""]);
    assert_eq!(
        split_words(b"show jobs    "),
        vec![&b"show"[..], b"jobs", b""]
    );
    // Verified on gearmand: the empty word makes `show jobs ` an unknown show.
    assert_eq!(p("show jobs "), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show "), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("create function f "), invalid_args("create"));
    assert_eq!(p("cancel job H:x:1 "), reply(ERR_UNKNOWN_ERROR));
    // Commands that ignore their arguments don't mind.
    assert_eq!(p("status "), AdminCommand::Status);
    assert_eq!(p("version   "), AdminCommand::Version);
}

#[test]
fn tabs_are_ordinary_characters() {
    assert_eq!(split_words(b"show\tjobs"), vec![&b"show\tjobs"[..]]);
    assert_eq!(p("show\tjobs"), unknown("show\tjobs"));
    assert_eq!(p("status\t"), unknown("status\t"));
}

#[test]
fn empty_and_blank_lines() {
    assert!(split_words(b"").is_empty());
    assert_eq!(split_words(b"   "), vec![&b""[..], b""]);
    // gearmand 1.1.20 (differential suite): a bare line is one empty word, echoed as nothing.
    assert_eq!(p(""), unknown(""));
    assert_eq!(p("   "), unknown(""));
}

// ---- Each command ----

#[test]
fn argumentless_commands_ignore_extra_words() {
    assert_eq!(p("status"), AdminCommand::Status);
    assert_eq!(p("status extra words"), AdminCommand::Status);
    assert_eq!(p("workers"), AdminCommand::Workers);
    assert_eq!(p("workers x"), AdminCommand::Workers);
    assert_eq!(p("prioritystatus"), AdminCommand::PriorityStatus);
    assert_eq!(p("getpid"), AdminCommand::GetPid);
    assert_eq!(p("verbose 9"), AdminCommand::Verbose);
    assert_eq!(p("version now"), AdminCommand::Version);
}

#[test]
fn show() {
    assert_eq!(p("show jobs"), AdminCommand::ShowJobs);
    assert_eq!(p("show unique jobs"), AdminCommand::ShowUniqueJobs);
    // Gearshift's own words (gearmand answers them with the error below).
    assert_eq!(p("show workers"), AdminCommand::ShowWorkers);
    assert_eq!(p("show stuff"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show workers now"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show unique"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show jobs unique"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show unique jobs now"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    assert_eq!(p("show jobs x"), reply(ERR_UNKNOWN_SHOW_ARGUMENTS));
    // A bare `show` is an unknown command.
    assert_eq!(p("show"), unknown("show"));
    assert_eq!(p("SHOW"), unknown("SHOW"));
}

#[test]
fn cancel() {
    assert_eq!(
        p("cancel job H:lap:1"),
        AdminCommand::CancelJob("H:lap:1".into())
    );
    // Under three words: unknown command.
    assert_eq!(p("cancel"), unknown("cancel"));
    assert_eq!(p("cancel job"), unknown("cancel"));
    // Three or more words of another shape: UNKNOWN_ERROR.
    assert_eq!(p("cancel foo H:lap:1"), reply(ERR_UNKNOWN_ERROR));
    assert_eq!(p("cancel job H:lap:1 extra"), reply(ERR_UNKNOWN_ERROR));
    assert_eq!(p("cancel jobs H:lap:1"), reply(ERR_UNKNOWN_ERROR));
}

#[test]
fn create_function() {
    assert_eq!(
        p("create function reverse"),
        AdminCommand::CreateFunction("reverse".into())
    );
    assert_eq!(p("create"), invalid_args("create"));
    assert_eq!(p("create function"), invalid_args("create"));
    assert_eq!(p("create func reverse"), invalid_args("create"));
    assert_eq!(p("create function a b"), invalid_args("create"));
    // The error names the command word as it was typed.
    assert_eq!(p("CREATE function"), invalid_args("CREATE"));
}

#[test]
fn drop_function() {
    assert_eq!(
        p("drop function reverse"),
        AdminCommand::DropFunction("reverse".into())
    );
    assert_eq!(p("drop"), invalid_args("drop"));
    assert_eq!(p("drop function"), invalid_args("drop"));
    assert_eq!(p("drop functions reverse"), invalid_args("drop"));
    assert_eq!(p("drop function a b"), invalid_args("drop"));
}

#[test]
fn maxqueue_forms() {
    // A bare `maxqueue` is an argument error.
    assert_eq!(p("maxqueue"), invalid_args("maxqueue"));
    // No size: unlimited everywhere.
    assert_eq!(p("maxqueue f"), maxqueue("f", [0, 0, 0]));
    // One size applies to every priority.
    assert_eq!(p("maxqueue f 10"), maxqueue("f", [10, 10, 10]));
    // Three sizes: high, normal, low.
    assert_eq!(p("maxqueue f 1 2 3"), maxqueue("f", [1, 2, 3]));
    // Two sizes: the third keeps the default (unlimited).
    assert_eq!(p("maxqueue f 1 2"), maxqueue("f", [1, 2, 0]));
    // Zero or negative means unlimited (stored as 0).
    assert_eq!(p("maxqueue f 0"), maxqueue("f", [0, 0, 0]));
    assert_eq!(p("maxqueue f -5"), maxqueue("f", [0, 0, 0]));
    assert_eq!(p("maxqueue f 4 -1 6"), maxqueue("f", [4, 0, 6]));
    // Sizes are read like atoi.
    assert_eq!(p("maxqueue f abc"), maxqueue("f", [0, 0, 0]));
    assert_eq!(p("maxqueue f 12abc"), maxqueue("f", [12, 12, 12]));
    assert_eq!(p("maxqueue f +7"), maxqueue("f", [7, 7, 7]));
    // Four sizes make six words: over the limit.
    assert_eq!(p("maxqueue f 1 2 3 4"), AdminCommand::TooManyWords);
    // A trailing space adds an empty word, read as 0.
    assert_eq!(p("maxqueue f 5 "), maxqueue("f", [5, 0, 0]));
}

/// `shutdown` is a Gearshift extension: gearmand 1.1.15+ answers it with
/// UNKNOWN_COMMAND, Gearshift keeps it (the server restricts it to loopback).
#[test]
fn shutdown() {
    assert_eq!(p("shutdown"), AdminCommand::Shutdown { graceful: false });
    assert_eq!(
        p("SHUTDOWN GRACEFUL"),
        AdminCommand::Shutdown { graceful: true }
    );
    assert_eq!(
        p("shutdown graceful"),
        AdminCommand::Shutdown { graceful: true }
    );
    assert_eq!(p("shutdown now"), invalid_args("shutdown"));
    assert_eq!(p("shutdown graceful now"), invalid_args("shutdown"));
}

#[test]
fn unknown_commands() {
    assert_eq!(p("bogus"), unknown("bogus"));
    assert_eq!(p("Bogus arg"), unknown("Bogus"));
    // Commands of the Perl server and of newer gearmands don't exist here.
    assert_eq!(p("jobs"), unknown("jobs"));
    assert_eq!(p("clients"), unknown("clients"));
    assert_eq!(p("gladiator"), unknown("gladiator"));
    assert_eq!(p("statuses"), unknown("statuses"));
    assert_eq!(p("stat"), unknown("stat"));
}

// ---- Word limit ----

#[test]
fn more_than_five_words_close_the_connection() {
    assert_eq!(p("status a b c d"), AdminCommand::Status);
    assert_eq!(p("cancel job a b c"), reply(ERR_UNKNOWN_ERROR));
    assert_eq!(p("status a b c d e"), AdminCommand::TooManyWords);
    assert_eq!(p("a b c d e f g h"), AdminCommand::TooManyWords);
    assert_eq!(p("bogus a b c d e"), AdminCommand::TooManyWords);
    // Empty leading/trailing words count.
    assert_eq!(p(" status a b c"), unknown(""));
    assert_eq!(p(" status a b c d"), AdminCommand::TooManyWords);
    assert_eq!(p("status a b c d "), AdminCommand::TooManyWords);
    // Runs of spaces don't.
    assert_eq!(p("status    a    b    c    d"), AdminCommand::Status);
}

// ---- Through the framer ----

#[test]
fn pipelined_lines_through_the_decoder() {
    let mut buf = BytesMut::from(&b"STATUS\r\nshow jobs\nversion\r\r\nmaxqueue f 1 2 3\r\n"[..]);
    let mut got = Vec::new();
    while let Some(frame) = decode_frame(&mut buf, 1024).expect("valid lines") {
        let Frame::Text(line) = frame else {
            panic!("binary frame")
        };
        got.push(parse_admin(&line));
    }
    assert!(buf.is_empty());
    assert_eq!(
        got,
        vec![
            AdminCommand::Status,
            AdminCommand::ShowJobs,
            // Only one '\r' is stripped: the command word is "version\r".
            unknown("version\r"),
            maxqueue("f", [1, 2, 3]),
        ]
    );
}

// ---- Properties ----

/// Flips the case of ASCII letters where `mask` says so.
fn recase(s: &str, mask: &[bool]) -> String {
    s.chars()
        .zip(mask.iter().cycle())
        .map(|(c, &up)| {
            if up {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn collapse_spaces(line: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    for &b in line {
        if !(b == b' ' && out.last() == Some(&b' ')) {
            out.push(b);
        }
    }
    out
}

proptest! {
    /// Any casing of a command's keywords parses the same.
    #[test]
    fn any_casing_parses_the_same(mask in proptest::collection::vec(any::<bool>(), 1..32)) {
        for (keywords, arg) in [
            ("status", ""),
            ("workers", ""),
            ("prioritystatus", ""),
            ("show jobs", ""),
            ("show unique jobs", ""),
            ("cancel job", " H:x:1"),
            ("create function", " Fn"),
            ("drop function", " Fn"),
            ("maxqueue", " Fn 1 2 3"),
            ("getpid", ""),
            ("verbose", ""),
            ("version", ""),
            ("shutdown graceful", ""),
        ] {
            let plain = format!("{keywords}{arg}");
            let cased = format!("{}{arg}", recase(keywords, &mask));
            prop_assert_eq!(p(&cased), p(&plain), "{}", cased);
        }
    }

    /// Joining the words with one space gives the line with space runs
    /// collapsed; no word holds a space; only the first and last may be empty.
    #[test]
    fn splitting_is_consistent(line in "[a-c \t]{0,24}") {
        let words = split_words(line.as_bytes());
        prop_assert_eq!(words.join(&b' '), collapse_spaces(line.as_bytes()));
        for (i, w) in words.iter().enumerate() {
            prop_assert!(!w.contains(&b' '));
            if i != 0 && i + 1 != words.len() {
                prop_assert!(!w.is_empty(), "empty middle word in {:?}", line);
            }
        }
    }

    /// The parser never panics, and its verdict on the word count is right.
    #[test]
    fn parse_never_panics(line in proptest::collection::vec(any::<u8>(), 0..64)) {
        let words = split_words(&line).len();
        let cmd = parse_admin(&line);
        prop_assert_eq!(cmd == AdminCommand::TooManyWords, words > MAX_WORDS);
    }
}
