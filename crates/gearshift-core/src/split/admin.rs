//! Admin text lines on a partitioned node: each goes to the owners that can
//! answer it (the function's owner, or all of them), and their answers are
//! merged into the one reply a client of a single server would get.

use bytes::{Bytes, BytesMut};
use gearshift_proto::admin::{parse_admin, AdminCommand, LIST_END};

use super::packets;
use super::{Entry, Held, Kind, Out, Owner, Owners, Split};

/// Answer to a line naming a function no node owns now.
pub(super) const ERR_NO_OWNER: &[u8] =
    b"ERR NO_OWNER no+node+owns+this+function's+partition+now\r\n";
/// Answer to a line whose owner went away before answering.
pub(super) const ERR_OWNER_LOST: &[u8] =
    b"ERR OWNER_LOST the+node+that+owns+this+partition+is+gone\r\n";

/// How the owners' answers to one line become the client's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Merge {
    /// One owner answers.
    One,
    /// Lists ending in ".": every owner's lines, then one ".".
    Lists,
    /// `status` lists: as `Lists`, but a function's line only from the
    /// owner the view names (one that raced a move may still list it).
    Status,
    /// The first answer not starting with this (the "unknown" error), else
    /// that error.
    Known(&'static [u8]),
    /// `OK n` answers: one `OK` with their sum.
    Sum,
    /// `workers` lists: a client's line on each owner made one.
    Workers,
}

/// An admin line asked of several owners.
pub(super) struct TextAsk {
    waiting: usize,
    /// The answer is a list ending in "." (or one ERR line).
    multi: bool,
    merge: Merge,
    got: Vec<(Owner, Bytes)>,
}

/// Where a line goes.
enum Route {
    Close(&'static str),
    Ask {
        to: Vec<Owner>,
        multi: bool,
        merge: Merge,
    },
}

fn route(cmd: &AdminCommand, owners: &dyn Owners) -> Route {
    use AdminCommand::*;
    let every = |multi, merge| Route::Ask {
        to: owners.all(),
        multi,
        merge,
    };
    let one = |to: Option<Owner>, multi| Route::Ask {
        to: to.into_iter().collect(),
        multi,
        merge: Merge::One,
    };
    match cmd {
        Status | PriorityStatus => every(true, Merge::Status),
        ShowJobs | ShowUniqueJobs | ShowWorkers | ShowSchedules | ShowDead(None) => {
            every(true, Merge::Lists)
        }
        Workers => every(true, Merge::Workers),
        ShowJob(_) => every(true, Merge::Known(b"ERR UNKNOWN_JOB")),
        CancelJob(_) => every(false, Merge::Known(b"ERR UNKNOWN_JOB")),
        DropSchedule(_) => every(false, Merge::Known(b"ERR UNKNOWN_SCHEDULE")),
        RetryDead(_, None) | DropDead(_, None) => every(false, Merge::Sum),
        ShowDead(Some(f)) => one(owners.owner_of(f), true),
        RetryDead(_, Some(f))
        | DropDead(_, Some(f))
        | CreateFunction(f)
        | DropFunction(f)
        | MaxQueue { function: f, .. }
        | Pause(f)
        | Resume(f) => one(owners.owner_of(f), false),
        GetPid | Verbose | Version | Shutdown { .. } | Reply(_) => one(Some(owners.local()), false),
        TooManyWords => Route::Close("an admin line with too many words"),
    }
}

impl Split {
    /// An admin line from the client.
    pub(super) fn admin(&mut self, line: Bytes, owners: &dyn Owners, out: &mut Vec<Out>) {
        let (to, multi, merge) = match route(&parse_admin(&line), owners) {
            Route::Close(why) => {
                out.push(Out::Close(why.into()));
                return;
            }
            Route::Ask { to, multi, merge } => (to, multi, merge),
        };
        let ask = TextAsk {
            waiting: to.len(),
            multi,
            merge,
            got: Vec::new(),
        };
        let done = to.is_empty().then(|| match merge {
            Merge::Lists | Merge::Status | Merge::Workers => merged(merge, Vec::new()),
            _ => Bytes::from_static(ERR_NO_OWNER),
        });
        let id = self.push(Kind::Text(ask), done);
        let bytes = packets::line(&line);
        for o in to {
            self.open(o, out).text.push_back(id);
            out.push(Out::ToOwner(o, bytes.clone()));
        }
    }

