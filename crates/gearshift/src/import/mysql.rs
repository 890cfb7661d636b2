//! Reading a gearmand 1.1 `MySQL` queue table: every row, in the order
//! gearmand's own replay would see them, in one read-only consistent
//! snapshot, each column checked and converted; nothing is written.
//!
//! gearmand creates the table (its `--mysql-table`, default
//! `gearman_queue`, in `--mysql-db`) as `unique_key VARCHAR(64),
//! function_name VARCHAR(255), priority INT, data LONGBLOB, when_to_run
//! INT`, with `UNIQUE KEY (unique_key, function_name)` and no primary key,
//! and replays it with a plain `SELECT` (InnoDB: insertion order).

use std::time::Duration;

use bytes::Bytes;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, UrlError};

use super::table::Read;
use super::{check_function, check_unique, no_table, priority_of, queue_columns, Row};

/// How long the import waits to connect, and for each answer.
const WAIT: Duration = Duration::from_secs(30);

/// Why a URL asking for TLS is refused.
const NO_TLS: &str = "gearshift import connects without TLS; run it where the server \
                      accepts a plain connection (on the database host, say)";

/// Whether a URL parameter is one of the driver's TLS settings.
fn is_tls(param: &str) -> bool {
    [
        "ssl", "tls", "cert", "key_path", "pkcs12", "cipher", "verify",
    ]
    .iter()
    .any(|w| param.contains(w))
}

/// Connects to the `mysql://user:password@host:port/database` URL (the
/// password may come from `MYSQL_PWD` instead) and reads the queue table
/// `table`.
pub(super) fn read_gearmand_mysql(url: &str, table: &str) -> Result<Read, String> {
    let opts = options(url, std::env::var("MYSQL_PWD").ok())?;
    let server = describe(&opts);
    if opts.get_ssl_opts().is_some() {
        return Err(format!("{server} asks for TLS, but {NO_TLS}"));
    }
    let mut conn = Conn::new(opts)
        .map_err(|e| format!("cannot connect to MySQL at {server}: {}", cause(&e)))?;
    let sql_err = |e: mysql::Error| format!("cannot read the queue at {server}: {}", cause(&e));
    // One snapshot for every query below, and nothing written.
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .map_err(sql_err)?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .map_err(sql_err)?;

    let folded: Option<i64> = conn
        .query_first("SELECT @@lower_case_table_names")
        .map_err(sql_err)?;
    let tables: Vec<String> = conn
        .query(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1",
        )
        .map_err(sql_err)?;
    let Some(resolved) = resolve(table, &tables, folded.unwrap_or(0) != 0) else {
        return Err(no_table(
            &server,
            table,
            &tables,
            "pass the one gearmand used (its --mysql-table) with --table",
        ));
    };
    let columns: Vec<String> = conn
        .exec(
            "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position",
            (&resolved,),
        )
        .map_err(sql_err)?;
    // Column names are not case-sensitive in MySQL.
    let has = |c: &str| columns.iter().any(|x| x.eq_ignore_ascii_case(c));
    let with_when = queue_columns(&columns, has, &format!("{resolved} at {server}"))?;
    let when = if with_when { "when_to_run" } else { "0" };
    // In the connection's utf8mb4 the server gives the names back as
    // gearmand's UTF-8 connection sent them, whatever the columns' charset.
    let sql = format!(
        "SELECT unique_key, function_name, priority, data, {when} FROM {}",
        quoted(&resolved)
    );
    let raw: Vec<mysql::Row> = conn.query(sql).map_err(sql_err)?;
    conn.query_drop("COMMIT").map_err(sql_err)?;

    let mut rows = Vec::with_capacity(raw.len());
    for (n, mut r) in raw.into_iter().enumerate() {
        let fail = |why: String| {
            format!(
                "row {} of {resolved} at {server} (in its scan order) is unreadable: {why}",
                n + 1
            )
        };
        rows.push(to_row(&mut r).map_err(fail)?);
    }
    Ok(Read::new(rows, format!("{server}?table={resolved}")))
}

/// The error as the server or the system said it, without the driver's
/// wrapping.
fn cause(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(e) => e.to_string(),
        mysql::Error::DriverError(e) => e.to_string(),
        mysql::Error::IoError(e) => e.to_string(),
        e => e.to_string(),
    }
}

/// The URL's settings, with `env_password` when the URL gives none; the
/// connection goes where the URL says (no switch to a local socket).
fn options(url: &str, env_password: Option<String>) -> Result<Opts, String> {
    let opts = Opts::from_url(url).map_err(|e| match e {
        // This build has no TLS, so its settings are not even known.
        UrlError::FeatureRequired(_, p) | UrlError::UnknownParameter(p) if is_tls(&p) => {
            format!("the MySQL URL's {p} asks for TLS, but {NO_TLS}")
        }
        e => format!("cannot parse the MySQL URL (mysql://user:password@host:port/database): {e}"),
    })?;
    if opts.get_db_name().is_none_or(str::is_empty) {
        return Err(
            "name the database in the URL, as gearmand's --mysql-db: mysql://user@host:port/DATABASE"
                .into(),
        );
    }
    let pass = opts.get_pass().map(str::to_owned).or(env_password);
    Ok(OptsBuilder::from_opts(opts)
        .pass(pass)
        .prefer_socket(false)
        .tcp_connect_timeout(Some(WAIT))
        .read_timeout(Some(WAIT))
        .write_timeout(Some(WAIT))
        .into())
}

