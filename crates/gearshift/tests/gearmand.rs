//! `gearshift submit`, `work` and `admin` against a real gearmand 1.1
//! (`/usr/sbin/gearmand`, from gearman-job-server).

mod common;

use common::Server;

#[test]
fn foreground_job_and_status_on_gearmand() {
    let s = Server::gearmand();
    let _w = s.worker("upper", &["--", "tr", "a-z", "A-Z"]);
    // After the first job gearmand refuses the worker's `stats` option
    // (docs/compat.md); the jobs after it run as before.
    for n in 1..=3 {
        let out = s.run(
            &["submit", "-f", "upper", &format!("hello gearmand {n}")],
            b"",
        );
        assert_eq!(
            (out.code(), out.stdout.as_str()),
            (0, format!("HELLO GEARMAND {n}").as_str()),
            "{out:?}"
        );
    }

    let row = s.status_of("upper").expect("upper in status");
    assert_eq!(row["workers"], 1);
    assert_eq!(row["total"], 0);
    assert_eq!(row["server"], s.addr.as_str());

    // gearmand 1.1 has no `shutdown`: an ERR reply, so a non-zero exit.
    let out = s.run(&["admin", "shutdown"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
}
