//! Any bytes as one admin text line: the parser never panics, splits words
//! the way gearmand does (joining them with single spaces gives the line
//! with its space runs collapsed), answers more than `MAX_WORDS` words with
//! `TooManyWords` and nothing else, reads command words case-insensitively,
//! and keeps every argument one word. The same bytes as a listing field:
//! escaping leaves no byte that could split a line or a column, and changes
//! nothing else.
#![no_main]

use std::mem::discriminant;

use gearshift_proto::admin::{split_words, DeadTarget, MAX_WORDS};
use gearshift_proto::escape::{has_control, is_control, push_field, Sep};
use gearshift_proto::{parse_admin, AdminCommand};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    check_words(line);
    check_parse(line);
    for sep in [Sep::Tab, Sep::Space, Sep::Line] {
        check_escape(line, sep);
    }
});

fn check_words(line: &[u8]) {
    let words = split_words(line);
    assert!(words.iter().all(|w| !w.contains(&b' ')), "{words:?}");
    // Only the first and the last word may be empty.
    if words.len() > 2 {
        assert!(words[1..words.len() - 1].iter().all(|w| !w.is_empty()));
    }
    let mut collapsed = Vec::with_capacity(line.len());
    for &b in line {
        if !(b == b' ' && collapsed.last() == Some(&b' ')) {
            collapsed.push(b);
        }
    }
    assert_eq!(words.join(&b' '), collapsed);
}

fn check_parse(line: &[u8]) {
    let cmd = parse_admin(line);
    let words = split_words(line);
    assert_eq!(
        matches!(cmd, AdminCommand::TooManyWords),
        words.len() > MAX_WORDS,
        "{cmd:?}"
    );
    // Every argument the parser keeps is one of the line's words.
    let word = |arg: &[u8]| {
        assert!(words.contains(&arg), "argument {arg:?} is not a word");
    };
    match &cmd {
        AdminCommand::CancelJob(a)
        | AdminCommand::CreateFunction(a)
        | AdminCommand::DropFunction(a)
        | AdminCommand::ShowJob(a)
        | AdminCommand::DropSchedule(a)
        | AdminCommand::Pause(a)
        | AdminCommand::Resume(a)
        | AdminCommand::ShowDead(Some(a)) => word(a),
        AdminCommand::RetryDead(target, function) | AdminCommand::DropDead(target, function) => {
            if let DeadTarget::Handle(h) = target {
                word(h);
            }
            if let Some(f) = function {
                word(f);
            }
        }
        AdminCommand::MaxQueue { function, limits } => {
            word(function);
            assert!(limits.iter().all(|&l| l >= 0), "{limits:?}");
        }
        AdminCommand::Reply(text) => {
            assert!(text.ends_with(b"\r\n"), "{text:?}");
            // The framer cuts lines at LF, so a real line has none to echo.
            if !line.contains(&b'\n') {
                assert!(!text[..text.len() - 2].contains(&b'\n'), "{text:?}");
            }
        }
        _ => {}
    }
    // Command words compare case-insensitively: the same command either way.
    let upper = parse_admin(&line.to_ascii_uppercase());
    let lower = parse_admin(&line.to_ascii_lowercase());
    assert_eq!(
        discriminant(&cmd),
        discriminant(&upper),
        "{cmd:?} / {upper:?}"
    );
    assert_eq!(
        discriminant(&cmd),
        discriminant(&lower),
        "{cmd:?} / {lower:?}"
    );
    if let (AdminCommand::MaxQueue { limits: a, .. }, AdminCommand::MaxQueue { limits: b, .. }) =
        (&cmd, &upper)
    {
        assert_eq!(a, b);
    }
}

fn check_escape(field: &[u8], sep: Sep) {
    let mut out = b"x".to_vec();
    push_field(&mut out, field, sep);
    let out = &out[1..];
    let escaped = |b: u8| is_control(b) || (sep == Sep::Space && b == b' ');
    assert!(!has_control(out), "{sep:?}: {out:?}");
    if sep == Sep::Space {
        assert!(!out.contains(&b' '));
    }
    if sep == Sep::Line {
        assert_ne!(out, b".");
        if field == b"." {
            assert_eq!(out, b"\\x2e");
            return;
        }
    }
    // Each escaped byte becomes four; the rest pass as they are, in order.
    let n = field.iter().filter(|&&b| escaped(b)).count();
    assert_eq!(out.len(), field.len() + 3 * n);
    let mut rest = out;
    for &b in field {
        if escaped(b) {
            let hex = format!("\\x{b:02x}");
            assert!(rest.starts_with(hex.as_bytes()), "{b:#x} in {out:?}");
            rest = &rest[4..];
        } else {
            assert_eq!(rest.first(), Some(&b));
            rest = &rest[1..];
        }
    }
    assert!(rest.is_empty());
}
