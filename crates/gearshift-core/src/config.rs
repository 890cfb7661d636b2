//! Settings the core needs, chosen by the server's command line.

/// What the core is told at start.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Handle prefix; handles are `<prefix>:<n>` (gearmand: `H:<hostname>`).
    pub handle_prefix: String,
    /// `--job-retries`: 0 = unlimited (gearmand 1.1), N = fail the job at its N-th requeue.
    pub job_retries: u32,
    /// `--worker-wakeup`: sleeping workers woken per new job; 0 = all.
    pub worker_wakeup: u32,
    /// `--exceptions`: forward WORK_EXCEPTION to every client.
    pub exceptions: bool,
    /// Process id reported by `getpid`.
    pub pid: u32,
    /// Reported by `version`.
    pub version: String,
    /// Log level name reported by `verbose`.
    pub verbose: String,
    /// A durable store backs the core: background jobs are acknowledged
    /// only once [`crate::Core::persisted`] confirms them.
    pub durable: bool,
    /// `--max-queue-memory`: the most bytes of job payloads (unique id,
    /// data and reducer of every job the server holds) before new jobs are
    /// refused; 0 = no cap.
    pub max_job_bytes: u64,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            handle_prefix: "H:localhost".to_owned(),
            job_retries: 0,
            worker_wakeup: 0,
            exceptions: false,
            pid: 0,
            version: concat!("gearshift-", env!("CARGO_PKG_VERSION")).to_owned(),
            verbose: "ERROR".to_owned(),
            durable: false,
            max_job_bytes: 0,
        }
    }
}

/// Longest handle, NUL included (gearmand's `GEARMAND_JOB_HANDLE_SIZE`).
pub const MAX_HANDLE: usize = 64;
/// Longest unique id accepted; longer gets ERROR ARGUMENT_TOO_LARGE.
pub const MAX_UNIQUE: usize = 64;
/// Longest client id kept (gearmand truncates silently).
pub const MAX_CLIENT_ID: usize = 127;
/// CAN_DO_TIMEOUT values below this many milliseconds are raised to it (gearmand does too).
pub const MIN_TIMEOUT_MS: u64 = 1000;

impl CoreConfig {
    /// Checks that every handle this prefix can produce fits in 64 bytes
    /// and is one admin word (`cancel job H` splits on spaces).
    pub fn validate(&self) -> Result<(), String> {
        let prefix = self.handle_prefix.as_bytes();
        if prefix.contains(&b' ') || gearshift_proto::escape::has_control(prefix) {
            return Err(format!(
                "job handle prefix {:?} holds a space or a control character: handles must be one printable word",
                self.handle_prefix
            ));
        }
        // prefix + ':' + up to 20 digits + NUL
        if self.handle_prefix.len() + 1 + 20 + 1 > MAX_HANDLE {
            return Err(format!(
                "job handle prefix {:?} is too long: handles must fit in {MAX_HANDLE} bytes, so the prefix may have at most {} bytes",
                self.handle_prefix,
                MAX_HANDLE - 22
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_prefix(p: &str) -> Result<(), String> {
        CoreConfig {
            handle_prefix: p.to_owned(),
            ..CoreConfig::default()
        }
        .validate()
    }

    #[test]
    fn prefix_must_be_one_printable_word_that_fits() {
        assert!(with_prefix("H:vm").is_ok());
        assert!(with_prefix(&"p".repeat(MAX_HANDLE - 22)).is_ok());
        assert!(with_prefix(&"p".repeat(MAX_HANDLE - 21)).is_err());
        for bad in ["H:a b", "H:a\tb", "H:\n", "H:\u{7f}"] {
            assert!(with_prefix(bad).is_err(), "{bad:?}");
        }
    }
}
