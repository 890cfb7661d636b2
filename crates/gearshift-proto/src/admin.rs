//! The admin text protocol: parsing a command line the way gearmand 1.1
//! splits it, and the exact reply strings `gearadmin` and monitoring scripts
//! read.
//!
//! Word splitting follows gearmand: runs of spaces separate words, a leading
//! space yields an empty first word and trailing spaces one empty last word;
//! tabs are ordinary characters. Command words compare case-insensitively.

use bytes::Bytes;

/// `OK\r\n`, the success reply of create/drop/maxqueue/cancel/shutdown.
pub const OK_CRLF: &[u8] = b"OK\r\n";
/// The end of every list reply.
pub const LIST_END: &[u8] = b".\n";
/// Reply to `show` with arguments other than `jobs` / `unique jobs`.
pub const ERR_UNKNOWN_SHOW_ARGUMENTS: &[u8] = b"ERR UNKNOWN_SHOW_ARGUMENTS\r\n";
/// Reply to `cancel job H` for an unknown handle.
pub const ERR_UNKNOWN_JOB: &[u8] = b"ERR UNKNOWN_JOB\r\n";
/// Reply to malformed `cancel …` lines.
pub const ERR_UNKNOWN_ERROR: &[u8] = b"ERR UNKNOWN_ERROR\r\n";
/// Reply to `drop function F` while workers or running jobs remain.
pub const ERR_DROP_BUSY: &[u8] = b"ERR there are still connected workers or executing clients\r\n";
/// Reply to `drop function F` while jobs are queued (gearmand would orphan them).
pub const ERR_DROP_QUEUED: &[u8] = b"ERR there are still queued jobs\r\n";
/// Reply to `drop function F` for an unknown function.
pub const ERR_FUNCTION_NOT_FOUND: &[u8] = b"ERR function not found\r\n";
/// Reply to `shutdown` from a peer that may not change the server.
pub const ERR_SHUTDOWN_DENIED: &[u8] =
    b"ERR PERMISSION_DENIED shutdown+is+only+accepted+from+loopback+or+--admin-allow\r\n";
/// Reply to a command that changes jobs or functions ([`AdminCommand::changes`])
/// from a peer that may not.
pub const ERR_CHANGE_DENIED: &[u8] =
    b"ERR PERMISSION_DENIED changes+are+only+accepted+from+loopback+or+--admin-allow\r\n";

/// Reply to a read-only admin command from a peer the access rules do not
/// let read.
pub const ERR_READ_DENIED: &[u8] =
    b"ERR PERMISSION_DENIED admin+commands+are+not+allowed+from+this+peer\r\n";

impl AdminCommand {
    /// Whether the command changes jobs, functions or the server (cancel,
    /// drop, maxqueue, the dead set, schedules, pause and resume,
    /// shutdown): only loopback or `--admin-allow` peers may send those.
    pub fn changes(&self) -> bool {
        matches!(
            self,
            AdminCommand::CancelJob(_)
                | AdminCommand::DropFunction(_)
                | AdminCommand::MaxQueue { .. }
                | AdminCommand::Shutdown { .. }
                | AdminCommand::RetryDead(..)
                | AdminCommand::DropDead(..)
                | AdminCommand::DropSchedule(_)
                | AdminCommand::Pause(_)
                | AdminCommand::Resume(_)
        )
    }
}

/// Most words a command line may have (gearmand closes the connection past this).
pub const MAX_WORDS: usize = 5;

