//! Who may change the server over the admin protocol (loopback, or an
//! `--admin-allow` network, which the server marks on the connection) and
//! the cap on the job data the server holds (`--max-queue-memory`).

mod common;

use bytes::Bytes;
use common::{err, job_with, World};
use gearshift_core::{ConnId, ConnInfo, CoreConfig, Rights};
use gearshift_proto::{Priority, Request};

#[test]
fn shutdown_only_from_loopback() {
    let mut w = World::new();
    w.conn_from(1, "10.1.2.3", false);
    assert_eq!(
        w.admin(1, "shutdown"),
        "ERR PERMISSION_DENIED shutdown+is+only+accepted+from+loopback+or+--admin-allow\r\n"
    );
    assert!(w.shutdowns.is_empty());
    w.conn(2);
    assert_eq!(w.admin(2, "shutdown"), "OK\r\n");
    assert_eq!(w.shutdowns, [false]);
    assert_eq!(w.admin(2, "shutdown graceful"), "OK\r\n");
    assert_eq!(w.shutdowns, [false, true]);
}

#[test]
fn changes_only_from_loopback_or_allowed_peers() {
    let mut w = World::new();
    w.conn_from(1, "10.1.2.3", false);
    w.conn(2);
    let h = w.bg(2, "f", "", "x");
    let denied =
        "ERR PERMISSION_DENIED changes+are+only+accepted+from+loopback+or+--admin-allow\r\n";
    for cmd in [
        format!("cancel job {}", String::from_utf8_lossy(&h)),
        "drop function f".to_owned(),
        "maxqueue f 1".to_owned(),
        "pause f".to_owned(),
        "resume f".to_owned(),
        "retry dead all".to_owned(),
        "drop dead all".to_owned(),
    ] {
        assert_eq!(w.admin(1, &cmd), denied, "{cmd}");
    }
    // Nothing changed; reads are open to everyone.
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    assert!(w.admin(1, "status").starts_with("f\t1\t0\t0\n"));
    // A peer of an --admin-allow network (the server sets `admin`).
    let info = ConnInfo {
        fd: 3,
        ip: "10.1.2.4".to_owned(),
        port: 0,
        loopback: false,
        rights: Rights::ALL,
        node: None,
        identity: None,
    };
    w.core.connect(ConnId(3), info);
    assert_eq!(
        w.admin(3, &format!("cancel job {}", String::from_utf8_lossy(&h))),
        "OK\r\n"
    );
    assert_eq!(w.status_of("f"), Some((0, 0, 0)));
}

#[test]
fn the_queue_memory_cap_refuses_new_jobs_until_data_is_freed() {
    let mut w = World::with(CoreConfig {
        max_job_bytes: 25,
        ..CoreConfig::default()
    });
    w.conns(&[1, 2]);
    // 1 + 10 bytes, then 10: 21 held; 10 more would pass 25.
    let h = w.bg(1, "f", "k", "0123456789");
    w.bg(1, "g", "", "0123456789");
    w.req(
        1,
        Request::submit(Box::new(job_with(
            "f",
            "",
            "0123456789",
            Priority::High,
            true,
        ))),
    );
    let full = "Job queue is full: the server holds its --max-queue-memory of job data";
    w.expect(1, err("QUEUE_ERROR", full));
    // A duplicate of a held job adds nothing and goes through.
    assert_eq!(w.bg(1, "f", "k", "0123456789"), h);
    let t = w.core.totals();
    assert_eq!(
        (t.job_bytes, t.refused_memory, t.refused_maxqueue),
        (21, 1, 0)
    );
    // A finished job frees its bytes.
    w.can_do(2, &["f"]);
    let (got, _) = w.grab_job(2);
    w.req(
        2,
        Request::WorkComplete {
            handle: got,
            data: Bytes::new(),
        },
    );
    assert_eq!(w.core.totals().job_bytes, 10);
    w.bg(1, "f", "", "0123456789");
    assert_eq!(w.core.totals().job_bytes, 20);
}

/// Opens connection `n` with the given rights and TLS identity.
fn conn_with(w: &mut World, n: u64, rights: Rights, identity: Option<&str>) {
    let info = ConnInfo {
        fd: n as i64,
        ip: format!("10.9.0.{n}"),
        port: 0,
        loopback: false,
        rights,
        node: None,
        identity: identity.map(str::to_owned),
    };
    w.core.connect(ConnId(n), info);
}

