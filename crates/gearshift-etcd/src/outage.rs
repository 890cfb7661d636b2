//! Something the bridge asks for again and again that can be out of reach
//! (etcd, a partitioned node's API): what a try changed, so going and
//! coming back are each logged once, not at every try.

use std::time::{Duration, Instant};

/// Whether, and since when, it is out of reach.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
}

/// What the last try changed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// It answered before and failed now.
    Went,
    /// It answers again, after being out of reach this long.
    Back(Duration),
    /// As before.
    Same,
}

impl Outage {
    /// Notes a try's outcome.
    pub(crate) fn note(&mut self, failed: bool) -> Change {
        match (failed, self.since) {
            (true, None) => {
                self.since = Some(Instant::now());
                Change::Went
            }
            (false, Some(t)) => {
                self.since = None;
                Change::Back(t.elapsed())
            }
            _ => Change::Same,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn going_and_coming_back_are_told_once_each() {
        let mut o = Outage::default();
        assert_eq!(o.note(false), Change::Same);
        assert_eq!(o.note(true), Change::Went);
        assert_eq!(o.note(true), Change::Same);
        assert!(matches!(o.note(false), Change::Back(_)));
        assert_eq!(o.note(false), Change::Same);
    }
}
