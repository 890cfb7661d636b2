//! Requests from the client, and where each goes.

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{decode_frame_whole, Frame, Magic, Packet, HEADER_LEN};
use gearshift_proto::packet_type::PacketType;

use super::packets::{self, bare, first_arg, foreground};
use super::{Ability, Kind, Out, Owner, Owners, Split, MAX_PENDING};

impl Split {
    /// Bytes read from the client: whole frames are taken, a partial one
    /// stays in `buf`.
    pub fn from_client(&mut self, buf: &mut BytesMut, owners: &dyn Owners, out: &mut Vec<Out>) {
        loop {
            let (frame, bytes) = match decode_frame_whole(buf, self.max_packet) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    out.push(Out::Close(format!("bad packet: {e}")));
                    buf.clear();
                    return;
                }
            };
            match frame {
                Frame::Text(line) => {
                    self.sent_text = true;
                    self.admin(line, owners, out)
                }
                Frame::Packet(p) => {
                    self.sent_packet = true;
                    self.request(p, bytes, owners, out)
                }
            }
            if self.pending.len() > MAX_PENDING {
                out.push(Out::Close(
                    "too many requests waiting for replies: the client does not read".into(),
                ));
                return;
            }
        }
        self.release(out);
    }

    /// One packet, `bytes` as it came.
    fn request(&mut self, p: Packet, bytes: Bytes, owners: &dyn Owners, out: &mut Vec<Out>) {
        use PacketType::*;
        if p.magic != Magic::Req {
            out.push(Out::ToOwner(owners.local(), bytes));
            return;
        }
        match p.kind {
            SubmitJob
            | SubmitJobBg
            | SubmitJobHigh
            | SubmitJobHighBg
            | SubmitJobLow
            | SubmitJobLowBg
            | SubmitJobSched
            | SubmitJobEpoch
            | SubmitReduceJob
            | SubmitReduceJobBackground => {
                // Kept in a copy of its own: a slice would keep the whole
                // read buffer alive while the submission waits.
                let bytes = Bytes::copy_from_slice(&bytes);
                let function = bytes.slice(HEADER_LEN..HEADER_LEN + first_arg(&p.body).len());
                let kind = Kind::Single {
                    foreground: foreground(p.kind),
                };
                let id = self.push(kind, None);
                let owner = owners.owner_of(&function);
                self.keep(id, function, bytes.clone());
                match owner {
                    Some(owner) => self.ask(owner, id, bytes, out),
                    None => self.park_unowned(id),
                }
            }
            GetStatus => {
                let handle = first_arg(&p.body);
                // A job submitted again is asked about by its owner's handle.
                let (theirs, bytes) = match self.owner_handle(&handle) {
                    Some(h) => (h.clone(), packets::packet(Magic::Req, GetStatus, &[h])),
                    None => (handle.clone(), bytes),
                };
                let known = self.assigned.get(&theirs).copied().or_else(|| {
                    self.owners
                        .iter()
                        .find(|(_, st)| st.foreground.contains(&theirs))
                        .map(|(o, _)| *o)
                });
                match known {
                    Some(owner) => {
                        let id = self.push(Kind::Single { foreground: false }, None);
                        self.ask(owner, id, bytes, out);
                    }
                    None => self.broadcast(false, handle, bytes, owners, out),
                }
            }
            GetStatusUnique => {
                let unique = first_arg(&p.body);
                self.broadcast(true, unique, bytes, owners, out);
            }
            EchoReq => {
                let id = self.push(Kind::Single { foreground: false }, None);
                self.ask(owners.local(), id, bytes, out);
            }
            OptionReq => {
                let local = owners.local();
                let others: Vec<Owner> = self
                    .owners
                    .keys()
                    .copied()
                    .filter(|&o| o != local)
                    .collect();
                for o in others {
                    if let Some(st) = self.owners.get_mut(&o) {
                        st.expect.push_back(super::Expect::Swallow);
                        out.push(Out::ToOwner(o, bytes.clone()));
                    }
                }
                // Opening the local sub-connection sends the earlier options.
                let id = self.push(Kind::Single { foreground: false }, None);
                self.ask(local, id, bytes.clone(), out);
                if !self.options.contains(&bytes) {
                    self.options.push(bytes);
                }
            }
            SetClientId => {
                self.client_id = Some(bytes.clone());
                for &o in self.owners.keys() {
                    out.push(Out::ToOwner(o, bytes.clone()));
                }
            }
            CanDo | CanDoTimeout => {
                let function = first_arg(&p.body);
                let owner = owners.owner_of(&function);
                if let Some(o) = owner {
                    // A new ability there may have work that sends no NOOP.
                    self.open(o, out).asleep = false;
                    out.push(Out::ToOwner(o, bytes.clone()));
                }
                self.abilities.insert(
                    function,
                    Ability {
                        packet: bytes,
                        sent_to: owner,
                    },
                );
            }
            CantDo => {
                let function = first_arg(&p.body);
                if let Some(Ability {
                    sent_to: Some(o), ..
                }) = self.abilities.remove(&function)
                {
                    out.push(Out::ToOwner(o, bytes));
                }
            }
            ResetAbilities => {
                for o in self.ability_owners() {
                    out.push(Out::ToOwner(o, bytes.clone()));
                }
                self.abilities.clear();
            }
            GrabJob | GrabJobUniq | GrabJobAll if self.draining => {
                self.push(Kind::Single { foreground: false }, Some(bare(NoJob)));
            }
            GrabJob | GrabJobUniq | GrabJobAll => self.grab(bytes, out),
            PreSleep if self.draining => {}
            PreSleep => {
                if !self.hints.is_empty() {
                    // An owner said it has work since the last round.
                    out.push(Out::ToClient(bare(Noop)));
                    return;
                }
                self.sleeping = true;
                self.woken = false;
                for o in self.ability_owners() {
                    self.sleep_at(o, &bytes, out);
                }
            }
            WorkStatus | WorkData | WorkWarning | WorkComplete | WorkFail | WorkException => {
                let handle = first_arg(&p.body);
                let ends = matches!(p.kind, WorkComplete | WorkFail | WorkException);
                let owner = match ends {
                    true => self.assigned.remove(&handle),
                    false => self.assigned.get(&handle).copied(),
                };
                out.push(Out::ToOwner(owner.unwrap_or(owners.local()), bytes));
            }
            _ => out.push(Out::ToOwner(owners.local(), bytes)),
        }
    }

    /// Owners holding at least one of the worker's abilities, in order.
    pub(super) fn ability_owners(&self) -> Vec<Owner> {
        let mut v: Vec<Owner> = self.abilities.values().filter_map(|a| a.sent_to).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A GRAB round: owners that hinted first, then round robin over the
    /// others but those the worker sleeps at (they NOOP when work comes).
    fn grab(&mut self, packet: Bytes, out: &mut Vec<Out>) {
        self.sleeping = false;
        self.woken = false;
        let all = self.ability_owners();
        let mut candidates: Vec<Owner> = all
            .iter()
            .copied()
            .filter(|o| self.hints.contains(o))
            .collect();
        if !all.is_empty() {
            let start = self.cursor % all.len();
            self.cursor = self.cursor.wrapping_add(1);
            for i in 0..all.len() {
                let o = all[(start + i) % all.len()];
                let asleep = self.owners.get(&o).is_some_and(|st| st.asleep);
                if !asleep && !candidates.contains(&o) {
                    candidates.push(o);
                }
            }
        }
        self.hints.clear();
        let Some(&first) = candidates.first() else {
            self.push(
                Kind::Grab {
                    candidates,
                    next: 0,
                    packet,
                },
                Some(bare(PacketType::NoJob)),
            );
            return;
        };
        let id = self.push(
            Kind::Grab {
                candidates,
                next: 1,
                packet: packet.clone(),
            },
            None,
        );
        self.ask_grab(first, id, packet, out);
    }

    /// Asks every owner; the first that knows the job answers.
    fn broadcast(
        &mut self,
        unique: bool,
        key: Bytes,
        packet: Bytes,
        owners: &dyn Owners,
        out: &mut Vec<Out>,
    ) {
        let all = owners.all();
        let unknown = packets::unknown_status(unique, &key);
        let id = self.push(
            Kind::Broadcast {
                waiting: all.len(),
                known: None,
                unknown: unknown.clone(),
            },
            all.is_empty().then_some(unknown),
        );
        for o in all {
            self.ask(o, id, packet.clone(), out);
        }
    }
}
