//! Reading a gearmand 1.1 `libsqlite3` queue table: every row in rowid
//! order, each column checked and converted, nothing written.

use std::path::Path;

use bytes::Bytes;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::{check_function, check_unique, no_table, priority_of, queue_columns, Row};

/// Reads every row of gearmand's queue table in rowid order: the order in
/// which gearmand inserted them (`INSERT OR REPLACE` gives a replaced row
/// a new rowid, as gearmand's own replay order has it).
pub(super) fn read_gearmand_sqlite(file: &Path, table: &str) -> Result<Vec<Row>, String> {
    let what = file.display();
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open {what}: {e}"))?;
    let sql_err = |e: rusqlite::Error| format!("cannot read {what}: {e}");

    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .map_err(sql_err)?;
    let tables = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(sql_err)?;
    // SQLite resolves table names case-insensitively; so does the import.
    let Some(table) = tables.iter().find(|t| t.eq_ignore_ascii_case(table)) else {
        return Err(no_table(
            &what.to_string(),
            table,
            &tables,
            "pass the one gearmand used with --table",
        ));
    };
    let quoted = format!("\"{}\"", table.replace('"', "\"\""));

    let mut stmt = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{}')",
            table.replace('\'', "''")
        ))
        .map_err(sql_err)?;
    let columns = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(sql_err)?;
    let has = |c: &str| columns.iter().any(|x| x.eq_ignore_ascii_case(c));
    let with_when = queue_columns(&columns, has, &format!("{table} of {what}"))?;
    // Without when_to_run everything runs at once.
    let when = if with_when { "when_to_run" } else { "0" };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT rowid, unique_key, function_name, priority, data, {when} FROM {quoted} \
             ORDER BY rowid"
        ))
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut out = Vec::new();
    let mut last_rowid = None;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => {
                let at = last_rowid.map_or("the first row".to_owned(), |r| {
                    format!("the row after rowid {r}")
                });
                return Err(format!("cannot read {at} of {what}: {e}"));
            }
        };
        let rowid: i64 = row.get(0).map_err(sql_err)?;
        last_rowid = Some(rowid);
        let fail = |why: String| format!("row with rowid {rowid} of {what} is unreadable: {why}");
        let col = |i: usize| row.get_ref(i).map_err(|e| fail(e.to_string()));
        out.push(Row {
            unique: unique(col(1)?).map_err(fail)?,
            function: function(col(2)?).map_err(fail)?,
            priority: priority(col(3)?),
            data: data(col(4)?).map_err(fail)?,
            when: when_to_run(col(5)?).map_err(fail)?,
        });
    }
    Ok(out)
}

fn unique(v: ValueRef<'_>) -> Result<Bytes, String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => check_unique(Bytes::copy_from_slice(b)),
        ValueRef::Null => Ok(Bytes::new()),
        other => Err(format!("unique_key is {:?}, not text", other.data_type())),
    }
}

fn function(v: ValueRef<'_>) -> Result<Bytes, String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => check_function(Bytes::copy_from_slice(b)),
        other => Err(format!(
            "function_name is {:?}, not text",
            other.data_type()
        )),
    }
}

fn priority(v: ValueRef<'_>) -> u8 {
    match v {
        ValueRef::Integer(p) => priority_of(p),
        _ => priority_of(-1),
    }
}

fn data(v: ValueRef<'_>) -> Result<Bytes, String> {
    match v {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(Bytes::copy_from_slice(b)),
        ValueRef::Null => Ok(Bytes::new()),
        other => Err(format!("data is {:?}, not a blob", other.data_type())),
    }
}

fn when_to_run(v: ValueRef<'_>) -> Result<i64, String> {
    match v {
        ValueRef::Integer(w) => Ok(w),
        ValueRef::Null => Ok(0),
        other => Err(format!(
            "when_to_run is {:?}, not an integer",
            other.data_type()
        )),
    }
}