#[test]
fn a_peer_without_the_submit_right_is_refused_and_nothing_is_queued() {
    let mut w = World::new();
    let no_submit = Rights {
        submit: false,
        ..Rights::ALL
    };
    conn_with(&mut w, 1, no_submit, None);
    let denied = err(
        "PERMISSION_DENIED",
        "submitting jobs is not allowed for this peer",
    );
    // Twice: the harness alternates the in-place and the parsed path.
    for _ in 0..2 {
        w.req(
            1,
            Request::submit(Box::new(job_with("f", "", "x", Priority::Normal, true))),
        );
        w.expect(1, denied.clone());
    }
    w.req(1, Request::GetStatus(Bytes::from_static(b"H:x:1")));
    w.expect(1, denied);
    assert_eq!(w.status_of("f"), None);
    // The same connection may still work and read.
    w.can_do(1, &["f"]);
    assert!(w.admin(1, "status").starts_with("f\t0\t0\t1\n"));
}

#[test]
fn a_peer_without_the_work_right_never_gets_a_job() {
    let mut w = World::new();
    w.conn(1);
    let no_work = Rights {
        work: false,
        ..Rights::ALL
    };
    conn_with(&mut w, 2, no_work, None);
    w.bg(1, "f", "", "x");
    let denied = err(
        "PERMISSION_DENIED",
        "working on jobs is not allowed for this peer",
    );
    w.req(2, Request::CanDo(Bytes::from_static(b"f")));
    w.expect(2, denied.clone());
    w.req(2, Request::Grab(gearshift_proto::GrabKind::All));
    w.expect(2, denied);
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
}

#[test]
fn reads_and_changes_follow_their_own_rights() {
    let mut w = World::new();
    let no_read = Rights {
        read: false,
        ..Rights::ALL
    };
    conn_with(&mut w, 1, no_read, None);
    let read_denied = "ERR PERMISSION_DENIED admin+commands+are+not+allowed+from+this+peer\r\n";
    for cmd in [
        "status",
        "workers",
        "show jobs",
        "version",
        "show unique jobs",
    ] {
        assert_eq!(w.admin(1, cmd), read_denied, "{cmd}");
    }
    // Unknown commands get gearmand's usual answer, rights or not.
    assert!(w.admin(1, "bogus").starts_with("ERR UNKNOWN_COMMAND"));
    // A change right without the read right still changes.
    assert_eq!(w.admin(1, "maxqueue f 3"), "OK\r\n");
    let read_only = Rights {
        change: false,
        ..Rights::ALL
    };
    conn_with(&mut w, 2, read_only, None);
    w.bg(2, "f", "", "x");
    assert!(w.admin(2, "status").contains("f\t1\t0\t0"));
    assert_eq!(
        w.admin(2, "maxqueue f 4"),
        "ERR PERMISSION_DENIED changes+are+only+accepted+from+loopback+or+--admin-allow\r\n"
    );
}

#[test]
fn a_certificate_subject_names_a_worker_that_set_no_client_id() {
    let mut w = World::new();
    conn_with(&mut w, 1, Rights::ALL, Some("CN=resizer-1,O=Acme"));
    conn_with(&mut w, 2, Rights::ALL, Some("CN=resizer-2,O=Acme"));
    w.can_do(1, &["resize"]);
    w.can_do(2, &["resize"]);
    w.req(2, Request::SetClientId(Bytes::from_static(b"mine")));
    let workers = w.admin(3, "workers");
    assert_eq!(workers, "");
    w.conn(3);
    let workers = w.admin(3, "workers");
    assert!(
        workers.contains("1 10.9.0.1 CN=resizer-1,O=Acme : resize\n"),
        "{workers}"
    );
    assert!(workers.contains("2 10.9.0.2 mine : resize\n"), "{workers}");
    let v = w.core.workers_view();
    let ids: Vec<_> = v.iter().map(|x| x.identity.clone()).collect();
    assert!(ids.contains(&Some("CN=resizer-1,O=Acme".to_owned())));
}
