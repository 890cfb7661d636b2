//! Connection events counted outside the core, for `/metrics`.

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
}

impl ConnCounters {
    /// Adds one to `c`.
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `(idle_closed, output_closed, tls_failed)` now.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.idle_closed.load(Ordering::Relaxed),
            self.output_closed.load(Ordering::Relaxed),
            self.tls_failed.load(Ordering::Relaxed),
        )
    }
}
