//! `gearshift completions` and `gearshift man` come from the same clap
//! definitions as the flags: they name every subcommand and recent flags.

mod common;

use std::process::Command;

use common::BIN;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run gearshift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn completions_cover_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, script) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        for word in ["serve", "import", "node-timeout", "log-format"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let (code, _) = run(&["completions", "tcsh"]);
    assert_ne!(code, 0, "an unknown shell is refused");
}

#[test]
fn man_pages_are_written_one_per_subcommand() {
    let (code, page) = run(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH gearshift 1"), "{page}");
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _) = run(&["man", "--out", &dir.path().display().to_string()]);
    assert_eq!(code, 0);
    let serve = std::fs::read_to_string(dir.path().join("gearshift-serve.1")).expect("serve page");
    assert!(
        serve.contains("node\\-timeout"),
        "the serve page names its flags"
    );
    for page in ["gearshift-import.1", "gearshift-check.1", "gearshift-pin.1"] {
        assert!(dir.path().join(page).exists(), "{page}");
    }
}