/// `mysql://user@host:port/db` (or the socket it names): never the password.
fn describe(opts: &Opts) -> String {
    let user = opts.get_user().unwrap_or_default();
    let db = opts.get_db_name().unwrap_or_default();
    match opts.get_socket() {
        Some(socket) => format!("mysql://{user}@localhost/{db}?socket={socket}"),
        None => format!(
            "mysql://{user}@{}:{}/{db}",
            opts.get_ip_or_hostname(),
            opts.get_tcp_port()
        ),
    }
}

/// The table `wanted` among `tables`: the same name, or, where the server
/// folds table names to lower case, the same name in any case.
fn resolve(wanted: &str, tables: &[String], folded: bool) -> Option<String> {
    tables
        .iter()
        .find(|t| *t == wanted || (folded && t.eq_ignore_ascii_case(wanted)))
        .cloned()
}

/// A name as an identifier in MySQL's SQL.
fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// One row of the `SELECT`, checked: a NULL unique, data or time reads as
/// empty or 0 (gearmand may store an empty workload as NULL).
fn to_row(r: &mut mysql::Row) -> Result<Row, String> {
    fn bytes(r: &mut mysql::Row, i: usize) -> Result<Bytes, String> {
        match r.take_opt::<Option<Vec<u8>>, usize>(i) {
            Some(Ok(b)) => Ok(Bytes::from(b.unwrap_or_default())),
            Some(Err(e)) => Err(e.to_string()),
            None => Err(format!("no column {i}")),
        }
    }
    fn int(r: &mut mysql::Row, i: usize) -> Result<Option<i64>, String> {
        match r.take_opt::<Option<i64>, usize>(i) {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(e.to_string()),
            None => Err(format!("no column {i}")),
        }
    }
    Ok(Row {
        unique: check_unique(bytes(r, 0)?)?,
        function: check_function(bytes(r, 1)?)?,
        priority: priority_of(int(r, 2)?.unwrap_or(-1)),
        data: bytes(r, 3)?,
        when: int(r, 4)?.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_named_without_its_password() {
        let o = options("mysql://gm:s3cret@db.example:3307/gearman", None).expect("url");
        assert_eq!(describe(&o), "mysql://gm@db.example:3307/gearman");
        assert_eq!(o.get_pass(), Some("s3cret"));
        assert!(!o.get_prefer_socket(), "connects where the URL says");
        let o = options("mysql://gm@db.example/gearman", Some("envpw".into())).expect("url");
        assert_eq!(describe(&o), "mysql://gm@db.example:3306/gearman");
        assert_eq!(
            o.get_pass(),
            Some("envpw"),
            "MYSQL_PWD when the URL has none"
        );
        let o = options("mysql://gm:given@h/gearman", Some("envpw".into())).expect("url");
        assert_eq!(o.get_pass(), Some("given"), "the URL's password wins");
    }

    #[test]
    fn a_url_without_a_database_or_of_another_scheme_is_refused() {
        let e = options("mysql://gm:pw@h:3306", None).expect_err("no database");
        assert!(e.contains("--mysql-db"), "{e}");
        let e = options("postgres://gm@h/db", None).expect_err("scheme");
        assert!(e.contains("cannot parse the MySQL URL"), "{e}");
        assert!(!e.contains("pw"), "{e}");
    }

    #[test]
    fn tls_is_refused_before_connecting() {
        for p in [
            "require_ssl=true",
            "verify_ca=true",
            "cert_chain_path=/c.pem",
        ] {
            let url = format!("mysql://gm:pw@127.0.0.1:1/gearman?{p}");
            let e = read_gearmand_mysql(&url, "q").expect_err("refused");
            assert!(
                e.contains("asks for TLS") && e.contains("without TLS"),
                "{e}"
            );
            assert!(!e.contains(":pw@"), "{e}");
        }
    }

    #[test]
    fn the_table_is_found_as_the_server_names_it() {
        let tables = ["Gearman_Queue".to_owned(), "other".to_owned()];
        assert_eq!(
            resolve("Gearman_Queue", &tables, false).as_deref(),
            Some("Gearman_Queue")
        );
        assert_eq!(resolve("gearman_queue", &tables, false), None);
        assert_eq!(
            resolve("gearman_queue", &tables, true).as_deref(),
            Some("Gearman_Queue")
        );
        assert_eq!(quoted("we`ird"), "`we``ird`");
    }
}
