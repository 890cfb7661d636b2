//! The core's modules import each other without a loop: type modules never
//! reach back to the `Core` handlers, so each file can be read (and
//! changed) knowing only what it imports. Edges are `crate::module` paths
//! in a file's code (not its comments or tests); `lib.rs` is the root.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The modules a source file names through `crate::`.
fn imports(src: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = src.split("#[cfg(test)]").next().unwrap_or_default();
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::X, b};`
            let group = group.split('}').next().unwrap_or_default();
            found.extend(group.split(',').map(|item| word(item.trim())));
        } else {
            found.insert(word(rest));
        }
    }
    found.retain(|m| modules.contains(m));
    found
}

/// A loop in the graph, as the modules along it, if there is one.
fn find_loop(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0 unseen, 1 on the current path, 2 done.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        mark: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        mark.insert(m.to_owned(), 1);
        path.push(m.to_owned());
        for next in &edges[m] {
            match mark.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, edges, mark, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        mark.insert(m.to_owned(), 2);
        None
    }
    let mut mark = BTreeMap::new();
    for m in edges.keys() {
        if mark.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, edges, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_import_loop_inside_the_core() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = BTreeMap::new();
    for entry in fs::read_dir(&dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
        match name {
            Some(name) if path.extension().is_some_and(|e| e == "rs") && name != "lib" => {
                let src = fs::read_to_string(&path).expect("a source file");
                sources.insert(name, src);
            }
            _ => {}
        }
    }
    assert!(sources.len() > 20, "read the core's modules");
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let edges: BTreeMap<String, BTreeSet<String>> = sources
        .iter()
        .map(|(m, src)| {
            let mut to = imports(src, &modules);
            to.remove(m);
            (m.clone(), to)
        })
        .collect();
    let found: usize = edges.values().map(BTreeSet::len).sum();
    assert!(found > 50, "edges are found ({found})");
    if let Some(cycle) = find_loop(&edges) {
        panic!("import loop in the core: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_loop_check_sees_a_loop() {
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let a = imports("use crate::{b::X, c};\n// crate::a\n", &modules);
    assert_eq!(a, ["b", "c"].map(String::from).into());
    let edges = BTreeMap::from([
        ("a".to_owned(), a),
        ("b".to_owned(), imports("x(crate::c::f())", &modules)),
        ("c".to_owned(), imports("use crate::a::Y;", &modules)),
    ]);
    assert!(find_loop(&edges).is_some());
}