/// A parsed admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCommand {
    /// `status`
    Status,
    /// `prioritystatus`
    PriorityStatus,
    /// `workers`
    Workers,
    /// `show jobs`
    ShowJobs,
    /// `show unique jobs`
    ShowUniqueJobs,
    /// `cancel job H`
    CancelJob(Bytes),
    /// `create function F`
    CreateFunction(Bytes),
    /// `drop function F`
    DropFunction(Bytes),
    /// `maxqueue F [N | H N L]`: per-priority limits (high, normal, low); `None` = unlimited.
    MaxQueue {
        /// Function name.
        function: Bytes,
        /// Limits by priority index; a value ≤ 0 means unlimited.
        limits: [i64; 3],
    },
    /// `getpid`
    GetPid,
    /// `verbose`
    Verbose,
    /// `version`
    Version,
    /// `shutdown` / `shutdown graceful`
    Shutdown {
        /// Let connections finish.
        graceful: bool,
    },
    /// `show job H` (Gearshift): a job's state, times and history.
    ShowJob(Bytes),
    /// `show dead [F]` (Gearshift): the dead set, or one function's part of it.
    ShowDead(Option<Bytes>),
    /// `show workers` (Gearshift): the worker registry.
    ShowWorkers,
    /// `retry dead H|all [F]` (Gearshift).
    RetryDead(DeadTarget, Option<Bytes>),
    /// `drop dead H|all [F]` (Gearshift).
    DropDead(DeadTarget, Option<Bytes>),
    /// `show schedules` (Gearshift): the recurring jobs.
    ShowSchedules,
    /// `drop schedule H` (Gearshift).
    DropSchedule(Bytes),
    /// `pause F` (Gearshift): jobs are accepted and queued, not handed out.
    Pause(Bytes),
    /// `resume F` (Gearshift).
    Resume(Bytes),
    /// A line the server answers with a fixed reply.
    Reply(Bytes),
    /// A line with too many words: gearmand closes the connection.
    TooManyWords,
}

/// What `retry dead` / `drop dead` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadTarget {
    /// One job by handle.
    Handle(Bytes),
    /// Every dead job (of the function, if one is given).
    All,
}

/// Reply to `drop schedule H` for an unknown schedule.
pub const ERR_UNKNOWN_SCHEDULE: &[u8] = b"ERR UNKNOWN_SCHEDULE no+such+schedule\r\n";
/// Reply to `drop schedule H` for a schedule the config file declares.
pub const ERR_SCHEDULE_IN_CONFIG: &[u8] =
    b"ERR SCHEDULE_IN_CONFIG remove+it+from+the+config+file+and+reload\r\n";

/// Reply to `show job H` for a handle the server does not know (or forgot).
pub const ERR_UNKNOWN_JOB_SHOW: &[u8] = b"ERR UNKNOWN_JOB job+not+found+or+expired\r\n";

fn eq(word: &[u8], lit: &str) -> bool {
    word.eq_ignore_ascii_case(lit.as_bytes())
}

/// Splits a line into words the way gearmand does.
pub fn split_words(line: &[u8]) -> Vec<&[u8]> {
    Words::new(line).collect()
}

/// The words of a line, as [`split_words`] cuts them, without allocating.
#[derive(Debug, Clone)]
pub struct Words<'a> {
    line: &'a [u8],
    start: usize,
    i: usize,
    done: bool,
}

impl<'a> Words<'a> {
    /// The words of `line`.
    pub fn new(line: &'a [u8]) -> Self {
        Words {
            line,
            start: 0,
            i: 0,
            done: line.is_empty(),
        }
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done {
            return None;
        }
        let line = self.line;
        while self.i < line.len() {
            if line[self.i] == b' ' {
                let word = &line[self.start..self.i];
                while self.i < line.len() && line[self.i] == b' ' {
                    self.i += 1;
                }
                self.start = self.i;
                return Some(word);
            }
            self.i += 1;
        }
        self.done = true;
        (self.start < line.len() || line.last() == Some(&b' ')).then(|| &line[self.start..])
    }
}

fn args_error(word: &[u8]) -> AdminCommand {
    let mut s =
        b"ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+".to_vec();
    s.extend_from_slice(word);
    s.extend_from_slice(b"\r\n");
    AdminCommand::Reply(s.into())
}

/// `retry|drop dead H|all [F]`: the target and the optional function.
fn dead_args(words: &[&[u8]]) -> (DeadTarget, Option<Bytes>) {
    let target = if eq(words[2], "all") {
        DeadTarget::All
    } else {
        DeadTarget::Handle(Bytes::copy_from_slice(words[2]))
    };
    (target, words.get(3).map(|w| Bytes::copy_from_slice(w)))
}

/// The reply to an unknown command word.
pub fn unknown_command(word: &[u8]) -> Bytes {
    let mut s = b"ERR UNKNOWN_COMMAND Unknown+server+command".to_vec();
    s.extend_from_slice(word);
    s.extend_from_slice(b"\r\n");
    s.into()
}

