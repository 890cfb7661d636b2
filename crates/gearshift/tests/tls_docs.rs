//! docs/tls.md as an operator uses it: every `gearshift` example uses flags
//! its subcommand's `--help` lists (and never `-h`, which is `--help`), and
//! the certificate recipe, run as written with openssl, gives a server and
//! clients that work together with client certificates.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Proc, Server, BIN, WAIT};

/// docs/tls.md.
fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tls.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The ```sh blocks of a Markdown text.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// A block's commands, continuation lines joined, comments dropped.
fn commands(block: &str) -> Vec<String> {
    let joined = block.replace("\\\n", " ");
    joined
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim().to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Whether `help` lists `flag` as a whole word.
fn lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let after = help[at + flag.len()..].chars().next();
        let before = help[..at].chars().next_back();
        matches!(after, None | Some(' ' | ',' | '\n' | '=' | '<'))
            && matches!(before, None | Some(' ' | '\n' | ','))
    })
}

#[test]
fn every_example_uses_flags_its_command_has() {
    let mut checked = 0;
    for cmd in sh_blocks(&doc()).iter().flat_map(|b| commands(b)) {
        // Leading VAR=value assignments.
        let words: Vec<&str> = cmd
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        if words.first() != Some(&"gearshift") {
            continue;
        }
        let sub = words[1];
        let help = Command::new(BIN)
            .args([sub, "--help"])
            .output()
            .expect("run --help");
        assert!(help.status.success(), "{sub} --help: {help:?}");
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        for word in words[2..].iter().take_while(|w| **w != "--") {
            if !word.starts_with('-') {
                continue;
            }
            let flag = word.split('=').next().unwrap_or_default();
            assert!(
                flag != "-h" && flag != "--help",
                "{cmd}: -h is --help, not a host (use -s/--server)"
            );
            assert!(lists(&help, flag), "{cmd}: `gearshift {sub}` has no {flag}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} flags found in docs/tls.md");
}

#[test]
fn the_certificate_recipe_works() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let recipe = sh_blocks(&doc())
        .into_iter()
        .find(|b| b.contains("openssl req -x509"))
        .expect("docs/tls.md has the openssl recipe");
    let dir = tempfile::tempdir().expect("tempdir");
    let made = Command::new("sh")
        .args(["-ec", &recipe])
        .current_dir(dir.path())
        .output()
        .expect("run sh");
    assert!(made.status.success(), "the recipe failed: {made:?}");
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (ca, cert, key) = (file("ca.pem"), file("worker.pem"), file("worker.key"));
    let s = Server::gearshift_with(&[
        "--store",
        "memory",
        "--ssl",
        "--ssl-certificate",
        &file("server.pem"),
        "--ssl-key",
        &file("server.key"),
        "--ssl-ca-file",
        &ca,
        "--ssl-verify-client",
    ]);
    let client = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let run = |args: &[&str]| {
        let mut c = s.cmd(args);
        c.env_remove("GEARMAND_CA_CERTIFICATE")
            .env_remove("GEARMAN_CLIENT_PEM")
            .env_remove("GEARMAN_CLIENT_KEY");
        Proc {
            child: c.spawn().expect("spawn"),
        }
        .finish(WAIT)
    };
    // By the address and by a DNS name of the subjectAltName.
    for server in [s.addr.clone(), format!("localhost:{}", s.port)] {
        let mut args = vec!["admin", "version", "-s", &server];
        args.extend_from_slice(&client);
        let out = run(&args);
        assert_eq!(out.code(), 0, "{server}: {out:?}");
    }
    // A worker with the client certificate is named by its subject.
    let mut args = vec!["work", "-f", "certified"];
    args.extend_from_slice(&client);
    let mut w = s.cmd(&args);
    w.stdout(Stdio::null()).stderr(Stdio::null());
    let _w = Proc {
        child: w.spawn().expect("spawn worker"),
    };
    let mut args = vec!["admin", "workers"];
    args.extend_from_slice(&client);
    common::eventually("the worker named by its certificate", || {
        let out = run(&args);
        out.stdout.contains("O=Acme,CN=worker-1") && out.stdout.contains("certified")
    });
    // The server verifies clients: no certificate, no service.
    let out = run(&["admin", "version", "--tls-ca", &ca]);
    assert_eq!(out.code(), 2, "{out:?}");
}
