//! What the owners send: replies matched to the requests they answer and
//! released to the client in the client's order, the rest in each owner's
//! order.

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{decode_frame_whole, Frame, Magic};
use gearshift_proto::packet_type::PacketType;

use super::packets::{self, bare, error, first_arg, is_reply, second_arg};
use super::{Expect, Held, Kind, Out, Owner, Owners, Split};

/// The largest packet an owner may send (a whole result).
const MAX_OWNER_PACKET: usize = 1 << 30;

impl Split {
    /// Bytes `owner` sent on this connection's sub-connection.
    pub fn from_owner(
        &mut self,
        owner: Owner,
        buf: &mut BytesMut,
        owners: &dyn Owners,
        out: &mut Vec<Out>,
    ) {
        loop {
            // Text is read whole, its line ends kept as the owner wrote them.
            if buf.first().is_some_and(|&b| b != 0) {
                match buf.iter().position(|&b| b == b'\n') {
                    Some(nl) => {
                        let line = buf.split_to(nl + 1).freeze();
                        self.owner_text(owner, line, owners, out);
                        continue;
                    }
                    None if buf.len() <= MAX_OWNER_PACKET => break,
                    None => {
                        buf.clear();
                        self.owner_lost(owner, owners, out);
                        return;
                    }
                }
            }
            match decode_frame_whole(buf, MAX_OWNER_PACKET.max(self.max_packet)) {
                Ok(Some((Frame::Packet(p), bytes))) => {
                    self.answer(owner, p.kind, &p.body, bytes, out);
                }
                Ok(Some((Frame::Text(line), _))) => {
                    self.owner_text(owner, packets::line(&line), owners, out)
                }
                Ok(None) => break,
                Err(_) => {
                    buf.clear();
                    self.owner_lost(owner, owners, out);
                    return;
                }
            }
        }
        self.release(out);
    }

    /// One packet from `owner`.
    fn answer(
        &mut self,
        owner: Owner,
        kind: PacketType,
        body: &Bytes,
        bytes: Bytes,
        out: &mut Vec<Out>,
    ) {
        if !self.owners.contains_key(&owner) {
            return;
        }
        if kind == PacketType::Noop {
            if let Some(st) = self.owners.get_mut(&owner) {
                st.asleep = false;
            }
            self.hints.insert(owner);
            if self.sleeping && !self.woken {
                self.woken = true;
                out.push(Out::ToClient(bytes));
            }
            return;
        }
        let ends = matches!(
            kind,
            PacketType::WorkComplete | PacketType::WorkFail | PacketType::WorkException
        );
        let bytes = self.rename(kind, body, bytes);
        let Some(st) = self.owners.get_mut(&owner) else {
            return;
        };
        if ends && st.foreground.remove(&first_arg(body)) {
            let handle = self.client_handle(&first_arg(body));
            self.foreground_ended(&handle);
        }
        let Some(st) = self.owners.get_mut(&owner) else {
            return;
        };
        // JOB_NOT_FOUND answers a worker's WORK_* packet, which has no reply
        // of its own: it is the owner's own packet, not an answer; so is
        // JOB_MOVED, a foreground job handed over with its partition.
        let code = (kind == PacketType::Error).then(|| first_arg(body));
        if code.as_deref() == Some(super::JOB_MOVED.as_bytes()) {
            let theirs = Bytes::copy_from_slice(second_arg(body));
            return self.job_moved(owner, &theirs, out);
        }
        let own_error = code.as_deref() == Some(&b"JOB_NOT_FOUND"[..]);
        let expect = match is_reply(kind) && !own_error {
            true => st.expect.pop_front(),
            false => None,
        };
        match expect {
            None => self.emit(owner, bytes, out),
            Some(Expect::Swallow) => {}
            Some(Expect::Entry(id)) => self.settle(owner, id, kind, body, bytes, out),
        }
    }

