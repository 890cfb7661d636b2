//! Schedule records ([`Schedule`]) and their cron lines (minute, hour, day
//! of month, month, day of week) with the next time one fires, in UTC.
//! Each field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`,
//! or a comma-separated list of those. As in cron,
//! when both day fields are restricted a day matching either fires.

use std::collections::BTreeMap;

use bytes::Bytes;
use gearshift_proto::Priority;

use gearshift_persist::ScheduleRecord;

use crate::effect::priority_byte;
use crate::ids::JobId;
use crate::Millis;

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;
/// How far ahead a next firing is looked for (a line such as `0 0 30 2 *`
/// never fires).
const HORIZON_DAYS: u64 = 5 * 366;

/// A parsed cron line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    /// Bit 0 = Sunday.
    weekdays: u8,
    days_star: bool,
    weekdays_star: bool,
}

/// Which day numbering the day-of-week field uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weekdays {
    /// Cron's: 0 (or 7) = Sunday.
    SundayZero,
    /// The Gearman protocol's SUBMIT_JOB_SCHED: 0 = Monday.
    MondayZero,
}

fn field(text: &str, lo: u32, hi: u32, name: &str) -> Result<(u64, bool), String> {
    let bad = |why: &str| format!("{name} field {text:?}: {why}");
    if text.is_empty() {
        return Err(bad("empty"));
    }
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| bad("the step is not a number"))?;
                if step == 0 {
                    return Err(bad("a step of 0"));
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            let a: u32 = a.parse().map_err(|_| bad("not a number"))?;
            let b: u32 = b.parse().map_err(|_| bad("not a number"))?;
            (a, b)
        } else {
            let a: u32 = range.parse().map_err(|_| bad("not a number"))?;
            if step != 1 {
                return Err(bad("a step needs `*` or a range before it"));
            }
            (a, a)
        };
        if a < lo || b > hi || a > b {
            return Err(bad(&format!("outside {lo}-{hi}")));
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, text == "*"))
}

impl Cron {
    /// Parses the five fields, with the day-of-week numbering given.
    pub fn parse(fields: [&str; 5], weekdays: Weekdays) -> Result<Cron, String> {
        let (minutes, _) = field(fields[0], 0, 59, "minute")?;
        let (hours, _) = field(fields[1], 0, 23, "hour")?;
        let (days, days_star) = field(fields[2], 1, 31, "day of month")?;
        let (months, _) = field(fields[3], 1, 12, "month")?;
        let (dow, weekdays_star) = match weekdays {
            Weekdays::SundayZero => field(fields[4], 0, 7, "day of week")?,
            Weekdays::MondayZero => field(fields[4], 0, 6, "day of week")?,
        };
        let sunday_based = match weekdays {
            // 7 is Sunday too.
            Weekdays::SundayZero => (dow | (dow >> 7)) & 0x7f,
            // Monday = 0 → Sunday-based: rotate left by one.
            Weekdays::MondayZero => ((dow << 1) | (dow >> 6)) & 0x7f,
        };
        Ok(Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: sunday_based as u8,
            days_star,
            weekdays_star,
        })
    }

    /// Parses a cron line of five space-separated fields (0 = Sunday).
    pub fn parse_line(line: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let fields: [&str; 5] = fields
            .try_into()
            .map_err(|_| format!("{line:?}: a cron line has five fields"))?;
        Cron::parse(fields, Weekdays::SundayZero)
    }

    fn day_matches(&self, m: u32, d: u32, weekday: u32) -> bool {
        if self.months & (1 << m) == 0 {
            return false;
        }
        let by_date = self.days & (1 << d) != 0;
        let by_weekday = self.weekdays & (1 << weekday) != 0;
        match (self.days_star, self.weekdays_star) {
            (true, true) => true,
            (false, true) => by_date,
            (true, false) => by_weekday,
            (false, false) => by_date || by_weekday,
        }
    }

    /// The first firing strictly after `after` (Unix ms, UTC), on a whole
    /// minute; `None` if it never fires within five years.
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        let start = (after / MINUTE_MS + 1) * MINUTE_MS;
        let first = start / DAY_MS;
        let mut from_minute = (start % DAY_MS) / MINUTE_MS;
        for day in first..first + HORIZON_DAYS {
            let (_, m, d) = crate::timefmt::civil_from_days(day as i64);
            // 1970-01-01 was a Thursday (4, Sunday = 0).
            let weekday = ((day + 4) % 7) as u32;
            if self.day_matches(m, d, weekday) {
                for minute_of_day in from_minute..1440 {
                    let (h, mi) = (minute_of_day / 60, minute_of_day % 60);
                    if self.hours & (1 << h) != 0 && self.minutes & (1 << mi) != 0 {
                        return Some(day * DAY_MS + minute_of_day * MINUTE_MS);
                    }
                }
            }
            from_minute = 0;
        }
        None
    }
}

/// Most schedules clients may create (config ones do not count): each
/// costs memory and a stored record for as long as it lives.
pub const MAX_CLIENT_SCHEDULES: usize = 10_000;

