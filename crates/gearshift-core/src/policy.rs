//! Per-function job policies: retries with backoff, a run timeout the
//! server enforces, how long finished jobs stay queryable, and whether a
//! submission needs a worker. A function no rule matches has no policy and
//! behaves exactly as in gearmand 1.1. The server parses the config file into
//! [`Policies`]; the core only looks them up.

use std::sync::Arc;

use crate::Millis;

/// Why a run ended without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// WORK_FAIL.
    Fail,
    /// WORK_EXCEPTION.
    Exception,
    /// The run passed its time limit.
    Timeout,
    /// The worker disconnected or gave up the function.
    WorkerLost,
}

impl Reason {
    /// The word used in the config file and in history lines.
    pub fn word(self) -> &'static str {
        match self {
            Reason::Fail => "fail",
            Reason::Exception => "exception",
            Reason::Timeout => "timeout",
            Reason::WorkerLost => "worker_lost",
        }
    }

    /// The reason a config word names.
    pub fn from_word(w: &str) -> Option<Reason> {
        [
            Reason::Fail,
            Reason::Exception,
            Reason::Timeout,
            Reason::WorkerLost,
        ]
        .into_iter()
        .find(|r| r.word() == w)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`Reason`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reasons(u8);

impl Reasons {
    /// Every reason.
    pub const ALL: Reasons = Reasons(0b1111);

    /// The set holding `reasons`.
    pub fn of(reasons: &[Reason]) -> Reasons {
        Reasons(reasons.iter().fold(0, |acc, r| acc | r.bit()))
    }

    /// Whether `r` is in the set.
    pub fn contains(self, r: Reason) -> bool {
        self.0 & r.bit() != 0
    }
}

/// How the delay before a retry grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// `initial_delay` every time.
    Fixed,
    /// `initial_delay × 2^(retry − 1)`, capped at `max_delay`.
    Exponential,
}

/// How a CAN_DO_TIMEOUT value is read (see docs/compat.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutUnit {
    /// Values below 1000 are seconds, larger ones milliseconds (the default).
    Auto,
    /// Always seconds (Perl Gearman::Worker, PHP's documented unit).
    Seconds,
    /// Always milliseconds, with gearmand's 1000 ms floor.
    Milliseconds,
}

/// What happens to the jobs of the functions a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Runs in all, the first included; 1 = no retry.
    pub max_attempts: u32,
    /// Which endings are retried (the others are final).
    pub retry_on: Reasons,
    /// How the delay grows.
    pub backoff: Backoff,
    /// Delay before the first retry.
    pub initial_delay: Millis,
    /// Longest delay.
    pub max_delay: Millis,
    /// Spread each delay over ±25 % so retries of a burst do not align.
    pub jitter: bool,
    /// Run time limit the server enforces; overrides CAN_DO_TIMEOUT.
    pub timeout: Option<Millis>,
    /// How long a finished job stays queryable (0 = not kept).
    pub keep_results: Millis,
    /// A submission while no worker can run the function gets ERROR.
    pub require_worker: bool,
    /// How this function's CAN_DO_TIMEOUT values are read.
    pub timeout_unit: TimeoutUnit,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_attempts: 1,
            retry_on: Reasons::of(&[Reason::Fail, Reason::Exception, Reason::Timeout]),
            backoff: Backoff::Exponential,
            initial_delay: 1_000,
            max_delay: 600_000,
            jitter: true,
            timeout: None,
            keep_results: 0,
            require_worker: false,
            timeout_unit: TimeoutUnit::Auto,
        }
    }
}

impl Policy {
    /// Whether an ending for `reason` after `attempts` runs is retried.
    pub fn retries(&self, reason: Reason, attempts: u32) -> bool {
        self.retry_on.contains(reason) && attempts < self.max_attempts
    }

    /// The delay before retry number `retry` (1 for the first) of job `id`.
    /// The jitter is drawn from the job and retry numbers, so the core stays
    /// deterministic on virtual time.
    pub fn delay(&self, id: u64, retry: u32) -> Millis {
        let base = match self.backoff {
            Backoff::Fixed => self.initial_delay,
            Backoff::Exponential => {
                let shift = retry.saturating_sub(1).min(62);
                self.initial_delay.saturating_mul(1 << shift)
            }
        };
        let base = base.min(self.max_delay);
        if !self.jitter || base == 0 {
            return base;
        }
        // ±25 %: base × (0.75 + r/2) with r in [0, 1).
        let r = mix(id ^ (u64::from(retry) << 48)) % 1000;
        let spread = base / 2;
        (base - base / 4)
            .saturating_add(spread.saturating_mul(r) / 1000)
            .min(self.max_delay)
    }
}

/// splitmix64's finaliser: a well-spread hash of one number.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One `[[function]]` section: a glob and the policy it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `*` matches any run of bytes, `?` any one byte; the rest literally.
    pub pattern: String,
    /// The policy of the functions it matches.
    pub policy: Arc<Policy>,
}