    /// `owner`'s reply to entry `id`.
    fn settle(
        &mut self,
        owner: Owner,
        id: u64,
        kind: PacketType,
        body: &Bytes,
        bytes: Bytes,
        out: &mut Vec<Out>,
    ) {
        if kind == PacketType::Error && self.parks(id, body, &bytes) {
            return;
        }
        // A foreground job's submission is kept until the job ends.
        let foreground = kind == PacketType::JobCreated
            && matches!(
                self.entry(id).map(|e| &e.kind),
                Some(Kind::Single { foreground: true })
            );
        let kept = self.answered(id).filter(|_| foreground);
        let Some(entry) = self.entry(id) else {
            return;
        };
        if let Kind::Resubmit { handle } = &entry.kind {
            let handle = handle.clone();
            return self.resubmitted(owner, id, handle, kind, body);
        }
        let mut ask_next = None;
        let mut hold = false;
        match &mut entry.kind {
            Kind::Single { foreground } => {
                let fg = *foreground && kind == PacketType::JobCreated;
                entry.done = Some(bytes);
                hold = true;
                if fg {
                    let handle = first_arg(body);
                    if let Some(st) = self.owners.get_mut(&owner) {
                        st.foreground.insert(handle.clone());
                    }
                    if let Some((function, packet)) = kept {
                        self.keep_foreground(handle, function, packet);
                    }
                }
            }
            Kind::Grab {
                candidates,
                next,
                packet,
            } => {
                if kind == PacketType::NoJob && *next < candidates.len() {
                    ask_next = Some((candidates[*next], packet.clone()));
                    *next += 1;
                } else {
                    entry.done = Some(bytes);
                    hold = true;
                    if matches!(
                        kind,
                        PacketType::JobAssign
                            | PacketType::JobAssignUniq
                            | PacketType::JobAssignAll
                    ) {
                        self.assigned.insert(first_arg(body), owner);
                    }
                }
            }
            // Text is answered by text (`owner_text`); a job submitted
            // again was answered above.
            Kind::Text(_) | Kind::Resubmit { .. } => {}
            Kind::Broadcast {
                waiting,
                known,
                unknown,
            } => {
                *waiting = waiting.saturating_sub(1);
                let knows = match kind {
                    PacketType::StatusRes | PacketType::StatusResUnique => second_arg(body) == b"1",
                    _ => false,
                };
                if knows && known.is_none() {
                    *known = Some(bytes);
                } else if kind != PacketType::Error && known.is_none() {
                    *unknown = bytes;
                }
                if *waiting == 0 {
                    entry.done = Some(known.take().unwrap_or_else(|| unknown.clone()));
                }
            }
        }
        if let Some((o, packet)) = ask_next {
            self.ask_grab(o, id, packet, out);
        }
        if hold {
            if let Some(st) = self.owners.get_mut(&owner) {
                st.held.push_back(Held::Reply(id));
            }
        }
    }

    /// `owner`'s packet that answers nothing: out now unless a reply of its
    /// own waits before it.
    pub(super) fn emit(&mut self, owner: Owner, bytes: Bytes, out: &mut Vec<Out>) {
        match self.owners.get_mut(&owner) {
            Some(st) if !st.held.is_empty() => {
                self.held_bytes += bytes.len();
                st.held.push_back(Held::Packet(bytes));
            }
            _ => out.push(Out::ToClient(bytes)),
        }
    }

    /// Sends every answered request at the front, then what each owner held
    /// behind them.
    pub(super) fn release(&mut self, out: &mut Vec<Out>) {
        while self.pending.front().is_some_and(|e| e.done.is_some()) {
            if let Some(bytes) = self.pending.pop_front().and_then(|e| e.done) {
                out.push(Out::ToClient(bytes));
            }
            self.head += 1;
        }
        let head = self.head;
        let mut freed = 0;
        let states = self.owners.values_mut().chain(self.retired.iter_mut());
        for st in states {
            while let Some(h) = st.held.front() {
                match h {
                    Held::Reply(id) if *id < head => {}
                    Held::Reply(_) => break,
                    Held::Packet(b) => {
                        freed += b.len();
                        out.push(Out::ToClient(b.clone()));
                    }
                }
                st.held.pop_front();
            }
        }
        self.held_bytes -= freed;
        self.retired.retain(|st| !st.held.is_empty());
    }

    /// `owner`'s sub-connection is gone: what waited on it is answered as
    /// well as can be, its unfinished foreground jobs fail, and the
    /// abilities it held go to whoever owns them at the next
    /// [`Split::owners_changed`].
    pub fn owner_lost(&mut self, owner: Owner, owners: &dyn Owners, out: &mut Vec<Out>) {
        self.owner_gone(owner, false, owners, out);
    }

    /// `owner` closed the sub-connection in order, after answering all it
    /// read: as [`Split::owner_lost`], but the submissions it never
    /// answered were never taken, so they wait for an owner again.
    pub fn owner_closed(&mut self, owner: Owner, owners: &dyn Owners, out: &mut Vec<Out>) {
        self.owner_gone(owner, true, owners, out);
    }

