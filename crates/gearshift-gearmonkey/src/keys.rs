//! GearMonkey's key layout (seed 003) and the keys Gearshift adds beside it,
//! plus the parsing of what is read back: job ids and priorities.

use gearshift_proto::Priority;

/// `queue:{FN}:{PRIO}` for high, normal or low.
pub fn queue(function: &str, prio: Prio) -> String {
    format!("queue:{function}:{}", prio.word())
}

/// `job:{FN}:{ID}`: the job hash.
pub fn job(function: &str, id: u64) -> String {
    format!("job:{function}:{id}")
}

/// `lock:{FN}:{ID}`: the list a blocking client BRPOPs.
pub fn lock(function: &str, id: u64) -> String {
    format!("lock:{function}:{id}")
}

/// `channel:{FN}`: create/start/finish events.
pub fn channel(function: &str) -> String {
    format!("channel:{function}")
}

/// `count:{FN}`: the roll call.
pub fn count(function: &str) -> String {
    format!("count:{function}")
}

/// `uid:{FN}`: the id counter.
pub fn uid(function: &str) -> String {
    format!("uid:{function}")
}

/// Gearshift's own: jobs taken from a queue and not finished yet, as
/// `{PRIO}:{ID}` entries, so a restart can put them back.
pub fn processing(function: &str) -> String {
    format!("{PROCESSING_PREFIX}{function}")
}

/// The prefix of every processing list (for the recovery scan).
pub const PROCESSING_PREFIX: &str = "gearshift:processing:";

/// Gearshift's own: each instance's share of `count:{FN}`, a hash of
/// instance -> workers.
pub fn shares(function: &str) -> String {
    format!("gearshift:shares:{function}")
}

/// The functions with a share in their roll call (a set), so the heartbeat
/// finds them without a SCAN.
pub const SHARED_FUNCTIONS: &str = "gearshift:shared";

/// Gearshift's own: set while an instance runs, with a time to live its
/// heartbeat refreshes.
pub fn alive(instance: &str) -> String {
    format!("{ALIVE_PREFIX}{instance}")
}

/// The prefix of every liveness key.
pub const ALIVE_PREFIX: &str = "gearshift:alive:";

/// A bridge before per-instance shares: how much it added to `count:{FN}`
/// (taken out at start).
pub fn added(function: &str) -> String {
    format!("{ADDED_PREFIX}{function}")
}

/// The prefix of every `added` key.
pub const ADDED_PREFIX: &str = "gearshift:count:";

/// Gearshift's own: the GearMonkey id a Gearman job (by handle) was given
/// as, so a job handed out again after a restart is not written twice.
pub fn given(function: &str, handle: &str) -> String {
    format!("gearshift:given:{function}:{handle}")
}

/// Gearshift's own: queue entries it could not run (not an integer, no
/// job hash), kept rather than dropped so nothing is lost.
pub fn rejected(function: &str) -> String {
    format!("gearshift:rejected:{function}")
}

/// A GearMonkey priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prio {
    /// `queue:{FN}:high`
    High,
    /// `queue:{FN}:normal`
    Normal,
    /// `queue:{FN}:low`
    Low,
    /// `queue:{FN}:scheduled`, a sorted set scored by due time.
    Scheduled,
}

impl Prio {
    /// The word in the key.
    pub fn word(self) -> &'static str {
        match self {
            Prio::High => "high",
            Prio::Normal => "normal",
            Prio::Low => "low",
            Prio::Scheduled => "scheduled",
        }
    }

    /// Parses the word.
    pub fn parse(word: &str) -> Option<Prio> {
        Some(match word {
            "high" => Prio::High,
            "normal" => Prio::Normal,
            "low" => Prio::Low,
            "scheduled" => Prio::Scheduled,
            _ => return None,
        })
    }

    /// The Gearman priority a job of this queue runs at (a due scheduled
    /// job runs at normal).
    pub fn gearman(self) -> Priority {
        match self {
            Prio::High => Priority::High,
            Prio::Low => Priority::Low,
            Prio::Normal | Prio::Scheduled => Priority::Normal,
        }
    }
}

/// A job id as read from a queue: a non-negative integer, nothing else.
pub fn parse_id(raw: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(raw).ok()?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A processing-list entry `{PRIO}:{ID}` back into its parts; the id part
/// stays raw so an entry that named a bad id can still be put back.
pub fn parse_entry(raw: &[u8]) -> Option<(Prio, &[u8])> {
    let colon = raw.iter().position(|&b| b == b':')?;
    let prio = Prio::parse(std::str::from_utf8(&raw[..colon]).ok()?)?;
    Some((prio, &raw[colon + 1..]))
}

/// The unique id of the Gearshift job for a GearMonkey job, so a job taken
/// twice (after a restart) coalesces, and `show job` says whose it is.
pub fn unique(function: &str, id: u64) -> String {
    format!("gearmonkey:{function}:{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_layout_matches_the_seed() {
        assert_eq!(queue("resize", Prio::High), "queue:resize:high");
        assert_eq!(queue("resize", Prio::Scheduled), "queue:resize:scheduled");
        assert_eq!(job("resize", 7), "job:resize:7");
        assert_eq!(lock("resize", 7), "lock:resize:7");
        assert_eq!(channel("resize"), "channel:resize");
        assert_eq!(count("resize"), "count:resize");
        assert_eq!(uid("resize"), "uid:resize");
        assert_eq!(processing("resize"), "gearshift:processing:resize");
        assert_eq!(unique("resize", 7), "gearmonkey:resize:7");
        assert_eq!(shares("resize"), "gearshift:shares:resize");
        assert_eq!(alive("h:/d"), "gearshift:alive:h:/d");
    }

    #[test]
    fn ids_are_plain_integers() {
        assert_eq!(parse_id(b"42"), Some(42));
        assert_eq!(parse_id(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"-1",
            b"4.2",
            b" 42",
            b"x",
            b"\xff",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn processing_entries_round_trip() {
        assert_eq!(parse_entry(b"high:12"), Some((Prio::High, &b"12"[..])));
        assert_eq!(
            parse_entry(b"scheduled:x"),
            Some((Prio::Scheduled, &b"x"[..]))
        );
        assert_eq!(parse_entry(b"urgent:12"), None);
        assert_eq!(parse_entry(b"12"), None);
    }

    #[test]
    fn priorities_map_to_gearman() {
        assert_eq!(Prio::High.gearman(), Priority::High);
        assert_eq!(Prio::Scheduled.gearman(), Priority::Normal);
        assert_eq!(Prio::parse("low"), Some(Prio::Low));
        assert_eq!(Prio::parse("LOW"), None);
    }
}
