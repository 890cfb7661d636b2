//! How the nodes' parts of one JSON API answer become one
//! ([`super::fanout`]): lists joined, numbers added up, pages merged by id,
//! a worker's entries on several owners made one, charts added up by second.

use serde_json::Value;

/// Adds another node's list `key` to `merged` (and its `epoch_total`).
pub(super) fn join_lists(key: &str, merged: &mut Value, part: &Value) {
    if let (Some(Value::Array(all)), Some(Value::Array(more))) =
        (merged.get_mut(key), part.get(key))
    {
        all.extend(more.iter().cloned());
    }
    if let (Some(Value::Number(a)), Some(Value::Number(b))) =
        (merged.get("epoch_total"), part.get("epoch_total"))
    {
        let n = a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0);
        merged["epoch_total"] = Value::from(n);
    }
}

/// Joins every node's functions, each listed once: from the node the view
/// names as its owner (an old owner can keep an empty entry a beat after a
/// move), else from the first node that lists it. A name shown lossily
/// (not UTF-8) cannot be placed, so each such entry stays.
pub(super) fn merge_functions(
    merged: &mut Value,
    parts: Vec<(Option<String>, Value)>,
    owner_of: impl Fn(&str) -> Option<String>,
) {
    let mut all: Vec<(Option<String>, Value)> = Vec::new();
    for (node, mut part) in parts {
        let Value::Array(list) = part["functions"].take() else {
            continue;
        };
        for f in list {
            let name = match f["name"].as_str() {
                Some(n) if !n.contains(char::REPLACEMENT_CHARACTER) => n.to_owned(),
                _ => {
                    all.push((node.clone(), f));
                    continue;
                }
            };
            let owned = node.is_some() && owner_of(&name) == node;
            match all
                .iter_mut()
                .find(|(_, v)| v["name"].as_str() == Some(&name))
            {
                Some(first) if owned => *first = (node.clone(), f),
                Some(_) => {}
                None => all.push((node.clone(), f)),
            }
        }
    }
    merged["functions"] = Value::Array(all.into_iter().map(|(_, f)| f).collect());
}

/// Adds another node's numbers under `keys` to `merged`, and joins the
/// overview's `series` second by second.
pub(super) fn join_sums(keys: &[&str], merged: &mut Value, part: &Value) {
    for key in keys {
        if let Some(b) = part.get(*key) {
            add(&mut merged[*key], b);
        }
    }
    if let (Some(Value::Array(mine)), Some(Value::Array(theirs))) =
        (merged.get_mut("series"), part.get("series"))
    {
        merge_series(mine, theirs);
    }
}

/// The page size a list request asks for (as the handlers read it).
pub(super) fn page_limit(path_and_query: &str) -> usize {
    let query = path_and_query.split_once('?').map(|(_, q)| q);
    let limit = crate::http::api::query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| std::str::from_utf8(&v).ok()?.parse::<usize>().ok());
    limit
        .unwrap_or(100)
        .clamp(1, gearshift_core::view::MAX_PAGE)
}

/// Merges every node's page after the same cursor (ids are unique across
/// nodes) into one: the items up to the first point some node has not
/// looked past yet, by id, `limit` at most; `next_cursor` goes on from there.
pub(super) fn merge_pages(key: &str, limit: usize, merged: &mut Value, parts: Vec<Value>) {
    let mut pages = vec![std::mem::take(merged)];
    pages.extend(parts);
    let mut items: Vec<Value> = Vec::new();
    // How far every node has looked: the least of their next cursors.
    let mut bound: Option<u64> = None;
    for page in &mut pages {
        if let Some(Value::Array(list)) = page.get_mut(key) {
            items.append(list);
        }
        let next = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .and_then(|c| c.parse::<u64>().ok());
        if let Some(n) = next {
            bound = Some(bound.map_or(n, |b| b.min(n)));
        }
    }
    let id = |v: &Value| v.get("id").and_then(Value::as_u64).unwrap_or(u64::MAX);
    items.retain(|v| bound.is_none_or(|b| id(v) <= b));
    items.sort_by_key(id);
    let mut next = bound;
    if items.len() > limit {
        items.truncate(limit);
        next = items.last().map(id);
    }
    let mut out = std::mem::take(&mut pages[0]);
    out[key] = Value::Array(items);
    out["next_cursor"] = next.map_or(Value::Null, |n| Value::String(n.to_string()));
    *merged = out;
}

/// `a += b` for numbers, field by field for objects of numbers (times:
/// [`latest`]).
fn add(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if k.ends_with("_ms") {
                    latest(a.entry(k.clone()).or_insert(Value::Null), v);
                } else {
                    add(a.entry(k.clone()).or_insert(Value::from(0)), v);
                }
            }
        }
        (a @ Value::Number(_), Value::Number(b)) => {
            let n = a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0);
            *a = Value::from(n);
        }
        _ => {}
    }
}