    /// A whole line of `owner`'s text (with its end).
    pub(super) fn owner_text(
        &mut self,
        owner: Owner,
        line: Bytes,
        owners: &dyn Owners,
        out: &mut Vec<Out>,
    ) {
        let Some(id) = self
            .owners
            .get(&owner)
            .and_then(|st| st.text.front().copied())
        else {
            // Text that answers nothing of ours: pass it on in its place.
            return self.emit(owner, line, out);
        };
        let (multi, status) = match self.entry(id) {
            Some(Entry {
                kind: Kind::Text(t),
                ..
            }) => (t.multi, t.merge == Merge::Status),
            _ => (false, false),
        };
        let Some(st) = self.owners.get_mut(&owner) else {
            return;
        };
        let ends = !multi || (st.partial.is_empty() && is_error(&line)) || line[..] == *LIST_END;
        if status && !ends && listed_elsewhere(&line, owner, owners) {
            return;
        }
        st.partial.extend_from_slice(&line);
        if !ends {
            return;
        }
        let reply = st.partial.split().freeze();
        st.text.pop_front();
        st.held.push_back(Held::Reply(id));
        self.text_answered(id, owner, Some(reply));
    }

    /// `owner` answered entry `id` (None: it never will).
    pub(super) fn text_answered(&mut self, id: u64, owner: Owner, reply: Option<Bytes>) {
        let Some(entry) = self.entry(id) else {
            return;
        };
        let Kind::Text(t) = &mut entry.kind else {
            return;
        };
        t.waiting = t.waiting.saturating_sub(1);
        if let Some(r) = reply {
            t.got.push((owner, r));
        }
        if t.waiting == 0 {
            entry.done = Some(merged(t.merge, std::mem::take(&mut t.got)));
        }
    }
}

/// A `status` line (its function, a tab, counts) of a function the view
/// gives to another owner.
fn listed_elsewhere(line: &[u8], owner: Owner, owners: &dyn Owners) -> bool {
    let function = line.split(|&b| b == b'\t').next().unwrap_or_default();
    owners.owner_of(function).is_some_and(|o| o != owner)
}

/// A one-line error (lists end their lines with a bare "\n").
fn is_error(line: &[u8]) -> bool {
    line.starts_with(b"ERR ") && line.ends_with(b"\r\n")
}

/// The client's reply from the owners' answers.
pub(super) fn merged(merge: Merge, mut got: Vec<(Owner, Bytes)>) -> Bytes {
    got.sort_by_key(|(o, _)| *o);
    let mut answers = got.into_iter().map(|(_, b)| b);
    match merge {
        Merge::One => answers
            .next()
            .unwrap_or_else(|| Bytes::from_static(ERR_OWNER_LOST)),
        Merge::Lists | Merge::Status => {
            let answers: Vec<Bytes> = answers.collect();
            if let Some(e) = answers.iter().find(|a| is_error(a)) {
                return e.clone();
            }
            let mut out = BytesMut::new();
            for a in &answers {
                out.extend_from_slice(a.strip_suffix(LIST_END).unwrap_or(a));
            }
            out.extend_from_slice(LIST_END);
            out.freeze()
        }
        Merge::Workers => {
            let answers: Vec<Bytes> = answers.collect();
            if let Some(e) = answers.iter().find(|a| is_error(a)) {
                return e.clone();
            }
            merge_workers(&answers)
        }
        Merge::Known(unknown) => {
            let answers: Vec<Bytes> = answers.collect();
            let known = answers.iter().find(|a| !a.starts_with(unknown));
            known
                .or(answers.first())
                .cloned()
                .unwrap_or_else(|| Bytes::from_static(ERR_OWNER_LOST))
        }
        Merge::Sum => {
            let mut sum = 0u64;
            let mut any = false;
            for a in answers {
                let n = a
                    .strip_prefix(b"OK ")
                    .and_then(|r| std::str::from_utf8(r).ok())
                    .and_then(|r| r.trim_end().parse::<u64>().ok());
                match n {
                    Some(n) => sum += n,
                    None => return a,
                }
                any = true;
            }
            if !any {
                return Bytes::from_static(ERR_OWNER_LOST);
            }
            Bytes::from(format!("OK {sum}\r\n"))
        }
    }
}

/// Joins the owners' `workers` lines: a client's sub-connections (named
/// alike on every owner: its port, address and client id, fields that
/// hold no space) become one line with all their functions.
fn merge_workers(answers: &[Bytes]) -> Bytes {
    let mut lines: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for a in answers {
        let body = a.strip_suffix(LIST_END).unwrap_or(a);
        for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let at = line
                .windows(2)
                .position(|w| w == b" :")
                .unwrap_or(line.len());
            let (who, rest) = line.split_at(at);
            let functions = rest
                .get(2..)
                .unwrap_or_default()
                .split(|&b| b == b' ')
                .filter(|f| !f.is_empty());
            let i = match lines.iter().position(|(w, _)| *w == who) {
                Some(i) => i,
                None => {
                    lines.push((who, Vec::new()));
                    lines.len() - 1
                }
            };
            for f in functions {
                if !lines[i].1.contains(&f) {
                    lines[i].1.push(f);
                }
            }
        }
    }
    let mut out = BytesMut::new();
    for (who, functions) in lines {
        out.extend_from_slice(who);
        out.extend_from_slice(b" :");
        for f in functions {
            out.extend_from_slice(b" ");
            out.extend_from_slice(f);
        }
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(LIST_END);
    out.freeze()
}
