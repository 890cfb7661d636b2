//! Reading a gearmand 1.1 `Postgres` (libpq) queue table: every row, in
//! the order gearmand's own replay would see them, in one read-only
//! snapshot, each column checked and converted; nothing is written.
//!
//! gearmand creates the table as `unique_key VARCHAR(64), function_name
//! VARCHAR(255), priority INTEGER, data BYTEA, when_to_run INTEGER`, with
//! `UNIQUE (unique_key, function_name)`, and names it with its
//! `--libpq-table` option unquoted (so PostgreSQL folds it to lower case).

use bytes::Bytes;
use gearshift_store::postgres::{causes, describe, libpq_defaults};
use postgres::config::SslMode;
use postgres::{Config, IsolationLevel, NoTls};

use super::table::Read;
use super::{check_function, check_unique, no_table, priority_of, queue_columns, Row};

/// Connects with `conninfo` (libpq's `key=value` form, as gearmand's
/// `--libpq-conninfo` takes it, or a `postgresql://` URL) and reads the
/// queue table `table`.
pub(super) fn read_gearmand_postgres(conninfo: &str, table: &str) -> Result<Read, String> {
    let mut config: Config = conninfo
        .parse()
        // Not echoed: it may hold a password.
        .map_err(|e| format!("cannot parse the PostgreSQL connection string: {e}"))?;
    libpq_defaults(&mut config, |name| std::env::var(name).ok());
    let server = describe(&config);
    if config.get_ssl_mode() == SslMode::Require {
        return Err(format!(
            "{server} asks for sslmode=require, but gearshift import connects without TLS; \
             run it where the server accepts a plain connection (on the database host, say)"
        ));
    }
    let mut client = config
        .connect(NoTls)
        .map_err(|e| format!("cannot connect to PostgreSQL at {server}: {}", causes(&e)))?;
    let sql_err = |e: postgres::Error| format!("cannot read the queue at {server}: {}", causes(&e));
    // One snapshot for every query below, and nothing written.
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(sql_err)?;

    // to_regclass folds an unquoted name the way gearmand's SQL does.
    let found: Option<String> = tx
        .query_one("SELECT to_regclass($1)::text", &[&table])
        .and_then(|r| r.try_get(0))
        .map_err(sql_err)?;
    let Some(resolved) = found else {
        let tables: Vec<String> = tx
            .query(
                "SELECT c.oid::regclass::text FROM pg_class c \
                 WHERE c.relkind IN ('r', 'p') AND pg_table_is_visible(c.oid) \
                 AND c.relnamespace <> 'pg_catalog'::regnamespace ORDER BY 1",
                &[],
            )
            .map_err(sql_err)?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(sql_err)?;
        return Err(no_table(
            &server,
            table,
            &tables,
            "pass the one gearmand used (its --libpq-table) with --table",
        ));
    };
    let columns: Vec<String> = tx
        .query(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::text::regclass \
             AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&resolved],
        )
        .map_err(sql_err)?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(sql_err)?;
    let has = |c: &str| columns.iter().any(|x| x == c);
    let with_when = queue_columns(&columns, has, &format!("{resolved} at {server}"))?;
    let when = if with_when {
        "when_to_run::bigint"
    } else {
        "0::bigint"
    };
    // Bytes, not text, for the names: binary-safe whatever the database's
    // encoding. Physical order is the order of gearmand's own replay (a
    // plain SELECT without ORDER BY), which follows insertion until rows
    // are deleted and their room reused.
    let sql = format!(
        "SELECT ctid::text, convert_to(unique_key, 'UTF8'), convert_to(function_name, 'UTF8'), \
         priority::bigint, data, {when} FROM {resolved} ORDER BY ctid"
    );
    let rows = tx.query(&sql, &[]).map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;

    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let ctid: String = row.try_get(0).map_err(sql_err)?;
        let fail =
            |why: String| format!("row {ctid} of {resolved} at {server} is unreadable: {why}");
        let bytes = |i: usize| {
            row.try_get::<_, Option<Vec<u8>>>(i)
                .map(|b| Bytes::from(b.unwrap_or_default()))
                .map_err(|e| fail(e.to_string()))
        };
        let int = |i: usize| {
            row.try_get::<_, Option<i64>>(i)
                .map_err(|e| fail(e.to_string()))
        };
        let r = Row {
            unique: check_unique(bytes(1)?).map_err(fail)?,
            function: check_function(bytes(2)?).map_err(fail)?,
            priority: priority_of(int(3)?.unwrap_or(-1)),
            data: bytes(4)?,
            when: int(5)?.unwrap_or(0),
        };
        out.push(r);
    }
    Ok(Read::new(out, format!("{server}?table={resolved}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres::config::Host;

    #[test]
    fn the_queue_is_named_without_its_password() {
        let c: Config = "host=db.example port=5433 dbname=gm user=g password=s3cret"
            .parse()
            .expect("conninfo");
        assert_eq!(describe(&c), "postgres://g@db.example:5433/gm");
        let c: Config = "postgresql://g:s3cret@db.example/gm".parse().expect("url");
        assert_eq!(describe(&c), "postgres://g@db.example:5432/gm");
    }

    #[test]
    fn what_the_string_leaves_out_comes_from_the_environment_as_in_libpq() {
        let env = |name: &str| match name {
            "PGHOST" => Some("db1,db2".to_owned()),
            "PGPORT" => Some("6543".to_owned()),
            "PGUSER" => Some("envuser".to_owned()),
            "PGDATABASE" => Some("envdb".to_owned()),
            "PGPASSWORD" => Some("pw".to_owned()),
            _ => None,
        };
        let mut c: Config = "dbname=gm".parse().expect("conninfo");
        libpq_defaults(&mut c, env);
        assert_eq!(describe(&c), "postgres://envuser@db1:6543,db2:6543/gm");
        assert_eq!(c.get_password(), Some(&b"pw"[..]));
        // Given values win; no PGHOST means the local socket directory.
        let mut c: Config = "host=h port=1 user=u dbname=d password=p"
            .parse()
            .expect("all");
        libpq_defaults(&mut c, env);
        assert_eq!(describe(&c), "postgres://u@h:1/d");
        assert_eq!(c.get_password(), Some(&b"p"[..]));
        let mut c: Config = "dbname=d".parse().expect("no host");
        libpq_defaults(&mut c, |_| None);
        assert!(describe(&c).starts_with("postgres:///"), "{}", describe(&c));
        assert!(
            matches!(c.get_hosts(), [Host::Unix(_)]),
            "{:?}",
            c.get_hosts()
        );
    }

    #[test]
    fn sslmode_require_is_refused_before_connecting() {
        let err = read_gearmand_postgres("host=127.0.0.1 port=1 sslmode=require user=g", "queue")
            .expect_err("refused");
        assert!(err.contains("without TLS"), "{err}");
    }
}
