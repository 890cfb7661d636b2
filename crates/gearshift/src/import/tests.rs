//! Unit tests of the import: reading rows, mapping them to records, the
//! refusals and the marker.

use std::path::Path;

use rusqlite::Connection;

use super::*;

const NOW: u64 = 1_700_000_000_000;
const CREATE: &str = "CREATE TABLE gearman_queue ( unique_key TEXT, function_name TEXT, \
    priority INTEGER, data BLOB, when_to_run INTEGER, PRIMARY KEY (unique_key, function_name))";

fn db(dir: &Path, sql: &[&str]) -> PathBuf {
    let file = dir.join("queue.sqlite");
    let conn = Connection::open(&file).expect("create db");
    for s in sql {
        conn.execute_batch(s).expect(s);
    }
    file
}

fn args(file: &Path, data: &Path) -> ImportArgs {
    ImportArgs {
        gearmand_sqlite: Some(file.to_path_buf()),
        gearmand_postgres: None,
        gearmand_mysql: None,
        table: None,
        store: "log".to_owned(),
        data_dir: Some(data.to_path_buf()),
        job_handle_prefix: Some("H:test".to_owned()),
        force: false,
    }
}

fn stored(data: &Path) -> gearshift_store::Replayed {
    let mut s = LogStore::open(data, LogOptions::default()).expect("open store");
    s.replay().expect("replay")
}

#[test]
fn maps_every_column_in_rowid_order() {
    let tmp = tempfile::tempdir().expect("tmp");
    let future = NOW / 1000 + 3600;
    let file = db(
        tmp.path(),
        &[
            CREATE,
            "INSERT INTO gearman_queue VALUES ('u1', 'f', 2, x'00ff00', 0)",
            "INSERT INTO gearman_queue VALUES ('', 'g', 0, 'text', NULL)",
            &format!("INSERT INTO gearman_queue VALUES ('u3', 'f', 7, NULL, {future})"),
            "INSERT INTO gearman_queue VALUES ('u4', 'f', 1, x'', 5)",
            "INSERT OR REPLACE INTO gearman_queue VALUES ('u1', 'f', 0, x'01', 0)",
        ],
    );
    let data = tmp.path().join("data");
    let s = run(&args(&file, &data), NOW).expect("import");
    assert!(s.line.starts_with("imported 4 jobs from "), "{}", s.line);
    assert!(
        s.line.ends_with("(functions: f 3, g 1)"),
        "summary: {}",
        s.line
    );
    let r = stored(&data);
    let got: Vec<_> = r
        .jobs
        .iter()
        .map(|j| {
            (
                j.id,
                &j.handle[..],
                &j.unique[..],
                &j.function[..],
                j.priority,
                &j.data[..],
                j.due_ms,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                1,
                &b"H:test:1"[..],
                &b""[..],
                &b"g"[..],
                0,
                &b"text"[..],
                None
            ),
            (2, b"H:test:2", b"u3", b"f", 1, b"", Some(future * 1000)),
            (3, b"H:test:3", b"u4", b"f", 1, b"", None),
            (4, b"H:test:4", b"u1", b"f", 0, b"\x01", None),
        ]
    );
    assert!(r
        .jobs
        .iter()
        .all(|j| j.attempts == 0 && j.created_ms == NOW));
    assert_eq!(r.next_id, 5);
}

#[test]
fn appends_after_existing_jobs_and_reservations() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    {
        let mut s = LogStore::open(&data, LogOptions::default()).expect("open");
        s.replay().expect("replay");
        s.reserve(100_001);
        s.flush().expect("flush");
    }
    let file = db(
        tmp.path(),
        &[
            CREATE,
            "INSERT INTO gearman_queue VALUES ('a', 'f', 1, x'61', 0)",
        ],
    );
    run(&args(&file, &data), NOW).expect("import");
    let r = stored(&data);
    assert_eq!(r.jobs.len(), 1);
    assert_eq!(r.jobs[0].id, 100_001);
    assert_eq!(&r.jobs[0].handle[..], b"H:test:100001");
    assert_eq!(r.next_id, 100_002);
}

