//! Connection events, and the shared hub's busy time, counted outside the
//! core for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Connections closed or refused by the runtime, by reason.
#[derive(Debug, Default)]
pub struct ConnCounters {
    /// Closed for sending nothing within `--idle-timeout`.
    pub idle_closed: AtomicU64,
    /// Closed because their unwritten output passed the hard cap.
    pub output_closed: AtomicU64,
    /// TLS handshakes that failed or timed out.
    pub tls_failed: AtomicU64,
    /// Links other cluster nodes opened to this one.
    pub links_opened: AtomicU64,
    /// Connections those links carried.
    pub linked_conns: AtomicU64,
    /// Nanoseconds the hub shared by several I/O threads was held: the
    /// serial part of the server's work ([`crate::core_lock`]).
    pub core_busy_nanos: AtomicU64,
    /// Rounds run while holding it.
    pub core_rounds: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Closed for sending nothing within `--idle-timeout`.
    pub idle_closed: u64,
    /// Closed because their unwritten output passed the hard cap.
    pub output_closed: u64,
    /// TLS handshakes that failed or timed out.
    pub tls_failed: u64,
    /// Links other cluster nodes opened to this one.
    pub links_opened: u64,
    /// Connections those links carried.
    pub linked_conns: u64,
    /// Nanoseconds the shared hub was held.
    pub core_busy_nanos: u64,
    /// Rounds run while holding it.
    pub core_rounds: u64,
}

impl ConnCounters {
    /// Adds one to `c`.
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Counts {
        Counts {
            idle_closed: self.idle_closed.load(Ordering::Relaxed),
            output_closed: self.output_closed.load(Ordering::Relaxed),
            tls_failed: self.tls_failed.load(Ordering::Relaxed),
            links_opened: self.links_opened.load(Ordering::Relaxed),
            linked_conns: self.linked_conns.load(Ordering::Relaxed),
            core_busy_nanos: self.core_busy_nanos.load(Ordering::Relaxed),
            core_rounds: self.core_rounds.load(Ordering::Relaxed),
        }
    }
}
