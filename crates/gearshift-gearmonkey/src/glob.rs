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
