//! `GET /metrics` on a partitioned node: every partition owner's
//! exposition joined into one. A function's series come from its owner;
//! node-wide series (connections, commits, counters) are added up across
//! nodes, histograms bucket by bucket; an `_info`-style series (always 1)
//! is not added up. Two series say how many nodes answered.

use std::fmt::Write;

/// One family: its `# HELP`/`# TYPE` lines and its samples in order.
#[derive(Debug, Default)]
struct Family {
    name: String,
    head: Vec<String>,
    /// (name and labels, value), as written.
    samples: Vec<(String, String)>,
}

/// A whole exposition, family by family in the order first seen.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// Reads Prometheus text; lines it does not understand are dropped.
    pub fn parse(text: &str) -> Exposition {
        let mut e = Exposition::default();
        for line in text.lines() {
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
            {
                let name = rest.split(' ').next().unwrap_or("");
                let i = e.family(name);
                e.families[i].head.push(line.to_owned());
            } else if let Some((series, value)) = line.rsplit_once(' ') {
                if line.starts_with('#') || series.is_empty() {
                    continue;
                }
                let bare = series.split('{').next().unwrap_or(series);
                let i = e.owning_family(bare);
                e.families[i]
                    .samples
                    .push((series.to_owned(), value.to_owned()));
            }
        }
        e
    }

    /// The index of family `name`, added if new.
    fn family(&mut self, name: &str) -> usize {
        if let Some(i) = self.families.iter().position(|f| f.name == name) {
            return i;
        }
        self.families.push(Family {
            name: name.to_owned(),
            ..Family::default()
        });
        self.families.len() - 1
    }

    /// The family a sample named `bare` belongs to (a histogram's
    /// `_bucket`, `_sum` and `_count` belong to the histogram).
    fn owning_family(&mut self, bare: &str) -> usize {
        for suffix in ["", "_bucket", "_sum", "_count"] {
            if let Some(base) = bare.strip_suffix(suffix) {
                if let Some(i) = self.families.iter().position(|f| f.name == base) {
                    return i;
                }
            }
        }
        self.family(bare)
    }

    /// Adds another node's exposition to this one.
    pub fn add(&mut self, other: Exposition) {
        for theirs in other.families {
            let i = self.family(&theirs.name);
            let mine = &mut self.families[i];
            if mine.head.is_empty() {
                mine.head = theirs.head;
            }
            let info = is_info(&mine.name);
            for (series, value) in theirs.samples {
                match mine.samples.iter_mut().find(|(s, _)| *s == series) {
                    Some((_, v)) if info => *v = max(v, &value),
                    Some((_, v)) => *v = sum(v, &value),
                    None => mine.samples.push((series, value)),
                }
            }
        }
    }

    /// The joined exposition, with how many nodes answered and how many
    /// did not.
    pub fn render(&self, answered: usize, unreachable: usize) -> String {
        let mut out = String::new();
        for f in &self.families {
            for h in &f.head {
                out.push_str(h);
                out.push('\n');
            }
            for (s, v) in &f.samples {
                let _ = writeln!(out, "{s} {v}");
            }
        }
        let name = "gearshift_cluster_scrape_nodes";
        let _ = writeln!(
            out,
            "# HELP {name} Partition owners whose metrics this answer joins, or that did not answer."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name}{{state=\"answered\"}} {answered}");
        let _ = writeln!(out, "{name}{{state=\"unreachable\"}} {unreachable}");
        out
    }
}

/// A family whose samples say what runs (always 1), not how much.
fn is_info(name: &str) -> bool {
    name.ends_with("_info") || name == "gearman_up"
}

/// `a + b`, exact for integers.
fn sum(a: &str, b: &str) -> String {
    if let (Ok(x), Ok(y)) = (a.parse::<u64>(), b.parse::<u64>()) {
        return x.saturating_add(y).to_string();
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x + y).to_string(),
        _ => a.to_owned(),
    }
}

fn max(a: &str, b: &str) -> String {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if y > x => b.to_owned(),
        _ => a.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "\
# HELP gearshift_jobs_running Jobs held by workers.
# TYPE gearshift_jobs_running gauge
gearshift_jobs_running{function=\"a\"} 2
# HELP gearshift_connections Open connections by role.
# TYPE gearshift_connections gauge
gearshift_connections{role=\"client\"} 3
# HELP gearshift_store_commit_seconds Latency.
# TYPE gearshift_store_commit_seconds histogram
gearshift_store_commit_seconds_bucket{le=\"0.001\"} 4
gearshift_store_commit_seconds_bucket{le=\"+Inf\"} 5
gearshift_store_commit_seconds_sum 0.25
gearshift_store_commit_seconds_count 5
# HELP gearshift_build_info The running version (always 1).
# TYPE gearshift_build_info gauge
gearshift_build_info{version=\"1\"} 1
gearman_up 1
";

    const B: &str = "\
# HELP gearshift_jobs_running Jobs held by workers.
# TYPE gearshift_jobs_running gauge
gearshift_jobs_running{function=\"b\"} 7
# HELP gearshift_connections Open connections by role.
# TYPE gearshift_connections gauge
gearshift_connections{role=\"client\"} 4
# HELP gearshift_store_commit_seconds Latency.
# TYPE gearshift_store_commit_seconds histogram
gearshift_store_commit_seconds_bucket{le=\"0.001\"} 1
gearshift_store_commit_seconds_bucket{le=\"+Inf\"} 2
gearshift_store_commit_seconds_sum 0.5
gearshift_store_commit_seconds_count 2
# HELP gearshift_bridge_x Only here.
# TYPE gearshift_bridge_x counter
gearshift_bridge_x 9
# HELP gearshift_build_info The running version (always 1).
# TYPE gearshift_build_info gauge
gearshift_build_info{version=\"1\"} 1
gearman_up 1
";

    #[test]
    fn functions_are_joined_and_node_series_added_up() {
        let mut e = Exposition::parse(A);
        e.add(Exposition::parse(B));
        let out = e.render(2, 1);
        let expect = "\
# HELP gearshift_jobs_running Jobs held by workers.
# TYPE gearshift_jobs_running gauge
gearshift_jobs_running{function=\"a\"} 2
gearshift_jobs_running{function=\"b\"} 7
# HELP gearshift_connections Open connections by role.
# TYPE gearshift_connections gauge
gearshift_connections{role=\"client\"} 7
# HELP gearshift_store_commit_seconds Latency.
# TYPE gearshift_store_commit_seconds histogram
gearshift_store_commit_seconds_bucket{le=\"0.001\"} 5
gearshift_store_commit_seconds_bucket{le=\"+Inf\"} 7
gearshift_store_commit_seconds_sum 0.75
gearshift_store_commit_seconds_count 7
# HELP gearshift_build_info The running version (always 1).
# TYPE gearshift_build_info gauge
gearshift_build_info{version=\"1\"} 1
gearman_up 1
# HELP gearshift_bridge_x Only here.
# TYPE gearshift_bridge_x counter
gearshift_bridge_x 9
";
        assert!(out.starts_with(expect), "{out}");
        assert!(out.contains("gearshift_cluster_scrape_nodes{state=\"answered\"} 2\n"));
        assert!(out.contains("gearshift_cluster_scrape_nodes{state=\"unreachable\"} 1\n"));
    }

    #[test]
    fn a_label_value_with_spaces_keeps_its_series() {
        let text = "# TYPE m gauge\nm{function=\"a b\"} 1\n";
        let mut e = Exposition::parse(text);
        e.add(Exposition::parse(text));
        assert!(e.render(2, 0).contains("m{function=\"a b\"} 2\n"));
    }
}