/// Limits on what the server keeps of finished jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// How long a dead job is kept before it is dropped.
    pub dead_ttl: Millis,
    /// Most finished jobs kept queryable; the oldest go first past it.
    pub max_kept: usize,
    /// Most dead jobs kept; the oldest go first past it.
    pub max_dead: usize,
    /// Most bytes the kept finished jobs may hold (results, workloads and
    /// [`crate::kept::RECORD_COST`] per record); the earliest to expire
    /// go first past it.
    pub max_kept_bytes: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            dead_ttl: 30 * 24 * 3_600_000,
            max_kept: 100_000,
            max_dead: 100_000,
            max_kept_bytes: 256 << 20,
        }
    }
}

/// Every rule, in file order, and the retention limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    /// First match wins.
    pub rules: Vec<Rule>,
    /// Bounds on kept and dead jobs.
    pub retention: Retention,
}

impl Policies {
    /// The policy of function `name`, if a rule matches it.
    pub fn lookup(&self, name: &[u8]) -> Option<Arc<Policy>> {
        self.rules
            .iter()
            .find(|r| glob_match(r.pattern.as_bytes(), name))
            .map(|r| r.policy.clone())
    }
}

/// Whether `name` matches `pattern` (`*` any run, `?` any one byte).
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name position it is retried from.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Reads a CAN_DO_TIMEOUT value as milliseconds (`None`: no limit).
pub fn can_do_timeout_ms(value: i64, unit: TimeoutUnit) -> Option<Millis> {
    if value <= 0 {
        return None;
    }
    let v = value as u64;
    let ms = match unit {
        TimeoutUnit::Seconds => v.saturating_mul(1000),
        TimeoutUnit::Milliseconds => v,
        TimeoutUnit::Auto if v < 1000 => v.saturating_mul(1000),
        TimeoutUnit::Auto => v,
    };
    Some(ms.max(crate::config::MIN_TIMEOUT_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let m = |p: &str, n: &str| glob_match(p.as_bytes(), n.as_bytes());
        assert!(m("resize_*", "resize_"));
        assert!(m("resize_*", "resize_png"));
        assert!(!m("resize_*", "resiz"));
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("*_mail*", "send_mail_now"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("exact", "exact"));
        assert!(!m("exact", "exactly"));
        assert!(m("**", "x"));
    }

    #[test]
    fn first_rule_wins() {
        let fast = Arc::new(Policy {
            max_attempts: 2,
            ..Policy::default()
        });
        let slow = Arc::new(Policy {
            max_attempts: 9,
            ..Policy::default()
        });
        let p = Policies {
            rules: vec![
                Rule {
                    pattern: "img_fast*".into(),
                    policy: fast.clone(),
                },
                Rule {
                    pattern: "img_*".into(),
                    policy: slow.clone(),
                },
            ],
            ..Policies::default()
        };
        assert_eq!(p.lookup(b"img_fast_png"), Some(fast));
        assert_eq!(p.lookup(b"img_png"), Some(slow));
        assert_eq!(p.lookup(b"mail"), None);
    }

    #[test]
    fn backoff_grows_and_caps() {
        let p = Policy {
            initial_delay: 1_000,
            max_delay: 10_000,
            jitter: false,
            ..Policy::default()
        };
        let d: Vec<_> = (1..=6).map(|r| p.delay(7, r)).collect();
        assert_eq!(d, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
        assert_eq!(p.delay(7, u32::MAX), 10_000);
        let fixed = Policy {
            backoff: Backoff::Fixed,
            ..p.clone()
        };
        assert_eq!(fixed.delay(7, 5), 1_000);
        let jittered = Policy { jitter: true, ..p };
        for id in 0..200 {
            let d = jittered.delay(id, 2);
            assert!((1_500..=2_500).contains(&d), "{d}");
            assert_eq!(d, jittered.delay(id, 2), "deterministic");
        }
        let spread: std::collections::HashSet<_> =
            (0..200).map(|id| jittered.delay(id, 2)).collect();
        assert!(spread.len() > 50, "jitter spreads delays");
    }

    #[test]
    fn retry_needs_reason_and_attempts_left() {
        let p = Policy {
            max_attempts: 3,
            retry_on: Reasons::of(&[Reason::Fail]),
            ..Policy::default()
        };
        assert!(p.retries(Reason::Fail, 1));
        assert!(p.retries(Reason::Fail, 2));
        assert!(!p.retries(Reason::Fail, 3));
        assert!(!p.retries(Reason::Exception, 1));
    }

    #[test]
    fn can_do_timeout_units() {
        use TimeoutUnit::*;
        assert_eq!(can_do_timeout_ms(0, Auto), None);
        assert_eq!(can_do_timeout_ms(-5, Auto), None);
        assert_eq!(can_do_timeout_ms(3, Auto), Some(3_000));
        assert_eq!(can_do_timeout_ms(999, Auto), Some(999_000));
        assert_eq!(can_do_timeout_ms(1000, Auto), Some(1_000));
        assert_eq!(can_do_timeout_ms(30_000, Auto), Some(30_000));
        assert_eq!(can_do_timeout_ms(3, Milliseconds), Some(1_000));
        assert_eq!(can_do_timeout_ms(5000, Seconds), Some(5_000_000));
    }
}
