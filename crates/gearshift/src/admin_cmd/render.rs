//! How `gearshift admin` prints answers: the cells and replies every
//! command builds, shown as an aligned table, as `key  value` records
//! (`job`), or as a JSON array of objects.

use gearshift_client::admin::HistoryEntry;
use serde_json::{Map, Value};

use crate::table::Table;

/// One cell of a reply row.
pub(super) enum Cell {
    Text(String),
    Num(i64),
    Flag(bool),
    List(Vec<String>),
    /// A list shown as `-` in a table when empty (a column that is not the last).
    Words(Vec<String>),
    /// No value: `-` in a table, `null` in JSON.
    Null,
    /// `show job` history: a line each in a table, objects in JSON.
    History(Vec<HistoryEntry>),
    /// A value given in JSON only (a record's table leaves it out).
    JsonOnly(Box<Cell>),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Num(n) => n.to_string(),
            Cell::Flag(b) => if *b { "yes" } else { "no" }.to_owned(),
            Cell::List(l) => l.join(" "),
            Cell::Words(l) if l.is_empty() => "-".to_owned(),
            Cell::Words(l) => l.join(" "),
            Cell::Null => "-".to_owned(),
            Cell::History(h) => history_lines(h).join("; "),
            Cell::JsonOnly(c) => c.text(),
        }
    }

    fn json(self) -> Value {
        match self {
            Cell::Text(s) => Value::String(s),
            Cell::Num(n) => Value::from(n),
            Cell::Flag(b) => Value::Bool(b),
            Cell::List(l) | Cell::Words(l) => Value::from(l),
            Cell::Null => Value::Null,
            Cell::History(h) => Value::Array(
                h.into_iter()
                    .map(|e| {
                        let mut o = Map::new();
                        o.insert("time".into(), Value::String(e.time));
                        o.insert("event".into(), Value::String(e.event));
                        o.insert("detail".into(), Value::String(e.detail));
                        Value::Object(o)
                    })
                    .collect(),
            ),
            Cell::JsonOnly(c) => c.json(),
        }
    }
}

/// `TIME EVENT [DETAIL]` per history entry.
fn history_lines(h: &[HistoryEntry]) -> Vec<String> {
    h.iter()
        .map(|e| {
            let mut line = format!("{} {}", e.time, e.event);
            if !e.detail.is_empty() {
                line.push(' ');
                line.push_str(&e.detail);
            }
            line
        })
        .collect()
}

pub(super) fn text_or_null(v: Option<String>) -> Cell {
    v.map_or(Cell::Null, Cell::Text)
}

/// A command's answer from one server: columns (name, right-aligned) and rows.
pub(super) struct Reply {
    pub(super) columns: &'static [(&'static str, bool)],
    pub(super) rows: Vec<Vec<Cell>>,
    /// A one-value answer (version, getpid, OK): printed bare for one server.
    pub(super) scalar: bool,
    /// One record (`job`): printed as `key  value` lines, not a table.
    pub(super) record: bool,
}

impl Reply {
    /// A count's value (`retry-dead`, `drop-dead`): its one number.
    pub(super) fn count(&self) -> Option<i64> {
        match self.rows.first().and_then(|r| r.first()) {
            Some(Cell::Num(n)) if self.scalar => Some(*n),
            _ => None,
        }
    }
}

pub(super) fn num(n: u64) -> Cell {
    Cell::Num(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The answers as one table (with a SERVER column when `several`).
pub(super) fn table(answers: Vec<(String, Reply)>, several: bool) -> String {
    let Some(columns) = answers.first().map(|(_, r)| r.columns) else {
        return String::new();
    };
    if !several && answers[0].1.scalar {
        let rows = &answers[0].1.rows;
        return rows.iter().flatten().map(|c| c.text() + "\n").collect();
    }
    if answers[0].1.record {
        return records(answers, several);
    }
    let mut t = Table::new(columns);
    let mut servers = Vec::new();
    for (server, reply) in answers {
        for row in reply.rows {
            servers.push(server.clone());
            t.row(row.iter().map(Cell::text).collect());
        }
    }
    if several {
        t = t.with_first_column("SERVER", servers);
    }
    t.render()
}

/// One-record answers as `key  value` lines (a `server` line first when
/// there are several servers, a blank line between records); each history
/// entry is a `history` line of its own.
fn records(answers: Vec<(String, Reply)>, several: bool) -> String {
    let mut out = String::new();
    for (server, reply) in answers {
        for row in reply.rows {
            let mut t = Table::new(&[("KEY", false), ("VALUE", false)]);
            if several {
                t.row(vec!["server".into(), server.clone()]);
            }
            for (&(name, _), cell) in reply.columns.iter().zip(&row) {
                match cell {
                    Cell::History(h) => {
                        for line in history_lines(h) {
                            t.row(vec![name.into(), line]);
                        }
                    }
                    Cell::JsonOnly(_) => {}
                    cell => t.row(vec![name.into(), cell.text()]),
                }
            }
            if !out.is_empty() {
                out.push('\n');
            }
            // The header row is not wanted here.
            let text = t.render();
            out.push_str(text.split_once('\n').map_or("", |(_, rest)| rest));
        }
    }
    out
}

/// The answers as a JSON array of row objects.
pub(super) fn json(answers: Vec<(String, Reply)>) -> String {
    let mut rows = Vec::new();
    for (server, reply) in answers {
        for row in reply.rows {
            let mut obj = Map::new();
            obj.insert("server".into(), Value::String(server.clone()));
            for (&(name, _), cell) in reply.columns.iter().zip(row) {
                let key = name.to_ascii_lowercase().replace(' ', "_");
                let value = match (name, cell) {
                    ("RESULT", Cell::Text(_)) => ("ok".to_owned(), Value::Bool(true)),
                    (_, cell) => (key, cell.json()),
                };
                obj.insert(value.0, value.1);
            }
            rows.push(Value::Object(obj));
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Array(rows)).unwrap_or_default();
    text.push('\n');
    text
}
