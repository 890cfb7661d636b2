//! Aligned text tables for `gearshift admin`: a header row, columns two
//! spaces apart, numbers right-aligned.

use std::fmt::Write as _;

/// A table being filled.
#[derive(Debug)]
pub struct Table {
    headers: Vec<&'static str>,
    numeric: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; `numeric[i]` right-aligns column `i`.
    pub fn new(columns: &[(&'static str, bool)]) -> Table {
        Table {
            headers: columns.iter().map(|c| c.0).collect(),
            numeric: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are blank, extra ones dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Puts a first column in front (e.g. SERVER when there are several).
    pub fn with_first_column(self, header: &'static str, cells: Vec<String>) -> Table {
        let mut headers = vec![header];
        headers.extend(self.headers);
        let mut numeric = vec![false];
        numeric.extend(self.numeric);
        let rows = cells
            .into_iter()
            .zip(self.rows)
            .map(|(first, row)| {
                let mut r = vec![first];
                r.extend(row);
                r
            })
            .collect();
        Table {
            headers,
            numeric,
            rows,
        }
    }

    /// Renders the table; the last column is not padded.
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let cell = |row: &Vec<String>, i: usize| row.get(i).map_or("", String::as_str).to_owned();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, w) in widths.iter_mut().enumerate() {
                *w = (*w).max(cell(row, i).chars().count());
            }
        }
        let mut out = String::new();
        let header_row: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&header_row).chain(&self.rows) {
            let mut line = String::new();
            for (i, (&width, &numeric)) in widths.iter().zip(&self.numeric).enumerate() {
                let text = cell(row, i);
                let pad = width.saturating_sub(text.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if numeric {
                    let _ = write!(line, "{}{text}", " ".repeat(pad));
                } else if i + 1 == n {
                    line.push_str(&text);
                } else {
                    let _ = write!(line, "{text}{}", " ".repeat(pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns() {
        let mut t = Table::new(&[("FUNCTION", false), ("TOTAL", true), ("NOTE", false)]);
        t.row(vec!["reverse".into(), "12".into(), "x".into()]);
        t.row(vec!["a-much-longer-name".into(), "3".into(), String::new()]);
        assert_eq!(
            t.render(),
            "FUNCTION            TOTAL  NOTE\n\
             reverse                12  x\n\
             a-much-longer-name      3\n"
        );
        let t = t.with_first_column("SERVER", vec!["s1".into(), "s2".into()]);
        assert!(t.render().starts_with("SERVER  FUNCTION"));
    }
}