/// A time (`*_ms`, or `null` for never) is not added up: the latest wins.
fn latest(a: &mut Value, b: &Value) {
    if b.as_u64() > a.as_u64() {
        *a = b.clone();
    }
}

/// Joins every node's workers, one entry per connection: a worker whose
/// functions live on several owners has a sub-connection on each, all
/// named by the node it reached and its address and port there.
pub(super) fn merge_workers(merged: &mut Value, parts: Vec<Value>) {
    let mut all: Vec<Value> = Vec::new();
    let lists = std::iter::once(std::mem::take(
        merged.get_mut("workers").unwrap_or(&mut Value::Null),
    ))
    .chain(parts.into_iter().map(|mut p| p["workers"].take()));
    for list in lists {
        let Value::Array(list) = list else { continue };
        for w in list {
            let key = |v: &Value| match (&v["node"], &v["address"], v["port"].as_u64()) {
                (Value::String(n), Value::String(a), Some(p)) => Some((n.clone(), a.clone(), p)),
                _ => None,
            };
            let same = key(&w).and_then(|k| all.iter_mut().find(|v| key(v).as_ref() == Some(&k)));
            match same {
                Some(first) => fold_worker(first, &w),
                None => all.push(w),
            }
        }
    }
    merged["workers"] = Value::Array(all);
}

/// Adds a worker's entry on another owner to its first one.
fn fold_worker(first: &mut Value, other: &Value) {
    for key in ["functions", "running"] {
        if let (Some(Value::Array(a)), Some(Value::Array(b))) = (first.get_mut(key), other.get(key))
        {
            for x in b {
                if !a.contains(x) {
                    a.push(x.clone());
                }
            }
        }
    }
    for key in ["jobs_done", "jobs_failed"] {
        add(&mut first[key], &other[key]);
    }
    let pick = |a: &Value, b: &Value, earliest: bool| match (a.as_u64(), b.as_u64()) {
        (Some(x), Some(y)) => Value::from(if earliest { x.min(y) } else { x.max(y) }),
        _ => a.clone(),
    };
    first["connected_ms"] = pick(&first["connected_ms"], &other["connected_ms"], true);
    first["last_seen_ms"] = pick(&first["last_seen_ms"], &other["last_seen_ms"], false);
    if first["stats"].is_null() {
        first["stats"] = other["stats"].clone();
    }
}