    fn owner_gone(&mut self, owner: Owner, orderly: bool, owners: &dyn Owners, out: &mut Vec<Out>) {
        let Some(mut st) = self.owners.remove(&owner) else {
            return;
        };
        self.hints.remove(&owner);
        self.assigned.retain(|_, o| *o != owner);
        for a in self.abilities.values_mut() {
            if a.sent_to == Some(owner) {
                a.sent_to = None;
            }
        }
        // A foreground job dies with its owner: it is submitted again after
        // an orderly close (it never ran), else it fails.
        for theirs in std::mem::take(&mut st.foreground) {
            if orderly && self.resubmit(&theirs) {
                continue;
            }
            let handle = self.client_handle(&theirs);
            self.foreground_ended(&handle);
            let fail = super::resubmit::work_fail(&handle);
            self.held_bytes += fail.len();
            st.held.push_back(Held::Packet(fail));
        }
        let waiting: Vec<u64> = st
            .expect
            .drain(..)
            .filter_map(|e| match e {
                Expect::Entry(id) => Some(id),
                Expect::Swallow => None,
            })
            .collect();
        let asked: Vec<u64> = st.text.drain(..).collect();
        st.partial.clear();
        self.retired.push(st);
        for id in waiting {
            if !(orderly && self.park_untaken(id)) {
                self.give_up_on(owner, id, out);
            }
        }
        for id in asked {
            self.text_answered(id, owner, None);
        }
        let _ = owners;
        self.release(out);
    }

    /// Entry `id` will get no reply from `lost`.
    fn give_up_on(&mut self, lost: Owner, id: u64, out: &mut Vec<Out>) {
        // It may have been stored: not sent again.
        self.answered(id);
        let Some(entry) = self.entry(id) else {
            return;
        };
        let mut ask_next = None;
        let mut ended = None;
        match &mut entry.kind {
            Kind::Text(_) => {}
            Kind::Single { .. } => {
                entry.done = Some(error(
                    "QUEUE_ERROR",
                    "the node that owns this job's partition is gone; try again",
                ));
            }
            Kind::Resubmit { handle } => {
                entry.done = Some(super::resubmit::work_fail(handle));
                ended = Some(handle.clone());
            }
            Kind::Grab {
                candidates,
                next,
                packet,
            } => {
                while *next < candidates.len() && candidates[*next] == lost {
                    *next += 1;
                }
                if *next < candidates.len() {
                    ask_next = Some((candidates[*next], packet.clone()));
                    *next += 1;
                } else {
                    entry.done = Some(bare(PacketType::NoJob));
                }
            }
            Kind::Broadcast {
                waiting,
                known,
                unknown,
            } => {
                *waiting = waiting.saturating_sub(1);
                if *waiting == 0 {
                    entry.done = Some(known.take().unwrap_or_else(|| unknown.clone()));
                }
            }
        }
        if let Some((o, packet)) = ask_next {
            self.ask_grab(o, id, packet, out);
        }
        if let Some(handle) = ended {
            self.foreground_ended(&handle);
        }
    }

    /// Ownership changed (or a sub-connection was lost): every ability goes
    /// to its function's owner now, with the worker's sleep.
    pub fn owners_changed(&mut self, owners: &dyn Owners, out: &mut Vec<Out>) {
        let mut moved = Vec::new();
        for (function, a) in &self.abilities {
            let now = owners.owner_of(function);
            if now != a.sent_to {
                moved.push((function.clone(), a.sent_to, now));
            }
        }
        let mut woken_at = Vec::new();
        for (function, old, now) in moved {
            if let Some(o) = old.filter(|o| self.owners.contains_key(o)) {
                let cant = packets::packet(Magic::Req, PacketType::CantDo, &[&function]);
                out.push(Out::ToOwner(o, cant));
            }
            let Some(a) = self.abilities.get_mut(&function) else {
                continue;
            };
            a.sent_to = now;
            let packet = a.packet.clone();
            if let Some(o) = now {
                self.open(o, out).asleep = false;
                out.push(Out::ToOwner(o, packet));
                if self.sleeping && !woken_at.contains(&o) {
                    woken_at.push(o);
                }
            }
        }
        let sleep = bare_req(PacketType::PreSleep);
        for o in woken_at {
            self.sleep_at(o, &sleep, out);
        }
        self.retry_parked(owners, out);
        self.release(out);
    }
}

fn bare_req(kind: PacketType) -> Bytes {
    packets::packet(Magic::Req, kind, &[])
}
