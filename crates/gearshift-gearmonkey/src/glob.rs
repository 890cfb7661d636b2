//! The `match` globs that choose which functions are bridged: `*` any run
//! of characters, `?` one character, anything else itself.

/// Whether `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative match with one backtrack point (the last `*`).
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Which functions the bridge serves and which of them are routed to
/// GearMonkey workers; a SIGHUP may replace it while the bridge runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// Globs of bridged functions; empty: all.
    pub matches: Vec<String>,
    /// Globs of functions whose Gearman jobs always go to GearMonkey workers.
    pub routed: Vec<String>,
}

impl Routing {
    /// Whether `function` is bridged.
    pub fn bridged(&self, function: &str) -> bool {
        any(&self.matches, function)
    }

    /// Whether `function` is routed to GearMonkey workers.
    pub fn routed(&self, function: &str) -> bool {
        self.routed.iter().any(|p| matches(p, function))
    }
}

/// The globs as a log line shows them (`*` for all).
pub fn shown(patterns: &[String]) -> Vec<String> {
    if patterns.is_empty() {
        vec!["*".to_owned()]
    } else {
        patterns.to_vec()
    }
}

/// Whether any of `patterns` matches (an empty list matches everything).
pub fn any(patterns: &[String], name: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| matches(p, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("resize_*", "resize_png"));
        assert!(matches("resize_*", "resize_"));
        assert!(!matches("resize_*", "resiz"));
        assert!(matches("*", ""));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("*x*y", "axbxy"));
        assert!(!matches("exact", "exactly"));
        assert!(any(&[], "anything"));
        assert!(any(&["a*".into(), "b*".into()], "bee"));
        assert!(!any(&["a*".into()], "bee"));
    }
}