/// Parses one admin line (without its line terminator).
pub fn parse_admin(line: &[u8]) -> AdminCommand {
    let mut kept: [&[u8]; MAX_WORDS] = [&[]; MAX_WORDS];
    let mut count = 0;
    for word in Words::new(line) {
        if count == MAX_WORDS {
            return AdminCommand::TooManyWords;
        }
        kept[count] = word;
        count += 1;
    }
    let words = &kept[..count];
    let Some(&cmd) = words.first() else {
        return AdminCommand::Reply(unknown_command(b""));
    };
    let argc = words.len();
    let arg = |i: usize| Bytes::copy_from_slice(words[i]);
    if eq(cmd, "workers") {
        AdminCommand::Workers
    } else if eq(cmd, "status") {
        AdminCommand::Status
    } else if eq(cmd, "prioritystatus") {
        AdminCommand::PriorityStatus
    } else if argc >= 3 && eq(cmd, "cancel") {
        if argc == 3 && eq(words[1], "job") {
            AdminCommand::CancelJob(arg(2))
        } else {
            AdminCommand::Reply(Bytes::from_static(ERR_UNKNOWN_ERROR))
        }
    } else if argc >= 2 && eq(cmd, "show") {
        if argc == 3 && eq(words[1], "unique") && eq(words[2], "jobs") {
            AdminCommand::ShowUniqueJobs
        } else if argc == 2 && eq(words[1], "jobs") {
            AdminCommand::ShowJobs
        } else if argc == 3 && eq(words[1], "job") {
            AdminCommand::ShowJob(arg(2))
        } else if (argc == 2 || argc == 3) && eq(words[1], "dead") {
            AdminCommand::ShowDead((argc == 3).then(|| arg(2)))
        } else if argc == 2 && eq(words[1], "workers") {
            AdminCommand::ShowWorkers
        } else if argc == 2 && eq(words[1], "schedules") {
            AdminCommand::ShowSchedules
        } else {
            AdminCommand::Reply(Bytes::from_static(ERR_UNKNOWN_SHOW_ARGUMENTS))
        }
    } else if eq(cmd, "create") {
        if argc == 3 && eq(words[1], "function") {
            AdminCommand::CreateFunction(arg(2))
        } else {
            args_error(cmd)
        }
    } else if eq(cmd, "drop") {
        if argc == 3 && eq(words[1], "function") {
            AdminCommand::DropFunction(arg(2))
        } else if (argc == 3 || argc == 4) && eq(words[1], "dead") {
            let (target, function) = dead_args(words);
            AdminCommand::DropDead(target, function)
        } else if argc == 3 && eq(words[1], "schedule") {
            AdminCommand::DropSchedule(arg(2))
        } else {
            args_error(cmd)
        }
    } else if eq(cmd, "retry") {
        if (argc == 3 || argc == 4) && eq(words[1], "dead") {
            let (target, function) = dead_args(words);
            AdminCommand::RetryDead(target, function)
        } else {
            args_error(cmd)
        }
    } else if eq(cmd, "pause") || eq(cmd, "resume") {
        if argc != 2 {
            args_error(cmd)
        } else if eq(cmd, "pause") {
            AdminCommand::Pause(arg(1))
        } else {
            AdminCommand::Resume(arg(1))
        }
    } else if eq(cmd, "maxqueue") {
        if argc == 1 {
            return args_error(cmd);
        }
        let mut limits = [0i64; 3];
        for (p, limit) in limits.iter_mut().enumerate() {
            if argc > p + 2 {
                *limit = crate::request::parse_atoi(words[p + 2]).max(0);
            }
        }
        if argc <= 3 {
            limits = [limits[0]; 3];
        }
        AdminCommand::MaxQueue {
            function: arg(1),
            limits,
        }
    } else if eq(cmd, "getpid") {
        AdminCommand::GetPid
    } else if eq(cmd, "shutdown") {
        if argc == 1 {
            AdminCommand::Shutdown { graceful: false }
        } else if argc == 2 && eq(words[1], "graceful") {
            AdminCommand::Shutdown { graceful: true }
        } else {
            args_error(cmd)
        }
    } else if eq(cmd, "verbose") {
        AdminCommand::Verbose
    } else if eq(cmd, "version") {
        AdminCommand::Version
    } else {
        AdminCommand::Reply(unknown_command(cmd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_like_gearmand() {
        assert_eq!(split_words(b"show  jobs"), vec![&b"show"[..], b"jobs"]);
        assert_eq!(split_words(b" status"), vec![&b""[..], b"status"]);
        assert_eq!(split_words(b"show jobs "), vec![&b"show"[..], b"jobs", b""]);
        assert_eq!(
            split_words(b"show jobs   "),
            vec![&b"show"[..], b"jobs", b""]
        );
        assert_eq!(split_words(b"a\tb"), vec![&b"a\tb"[..]]);
        assert!(split_words(b"").is_empty());
    }

    #[test]
    fn commands() {
        assert_eq!(parse_admin(b"STATUS"), AdminCommand::Status);
        assert_eq!(
            parse_admin(b"show jobs "),
            AdminCommand::Reply(ERR_UNKNOWN_SHOW_ARGUMENTS.into())
        );
        assert_eq!(
            parse_admin(b"show"),
            AdminCommand::Reply(unknown_command(b"show"))
        );
        assert_eq!(
            parse_admin(b"cancel job"),
            AdminCommand::Reply(unknown_command(b"cancel"))
        );
        assert_eq!(
            parse_admin(b"cancel foo bar"),
            AdminCommand::Reply(ERR_UNKNOWN_ERROR.into())
        );
        assert_eq!(
            parse_admin(b"maxqueue f 5"),
            AdminCommand::MaxQueue {
                function: "f".into(),
                limits: [5, 5, 5]
            }
        );
        assert_eq!(
            parse_admin(b"maxqueue f 1 2 3"),
            AdminCommand::MaxQueue {
                function: "f".into(),
                limits: [1, 2, 3]
            }
        );
        assert_eq!(
            parse_admin(b"maxqueue f 1 2"),
            AdminCommand::MaxQueue {
                function: "f".into(),
                limits: [1, 2, 0]
            }
        );
        assert_eq!(
            parse_admin(b"Create x"),
            AdminCommand::Reply(
                b"ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+Create\r\n"[..]
                    .into()
            )
        );
        assert_eq!(parse_admin(b"a b c d e f"), AdminCommand::TooManyWords);
        assert_eq!(
            parse_admin(b"show job H:x:1"),
            AdminCommand::ShowJob("H:x:1".into())
        );
        assert_eq!(parse_admin(b"show dead"), AdminCommand::ShowDead(None));
        assert_eq!(
            parse_admin(b"SHOW DEAD f"),
            AdminCommand::ShowDead(Some("f".into()))
        );
        assert_eq!(parse_admin(b"show workers"), AdminCommand::ShowWorkers);
        assert_eq!(
            parse_admin(b"retry dead all f"),
            AdminCommand::RetryDead(DeadTarget::All, Some("f".into()))
        );
        assert_eq!(
            parse_admin(b"drop dead H:x:2"),
            AdminCommand::DropDead(DeadTarget::Handle("H:x:2".into()), None)
        );
        assert_eq!(parse_admin(b"pause f"), AdminCommand::Pause("f".into()));
        assert_eq!(parse_admin(b"resume f"), AdminCommand::Resume("f".into()));
        assert_eq!(parse_admin(b"pause"), args_error(b"pause"));
        assert_eq!(parse_admin(b"retry dead"), args_error(b"retry"));
        // gearmand's own lines keep their answers.
        assert_eq!(
            parse_admin(b"drop function f"),
            AdminCommand::DropFunction("f".into())
        );
        assert_eq!(
            parse_admin(b"show stuff"),
            AdminCommand::Reply(ERR_UNKNOWN_SHOW_ARGUMENTS.into())
        );
        assert_eq!(
            parse_admin(b"Bogus"),
            AdminCommand::Reply(b"ERR UNKNOWN_COMMAND Unknown+server+commandBogus\r\n"[..].into())
        );
        assert_eq!(parse_admin(b""), AdminCommand::Reply(unknown_command(b"")));
    }
}
