//! Event counters for programs built on this library (Gearshift's bridges):
//! [`event_counters!`](crate::event_counters) declares a struct of named
//! `AtomicU64`s that renders as one log line and as one Prometheus counter
//! family `NAME{event="..."}`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Adds one to `counter`.
pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// `name=value` pairs, space-separated, for a log line.
pub fn line(named: &[(&str, &AtomicU64)]) -> String {
    let mut out = String::new();
    for (i, (n, c)) in named.iter().enumerate() {
        let sep = if i == 0 { "" } else { " " };
        let _ = write!(out, "{sep}{n}={}", c.load(Ordering::Relaxed));
    }
    out
}

/// One Prometheus counter family: HELP, TYPE, a sample per event.
pub fn prometheus(out: &mut String, family: &str, help: &str, named: &[(&str, &AtomicU64)]) {
    let _ = writeln!(out, "# HELP {family} {help}");
    let _ = writeln!(out, "# TYPE {family} counter");
    for (event, c) in named {
        let _ = writeln!(
            out,
            "{family}{{event=\"{event}\"}} {}",
            c.load(Ordering::Relaxed)
        );
    }
}

/// Declares `Stats`, a struct of documented event counters, with `bump`,
/// `line` (for logs) and `prometheus` (the family `$family`, described by
/// `$help`).
///
/// ```
/// gearshift_client::event_counters! {
///     "demo_total", "Demo events.";
///     taken: "Jobs taken.",
///     failed: "Calls that failed.",
/// }
/// let s = Stats::default();
/// Stats::bump(&s.failed);
/// assert_eq!(s.line(), "taken=0 failed=1");
/// let mut out = String::new();
/// s.prometheus(&mut out);
/// assert!(out.contains("demo_total{event=\"failed\"} 1\n"));
/// ```
#[macro_export]
macro_rules! event_counters {
    ($family:literal, $help:literal; $($name:ident: $doc:literal),* $(,)?) => {
        /// Counters shared by the bridge's tasks.
        #[derive(Debug, Default)]
        pub struct Stats {
            $(#[doc = $doc] pub $name: ::std::sync::atomic::AtomicU64,)*
        }

        impl Stats {
            /// Each counter with its event name.
            fn named(&self) -> Vec<(&'static str, &::std::sync::atomic::AtomicU64)> {
                vec![$((stringify!($name), &self.$name)),*]
            }

            /// Adds one to `counter`.
            pub fn bump(counter: &::std::sync::atomic::AtomicU64) {
                $crate::counters::bump(counter)
            }

            /// One line for the log.
            pub fn line(&self) -> String {
                $crate::counters::line(&self.named())
            }

            /// Every counter as Prometheus text.
            pub fn prometheus(&self, out: &mut String) {
                $crate::counters::prometheus(out, $family, $help, &self.named())
            }
        }
    };
}