/// Adds another node's chart samples to `mine`, second by second (each
/// node samples on its own clock), keeping the last
/// [`super::series::SAMPLES`] seconds.
fn merge_series(mine: &mut Vec<Value>, theirs: &[Value]) {
    let mut by_second: std::collections::BTreeMap<u64, Value> = std::collections::BTreeMap::new();
    for s in mine.drain(..).chain(theirs.iter().cloned()) {
        let Some(at) = s["at_ms"].as_u64() else {
            continue;
        };
        let second = at / 1000;
        match by_second.get_mut(&second) {
            Some(sum) => {
                for key in ["queued", "running", "submitted", "completed", "failed"] {
                    add(&mut sum[key], &s[key]);
                }
            }
            None => {
                let mut s = s;
                s["at_ms"] = Value::from(second * 1000);
                by_second.insert(second, s);
            }
        }
    }
    let skip = by_second.len().saturating_sub(super::series::SAMPLES);
    mine.extend(by_second.into_values().skip(skip));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pages_merge_by_id_up_to_what_every_node_has_seen() {
        let mut a = json!({"jobs": [{"id": 1}, {"id": 9}], "next_cursor": null});
        let b = json!({"jobs": [{"id": 4}, {"id": 6}], "next_cursor": "6"});
        let c = json!({"jobs": [{"id": 2}], "next_cursor": null});
        merge_pages("jobs", 10, &mut a, vec![b.clone(), c.clone()]);
        // 9 waits: node b has not looked past 6 yet.
        assert_eq!(
            a,
            json!({"jobs": [{"id": 1}, {"id": 2}, {"id": 4}, {"id": 6}], "next_cursor": "6"})
        );
        let mut a = json!({"jobs": [{"id": 1}, {"id": 9}], "next_cursor": null});
        merge_pages("jobs", 2, &mut a, vec![b, c]);
        assert_eq!(
            a,
            json!({"jobs": [{"id": 1}, {"id": 2}], "next_cursor": "2"})
        );
        let mut end = json!({"dead": [], "next_cursor": null});
        merge_pages(
            "dead",
            5,
            &mut end,
            vec![json!({"dead": [{"id": 3}], "next_cursor": null})],
        );
        assert_eq!(end, json!({"dead": [{"id": 3}], "next_cursor": null}));
        assert_eq!(page_limit("/api/v1/jobs?limit=3&cursor=9"), 3);
        assert_eq!(page_limit("/api/v1/jobs"), 100);
    }

    #[test]
    fn parts_are_joined_and_summed() {
        let mut a = json!({"functions": [{"name": "a"}], "x": 1});
        join_lists(
            "functions",
            &mut a,
            &json!({"functions": [{"name": "b"}], "x": 5}),
        );
        assert_eq!(
            a,
            json!({"functions": [{"name": "a"}, {"name": "b"}], "x": 1})
        );
        let mut o = json!({"totals": {"queued": 2, "dead": 1}, "version": "v"});
        join_sums(
            &["totals"],
            &mut o,
            &json!({"totals": {"queued": 3, "dead": 0}, "version": "w"}),
        );
        assert_eq!(
            o,
            json!({"totals": {"queued": 5, "dead": 1}, "version": "v"})
        );
        // A time is the latest of the nodes', not their sum; null is never.
        let store = |f: u64, at: Value| json!({"store": {"failures": f, "last_failure_ms": at}});
        let mut o = store(0, Value::Null);
        join_sums(&["store"], &mut o, &store(2, json!(1_000)));
        join_sums(&["store"], &mut o, &store(1, json!(700)));
        join_sums(&["store"], &mut o, &store(0, Value::Null));
        assert_eq!(o, store(3, json!(1_000)));
    }
    #[test]
    fn a_function_is_listed_once_from_its_owner() {
        let f = |name: &str, queued: u64| json!({"name": name, "queued": {"normal": queued}});
        let mut merged = json!({"functions": []});
        let parts = vec![
            (
                Some("a".to_owned()),
                json!({"functions": [f("moved", 0), f("mine", 1), f("bad\u{fffd}", 1)]}),
            ),
            (
                Some("b".to_owned()),
                json!({"functions": [f("moved", 7), f("bad\u{fffd}", 2)]}),
            ),
            (None, json!({"functions": [f("unplaced", 3), f("mine", 9)]})),
        ];
        let owner = |n: &str| match n {
            "moved" => Some("b".to_owned()),
            "mine" => Some("a".to_owned()),
            _ => None,
        };
        merge_functions(&mut merged, parts, owner);
        let got: Vec<(String, u64)> = merged["functions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                let name = f["name"].as_str().unwrap_or_default().to_owned();
                (name, f["queued"]["normal"].as_u64().unwrap_or(u64::MAX))
            })
            .collect();
        let want = [
            ("moved", 7),
            ("mine", 1),
            ("bad\u{fffd}", 1),
            ("bad\u{fffd}", 2),
            ("unplaced", 3),
        ];
        let want: Vec<(String, u64)> = want.iter().map(|(n, q)| (n.to_string(), *q)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_worker_on_several_owners_is_listed_once() {
        let w = |fs: Value, run: Value, done: u64, conn: u64| {
            json!({"id": 1, "node": "a", "address": "127.0.0.1", "port": 5000, "functions": fs,
                   "running": run, "jobs_done": done, "jobs_failed": 0,
                   "connected_ms": conn, "last_seen_ms": conn + 5, "stats": null})
        };
        let mut merged = json!({"workers": [w(json!(["f"]), json!([]), 2, 100)]});
        let other = json!({"address": "127.0.0.1", "port": 5000, "node": "b", "functions": ["f"]});
        merge_workers(
            &mut merged,
            vec![
                json!({"workers": [w(json!(["g"]), json!(["H:b:9"]), 3, 90)]}),
                json!({"workers": [other.clone()]}),
            ],
        );
        let list = merged["workers"].as_array().cloned().unwrap_or_default();
        assert_eq!(list.len(), 2, "{list:?}");
        assert_eq!(list[0]["functions"], json!(["f", "g"]));
        assert_eq!(list[0]["running"], json!(["H:b:9"]));
        assert_eq!(list[0]["jobs_done"], json!(5));
        assert_eq!(list[0]["connected_ms"], json!(90));
        assert_eq!(list[0]["last_seen_ms"], json!(105));
        assert_eq!(list[1], other);
    }

    #[test]
    fn chart_samples_add_up_by_second() {
        let s = |at: u64, q: u64, sub: u64| json!({"at_ms": at, "queued": q, "running": 0, "submitted": sub, "completed": 0, "failed": 0});
        let mut mine = vec![s(1_000, 1, 2), s(2_000, 1, 0)];
        merge_series(&mut mine, &[s(1_400, 5, 1), s(3_100, 2, 2)]);
        assert_eq!(mine, vec![s(1_000, 6, 3), s(2_000, 1, 0), s(3_000, 2, 2)]);
        let mut long: Vec<Value> = (0..super::super::series::SAMPLES as u64)
            .map(|i| s(i * 1000, 0, 0))
            .collect();
        merge_series(&mut long, &[s(5_000_000, 1, 1)]);
        assert_eq!(long.len(), super::super::series::SAMPLES);
        assert_eq!(long.last(), Some(&s(5_000_000, 1, 1)));
    }
}