/// A `[[schedule]]` section of the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    /// Cron line (0 = Sunday).
    pub cron: String,
    /// Function of the jobs it submits.
    pub function: Bytes,
    /// Their unique id (empty: none).
    pub unique: Bytes,
    /// Their workload.
    pub data: Bytes,
    /// Their priority.
    pub priority: Priority,
}

/// One recurring job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Its number: its handle names it.
    pub id: JobId,
    /// The five fields as given, space-separated.
    pub when: String,
    /// How the day-of-week field counts.
    pub weekdays: Weekdays,
    pub(crate) cron: Cron,
    /// Function of the jobs it submits.
    pub function: Bytes,
    /// Their unique id.
    pub unique: Bytes,
    /// Their workload.
    pub data: Bytes,
    /// Their priority.
    pub priority: Priority,
    /// Next firing; `None` if it never fires again.
    pub next: Option<Millis>,
    /// Declared in the config file (not droppable by admin; follows reloads).
    pub from_config: bool,
    /// Written to the store and confirmed.
    pub stored: bool,
}

impl Schedule {
    pub(crate) fn same_spec(&self, s: &ScheduleSpec) -> bool {
        self.from_config
            && self.when == s.cron
            && self.function == s.function
            && self.unique == s.unique
            && self.data == s.data
            && self.priority == s.priority
    }

    pub(crate) fn stored(&self, handle: Bytes) -> ScheduleRecord {
        ScheduleRecord {
            id: self.id,
            handle,
            when: Bytes::copy_from_slice(self.when.as_bytes()),
            monday_zero: self.weekdays == Weekdays::MondayZero,
            function: self.function.clone(),
            unique: self.unique.clone(),
            data: self.data.clone(),
            priority: priority_byte(self.priority),
            next_ms: self.next,
            from_config: self.from_config,
        }
    }
}

/// Every schedule, by number.
pub type Schedules = BTreeMap<JobId, Schedule>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timefmt::rfc3339;

    fn next(line: &str, after: &str) -> String {
        let c = Cron::parse_line(line).expect("cron");
        let t = parse_time(after);
        rfc3339(c.next_after(t).expect("fires"))
    }

    /// `YYYY-MM-DDTHH:MM` (UTC) as Unix ms, by search (tests only).
    fn parse_time(s: &str) -> Millis {
        let mut lo = 0u64;
        let mut hi = 10_000_000_000_000u64;
        let want = format!("{s}:00.000Z");
        while lo < hi {
            let mid = (lo + hi) / 2 / MINUTE_MS * MINUTE_MS;
            if rfc3339(mid) < want {
                lo = mid + MINUTE_MS;
            } else {
                hi = mid;
            }
        }
        lo
    }

    #[test]
    fn next_firings() {
        assert_eq!(
            next("* * * * *", "2026-11-25T18:49"),
            "2026-11-25T18:50:00.000Z"
        );
        assert_eq!(
            next("*/15 * * * *", "2026-11-25T18:49"),
            "2026-11-25T19:00:00.000Z"
        );
        assert_eq!(
            next("30 2 * * *", "2026-11-25T18:49"),
            "2026-11-26T02:30:00.000Z"
        );
        // Wednesday 2026-11-25; next Monday is the 30th.
        assert_eq!(
            next("0 9 * * 1", "2026-11-25T18:49"),
            "2026-11-30T09:00:00.000Z"
        );
        assert_eq!(
            next("0 9 * * 7", "2026-11-25T18:49"),
            "2026-11-29T09:00:00.000Z"
        );
        assert_eq!(
            next("0 0 29 2 *", "2026-11-25T18:49"),
            "2028-02-29T00:00:00.000Z"
        );
        // Both day fields restricted: either matches (the 1st, or a Friday).
        assert_eq!(
            next("0 0 1 * 5", "2026-11-25T18:49"),
            "2026-11-27T00:00:00.000Z"
        );
        assert_eq!(
            next("0-10/5 8-9 * 1,6 *", "2026-11-25T18:49"),
            "2027-01-01T08:00:00.000Z"
        );
        assert!(Cron::parse_line("0 0 30 2 *")
            .expect("cron")
            .next_after(0)
            .is_none());
    }

    #[test]
    fn the_protocol_counts_weekdays_from_monday() {
        let c = Cron::parse(["0", "9", "*", "*", "0"], Weekdays::MondayZero).expect("cron");
        let t = parse_time("2026-11-25T18:49");
        assert_eq!(
            rfc3339(c.next_after(t).expect("fires")),
            "2026-11-30T09:00:00.000Z"
        );
        let sunday = Cron::parse(["0", "9", "*", "*", "6"], Weekdays::MondayZero).expect("cron");
        assert_eq!(
            rfc3339(sunday.next_after(t).expect("fires")),
            "2026-11-29T09:00:00.000Z"
        );
    }

    #[test]
    fn bad_fields() {
        for line in [
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "*/0 * * * *",
            "5/10 * * * *",
            "a * * * *",
            "5-1 * * * *",
            "* * * * 8",
        ] {
            assert!(Cron::parse_line(line).is_err(), "{line}");
        }
    }
}
