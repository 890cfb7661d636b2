//! Who may change the server over the admin protocol (loopback, or an
//! `--admin-allow` network, which the server marks on the connection) and
//! the cap on the job data the server holds (`--max-queue-memory`).

mod common;

use bytes::Bytes;
use common::{err, job_with, World};
use gearshift_core::{ConnId, ConnInfo, CoreConfig};
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
        loopback: false,
        admin: true,
        node: None,
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
        Request::Submit(job_with("f", "", "0123456789", Priority::High, true)),
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