#[test]
fn second_import_is_refused_unless_forced() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = db(
        tmp.path(),
        &[
            CREATE,
            "INSERT INTO gearman_queue VALUES ('a', 'f', 1, x'61', 0)",
        ],
    );
    let data = tmp.path().join("data");
    run(&args(&file, &data), NOW).expect("first import");
    let e = run(&args(&file, &data), NOW).expect_err("second import");
    assert!(e.contains("already imported"), "{e}");
    assert_eq!(stored(&data).jobs.len(), 1);
    let mut forced = args(&file, &data);
    forced.force = true;
    let s = run(&forced, NOW).expect("forced import");
    assert!(s.warnings.iter().any(|w| w.contains("--force")), "{s:?}");
    assert_eq!(stored(&data).jobs.len(), 2);
}

#[test]
fn missing_table_lists_tables_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = db(tmp.path(), &[CREATE, "CREATE TABLE other (x)"]);
    let data = tmp.path().join("data");
    let mut a = args(&file, &data);
    a.table = Some("queue".to_owned());
    let e = run(&a, NOW).expect_err("no table");
    assert!(e.contains("tables found: gearman_queue, other"), "{e}");
    assert!(!data.exists());
}

#[test]
fn unreadable_row_names_its_rowid_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = db(
        tmp.path(),
        &[
            CREATE,
            "INSERT INTO gearman_queue VALUES ('a', 'f', 1, x'61', 0)",
            "INSERT INTO gearman_queue VALUES ('b', NULL, 1, x'61', 0)",
        ],
    );
    let data = tmp.path().join("data");
    let e = run(&args(&file, &data), NOW).expect_err("bad row");
    assert!(e.contains("rowid 2"), "{e}");
    assert!(!data.exists());
}

#[test]
fn formats_utc() {
    assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
    assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    assert_eq!(utc(1_700_000_000_999), "2023-11-14 22:13:20 UTC");
}

#[test]
fn a_damaged_store_is_refused_with_the_way_out() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    // Two imports: two frames, so damage to the first is not a torn end.
    for (name, payload) in [("one", "first-payload"), ("two", "second-payload")] {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        let insert = format!("INSERT INTO gearman_queue VALUES ('{name}', 'f', 1, '{payload}', 0)");
        let mut a = args(&db(&dir, &[CREATE, &insert]), &data);
        a.force = true;
        run(&a, NOW).expect("import");
    }
    let file = data.join("queue.gslog");
    let mut raw = std::fs::read(&file).expect("read");
    let at = raw
        .windows(13)
        .position(|w| w == b"first-payload")
        .expect("the job in the file");
    raw[at] ^= 0x20;
    std::fs::write(&file, &raw).expect("write");
    let dir = tmp.path().join("three");
    std::fs::create_dir(&dir).expect("mkdir");
    let insert = "INSERT INTO gearman_queue VALUES ('three', 'f', 1, 'x', 0)";
    let mut a = args(&db(&dir, &[CREATE, insert]), &data);
    a.force = true;
    let e = run(&a, NOW).expect_err("damaged");
    assert!(e.contains("nothing imported"), "{e}");
    assert!(
        e.contains(&format!("gearshift check --data-dir {}", data.display())),
        "{e}"
    );
    assert_eq!(std::fs::read(&file).expect("read"), raw, "nothing written");
}

#[test]
fn locked_data_dir_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = db(
        tmp.path(),
        &[
            CREATE,
            "INSERT INTO gearman_queue VALUES ('a', 'f', 1, x'61', 0)",
        ],
    );
    let data = tmp.path().join("data");
    let held = LogStore::open(&data, LogOptions::default()).expect("open");
    let e = run(&args(&file, &data), NOW).expect_err("locked");
    assert!(e.contains("running Gearshift server"), "{e}");
    drop(held);
    assert!(stored(&data).jobs.is_empty());
    assert!(!data.join(MARKER).exists());
}

#[test]
fn table_without_when_to_run_imports_jobs_as_due() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = db(
        tmp.path(),
        &[
            "CREATE TABLE gearman_queue (unique_key TEXT PRIMARY KEY, function_name TEXT, \
             priority INTEGER, data BLOB)",
            "INSERT INTO gearman_queue VALUES ('a', 'f', 2, x'61')",
        ],
    );
    let data = tmp.path().join("data");
    run(&args(&file, &data), NOW).expect("import");
    let r = stored(&data);
    assert_eq!(r.jobs.len(), 1);
    assert_eq!((r.jobs[0].priority, r.jobs[0].due_ms), (2, None));
}
