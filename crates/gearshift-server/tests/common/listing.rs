//! Parsing admin listings as a monitoring script would: every line the
//! right number of fields, no control byte but the separator.

use super::TestServer;

/// Asserts `list` is lines of exactly `cols` fields split on `sep`, with no
/// control byte but the separator; returns the rows.
pub fn listing_rows(list: &str, sep: char, cols: usize) -> Vec<Vec<String>> {
    let body = list
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {list:?}"));
    body.lines()
        .map(|line| {
            let bad = line
                .bytes()
                .any(|c| c != sep as u8 && (c < 0x20 || c == 0x7f));
            assert!(!bad, "control byte in {line:?}");
            let fields: Vec<String> = line.split(sep).map(str::to_owned).collect();
            assert_eq!(fields.len(), cols, "{line:?}");
            fields
        })
        .collect()
}

/// `status` rows: a name and three counts each.
pub fn status_rows(list: &str) -> Vec<Vec<String>> {
    let rows = listing_rows(list, '\t', 4);
    for row in &rows {
        assert!(row[1..].iter().all(|c| c.parse::<u32>().is_ok()), "{row:?}");
    }
    rows
}

/// `workers` rows as (client id, functions); each line is `FD IP ID : F…`.
pub fn workers_rows(list: &str) -> Vec<(String, Vec<String>)> {
    let body = list
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {list:?}"));
    body.lines()
        .map(|line| {
            assert!(
                !line.bytes().any(|c| c < 0x20 || c == 0x7f),
                "control byte in {line:?}"
            );
            let f: Vec<&str> = line.split(' ').collect();
            assert!(f.len() >= 4 && f[3] == ":", "{line:?}");
            assert!(f[0].parse::<i64>().is_ok(), "{line:?}");
            let functions = f[4..].iter().map(|s| (*s).to_owned()).collect();
            (f[2].to_owned(), functions)
        })
        .collect()
}

/// Reads every admin listing on a fresh connection and checks each parses
/// line by line; a forged `.` line would leave text behind, which the
/// closing ping would trip over. Returns `status` and `workers`.
pub async fn listings_parse(server: &TestServer) -> (String, String) {
    let mut admin = server.connect().await;
    let status = admin.admin_list("status").await;
    status_rows(&status);
    listing_rows(&admin.admin_list("prioritystatus").await, '\t', 5);
    let workers = admin.admin_list("workers").await;
    workers_rows(&workers);
    listing_rows(&admin.admin_list("show jobs").await, '\t', 4);
    listing_rows(&admin.admin_list("show unique jobs").await, '\n', 1);
    admin.ping(b"nothing left over").await;
    (status, workers)
}
