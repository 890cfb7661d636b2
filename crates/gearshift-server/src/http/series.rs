//! The overview's charts: once a second the sampler reads the core's
//! totals (one [`Control`] call) and keeps the last 600 samples.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use gearshift_core::view::Totals;

use crate::control::Control;

/// Samples kept: ten minutes at one a second.
pub const SAMPLES: usize = 600;

/// One second of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Sample {
    /// When it was taken, Unix ms.
    pub at_ms: u64,
    /// Queue depth then.
    pub queued: u64,
    /// Jobs running then.
    pub running: u64,
    /// Jobs submitted during the second.
    pub submitted: u64,
    /// Runs completed during it.
    pub completed: u64,
    /// Runs failed during it.
    pub failed: u64,
}

/// The ring of samples.
#[derive(Debug, Default)]
pub struct Series {
    ring: Mutex<VecDeque<Sample>>,
    /// The last totals read, and when (the event stream's `stats`).
    latest: Mutex<Option<(u64, Totals)>>,
}

impl Series {
    /// Adds a sample, forgetting the oldest past [`SAMPLES`].
    pub fn push(&self, s: Sample) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if ring.len() == SAMPLES {
            ring.pop_front();
        }
        ring.push_back(s);
    }

    /// The totals the sampler read last, with their time.
    pub fn latest(&self) -> Option<(u64, Totals)> {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_latest(&self, at_ms: u64, t: Totals) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some((at_ms, t));
    }

    /// Every sample, oldest first.
    pub fn snapshot(&self) -> Vec<Sample> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.iter().copied().collect()
    }
}

/// The sample between two readings of the totals.
pub fn sample(at_ms: u64, prev: &Totals, now: &Totals) -> Sample {
    Sample {
        at_ms,
        queued: now.queued,
        running: now.running,
        submitted: now.submitted.saturating_sub(prev.submitted),
        completed: now.completed.saturating_sub(prev.completed),
        failed: now.failed.saturating_sub(prev.failed),
    }
}

/// Samples once a second until the server stops (a partitioned node's
/// connection counts as [`super::node_totals`] gives them).
pub async fn sample_loop(
    control: Control,
    series: std::sync::Arc<Series>,
    cluster: Option<std::sync::Arc<crate::cluster::view::ClusterView>>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The counters start at zero with the server: the first sample counts
    // what happened before the sampler's first reading too.
    let mut prev = Totals::default();
    loop {
        tick.tick().await;
        let Ok(now) = control.call(|c| c.totals()).await else {
            return;
        };
        let now = super::node_totals(cluster.as_deref(), now);
        let at = crate::clock::unix_ms();
        series.push(sample(at, &prev, &now));
        series.set_latest(at, now);
        prev = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_last_600() {
        let s = Series::default();
        for i in 0..700 {
            s.push(Sample {
                at_ms: i,
                queued: 0,
                running: 0,
                submitted: 0,
                completed: 0,
                failed: 0,
            });
        }
        let v = s.snapshot();
        assert_eq!(v.len(), SAMPLES);
        assert_eq!(v[0].at_ms, 100);
    }

    #[test]
    fn deltas() {
        let a = Totals {
            submitted: 10,
            completed: 5,
            failed: 1,
            ..Totals::default()
        };
        let b = Totals {
            queued: 3,
            submitted: 15,
            completed: 9,
            failed: 1,
            ..Totals::default()
        };
        let s = sample(7, &a, &b);
        assert_eq!((s.queued, s.submitted, s.completed, s.failed), (3, 5, 4, 0));
    }
}
