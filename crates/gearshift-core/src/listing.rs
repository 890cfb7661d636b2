//! The per-job admin listings (`show jobs`, `show unique jobs`) as plain
//! data. The core only copies out one small row per job (a reference count
//! for a unique, no text); the driver renders the text with
//! [`Listing::render`] (sorting, escaping, number formatting) on its own
//! thread, so listing 100,000 jobs holds up job traffic only for the copy.

use std::io::Write;

use bytes::Bytes;
use gearshift_proto::admin as text;
use gearshift_proto::escape::{self, Sep};

use crate::ids::JobId;

/// One job of `show jobs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Handle number.
    pub id: JobId,
    /// The handle as stored, when a restored job came under another prefix.
    pub foreign: Option<Bytes>,
    /// Requeues so far.
    pub retries: u32,
    /// gearmand's IGNORE_JOB: the result goes nowhere.
    pub ignored: bool,
    /// A background job that is not cancelled.
    pub background: bool,
}

/// A snapshot of the rows of one per-job listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// `show jobs`: handle, retries, ignored, background, one line a job.
    Jobs {
        /// This server's handle prefix.
        prefix: Bytes,
        /// One row a job, in no order.
        rows: Vec<JobRow>,
    },
    /// `show unique jobs`: one unique a line, by handle number.
    Uniques(Vec<(JobId, Bytes)>),
}

impl Listing {
    /// The listing's text, byte for byte as gearmand prints it, rows by
    /// handle number, every client-chosen field escaped.
    pub fn render(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        match &mut self {
            Listing::Jobs { prefix, rows } => {
                rows.sort_unstable_by_key(|r| r.id);
                let mut handle = Vec::new();
                let mut digits = [0; 20];
                for r in rows.iter() {
                    handle.clear();
                    match &r.foreign {
                        Some(h) => handle.extend_from_slice(h),
                        None => {
                            handle.extend_from_slice(prefix);
                            handle.push(b':');
                            handle.extend_from_slice(gearshift_proto::frame::decimal_u64(
                                r.id,
                                &mut digits,
                            ));
                        }
                    }
                    escape::push_field(&mut out, &handle, Sep::Tab);
                    let _ = writeln!(
                        out,
                        "\t{}\t{}\t{}",
                        r.retries,
                        u8::from(r.ignored),
                        u8::from(r.background)
                    );
                }
            }
            Listing::Uniques(rows) => {
                rows.sort_unstable_by_key(|r| r.0);
                for (_, unique) in rows.iter() {
                    escape::push_field(&mut out, unique, Sep::Line);
                    out.push(b'\n');
                }
            }
        }
        out.extend_from_slice(text::LIST_END);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: JobId, foreign: Option<&'static [u8]>, retries: u32) -> JobRow {
        JobRow {
            id,
            foreign: foreign.map(Bytes::from_static),
            retries,
            ignored: false,
            background: true,
        }
    }

    #[test]
    fn jobs_are_listed_by_handle_number_whatever_the_row_order() {
        let listing = Listing::Jobs {
            prefix: Bytes::from_static(b"H:x"),
            rows: vec![
                row(10, None, 0),
                row(2, None, 1),
                row(7, Some(b"H:old:7"), 0),
            ],
        };
        assert_eq!(
            listing.render(),
            b"H:x:2\t1\t0\t1\nH:old:7\t0\t0\t1\nH:x:10\t0\t0\t1\n.\n".to_vec()
        );
    }

    #[test]
    fn a_stored_handle_or_unique_cannot_split_a_line() {
        let jobs = Listing::Jobs {
            prefix: Bytes::from_static(b"H:x"),
            rows: vec![row(1, Some(b"H:a\nforged\t0\t0\t1"), 0)],
        };
        let text = jobs.render();
        assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 2, "{text:?}");
        let uniques = Listing::Uniques(vec![
            (3, Bytes::from_static(b"c")),
            (1, Bytes::from_static(b"a\nb")),
        ]);
        let text = uniques.render();
        assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 3, "{text:?}");
        assert!(text.starts_with(b"a"), "{text:?}");
        assert!(text.ends_with(b"c\n.\n"), "{text:?}");
    }
}
