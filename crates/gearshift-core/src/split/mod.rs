//! The splitter: one client connection on a partitioned node, split over
//! the owners of the partitions its packets name (sans-IO).
//!
//! Each owner serves this connection's sub-connection as an ordinary
//! Gearman connection; the splitter decides where each request goes and
//! merges what the owners send back into the one stream the client
//! expects. Replies (JOB_CREATED, STATUS_RES, JOB_ASSIGN, ...) reach the
//! client in the order it sent the requests (libgearman matches
//! JOB_CREATED to submissions by order), and each owner's packets stay in
//! that owner's order (a JOB_CREATED before its job's WORK_COMPLETE).
//!
//! - `client`: requests from the client, and where each goes;
//! - `admin`: admin text lines, asked of the owners and merged;
//! - `owner`: what the owners send, held until its turn;
//! - `park`: submissions waiting for their partition's owner;
//! - `resubmit`: foreground jobs submitted again after a move;
//! - `packets`: reading and writing the few packets it looks into.

mod admin;
mod client;
pub use park::{ADMIN_NOT_OWNER, NOT_OWNER, SHUTTING_DOWN};
pub use resubmit::JOB_MOVED;
mod owner;
mod packets;
mod park;
mod resubmit;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_admin;
#[cfg(test)]
mod tests_park;
#[cfg(test)]
mod tests_resubmit;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::ids::{IdMap, IdSet};
use bytes::{Bytes, BytesMut};

/// A node slot chosen by the driver.
pub type Owner = u32;

/// Who owns what right now.
pub trait Owners {
    /// The owner of `function`'s partition, or None while no node owns it.
    fn owner_of(&self, function: &[u8]) -> Option<Owner>;
    /// Every live owner, this node's own slot included.
    fn all(&self) -> Vec<Owner>;
    /// This node's own slot: admin text lines and ECHO go there.
    fn local(&self) -> Owner;
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Whole packets (or admin text) for `owner`'s sub-connection, opened
    /// by the driver on first use.
    ToOwner(Owner, Bytes),
    /// Bytes for the client.
    ToClient(Bytes),
    /// Close the client's connection, for this reason.
    Close(String),
}

/// What a connection is, as the server's connection counts say: a worker
/// registered a function or holds a job; an admin connection sent only
/// admin text; any other is a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Submits jobs, asks statuses, or has done nothing yet.
    Client,
    /// Registered a function or holds a job.
    Worker,
    /// Sent admin text only.
    Admin,
}

/// Requests waiting for their replies past which the client is closed
/// (it sends without ever reading).
const MAX_PENDING: usize = 1 << 20;

/// One connection's splitting.
pub struct Split {
    max_packet: usize,
    /// Requests with a reply, in the client's order; the front is `head`.
    pending: VecDeque<Entry>,
    head: u64,
    /// The sub-connections.
    owners: IdMap<Owner, OwnerState>,
    /// Sub-connections that are gone, with output still to release in order.
    retired: Vec<OwnerState>,
    /// The worker's abilities: the packet that declared each, and the owner
    /// it was sent to.
    abilities: BTreeMap<Bytes, Ability>,
    /// SET_CLIENT_ID and OPTION_REQ packets, sent to every new sub-connection.
    client_id: Option<Bytes>,
    options: Vec<Bytes>,
    /// Jobs assigned to this worker, by handle: who assigned them
    /// (bounded by the jobs the worker holds).
    assigned: IdMap<Bytes, Owner>,
    /// The worker sent PRE_SLEEP and no GRAB since; and was NOOPed since.
    sleeping: bool,
    woken: bool,
    /// The node stops: no job is handed out any more ([`Split::drain`]).
    draining: bool,
    /// Owners that sent NOOP since the last GRAB round began.
    hints: BTreeSet<Owner>,
    /// Round robin between owners, advanced every GRAB.
    cursor: usize,
    /// Bytes held for the client.
    held_bytes: usize,
    /// Submissions in flight, kept to be sent again; their bytes.
    retries: IdMap<u64, park::Retry>,
    kept_bytes: usize,
    /// Submissions waiting for an owner, with the refusal to give if none
    /// comes.
    parked: BTreeMap<u64, Bytes>,
    /// Foreground jobs the client waits on, by the client's handle (bytes
    /// counted in `kept_bytes`).
    foreground: IdMap<Bytes, resubmit::Foreground>,
    /// Jobs submitted again: the owner's handle to the client's, and back.
    aliases: IdMap<Bytes, Bytes>,
    renamed: IdMap<Bytes, Bytes>,
    /// The client sent admin text; a binary packet.
    sent_text: bool,
    sent_packet: bool,
}

/// A sub-connection's state.
#[derive(Default)]
struct OwnerState {
    /// What its next replies answer, in order.
    expect: VecDeque<Expect>,
    /// Its output not yet released: behind a reply that waits its turn.
    held: VecDeque<Held>,
    /// Foreground jobs this client submitted there, unfinished (bounded by
    /// the client's outstanding foreground jobs).
    foreground: IdSet<Bytes>,
    /// The admin lines it was asked, in order, and the part of the
    /// current answer read so far.
    text: VecDeque<u64>,
    partial: BytesMut,
    /// It was sent PRE_SLEEP and since then no GRAB or CAN_DO, and it sent
    /// no NOOP: it NOOPs when work for this worker arrives there, so a GRAB
    /// round need not ask it and a PRE_SLEEP need not be sent again.
    asleep: bool,
}

/// What an owner's reply answers.
enum Expect {
    Entry(u64),
    /// A request re-sent to a new sub-connection (options): not the client's.
    Swallow,
}

/// An owner's output waiting for its turn.
enum Held {
    /// The reply to this entry (kept in the entry).
    Reply(u64),
    Packet(Bytes),
}

/// A request waiting for its reply.
struct Entry {
    kind: Kind,
    /// The reply to send, once known.
    done: Option<Bytes>,
}

enum Kind {
    /// Answered by one owner (`foreground`: a foreground submission).
    Single { foreground: bool },
    /// GRAB_JOB*: the candidates in the order to ask them, the next to ask.
    Grab {
        candidates: Vec<Owner>,
        next: usize,
        packet: Bytes,
    },
    /// Asked of several owners; the first that knows the job answers.
    Broadcast {
        waiting: usize,
        known: Option<Bytes>,
        unknown: Bytes,
    },
    /// An admin line, asked of one owner or several.
    Text(admin::TextAsk),
    /// A foreground job submitted again after a move, known to the client
    /// as `handle` (its reply is not the client's).
    Resubmit { handle: Bytes },
}

struct Ability {
    packet: Bytes,
    sent_to: Option<Owner>,
}

impl Split {
    /// A connection whose packets may carry up to `max_packet` bytes.
    pub fn new(max_packet: usize) -> Split {
        Split {
            max_packet,
            pending: VecDeque::new(),
            head: 0,
            owners: IdMap::default(),
            retired: Vec::new(),
            abilities: BTreeMap::new(),
            client_id: None,
            options: Vec::new(),
            assigned: IdMap::default(),
            sleeping: false,
            woken: false,
            draining: false,
            hints: BTreeSet::new(),
            cursor: 0,
            held_bytes: 0,
            retries: IdMap::default(),
            kept_bytes: 0,
            parked: BTreeMap::new(),
            foreground: IdMap::default(),
            aliases: IdMap::default(),
            renamed: IdMap::default(),
            sent_text: false,
            sent_packet: false,
        }
    }

    /// What the connection is now ([`Role`]).
    pub fn role(&self) -> Role {
        if !self.abilities.is_empty() || !self.assigned.is_empty() {
            Role::Worker
        } else if self.sent_text && !self.sent_packet {
            Role::Admin
        } else {
            Role::Client
        }
    }

    /// The node stops: GRAB gets NO_JOB and sleep is not passed on, while
    /// what runs and waits finishes ([`Split::drained`]).
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Nothing is left to finish: no reply waits, no job this worker holds
    /// and no foreground job this client waits on.
    pub fn drained(&self) -> bool {
        self.pending.is_empty()
            && self.assigned.is_empty()
            && self.parked.is_empty()
            && self.owners.values().all(|st| st.foreground.is_empty())
    }

    /// Owners this connection has a sub-connection with.
    pub fn owners_in_use(&self) -> Vec<Owner> {
        let mut v: Vec<Owner> = self.owners.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Bytes held for the client, waiting for replies before them: the
    /// driver stops reading the client past its output limit.
    pub fn buffered(&self) -> usize {
        self.held_bytes + self.kept_bytes + self.pending.len() * 16
    }

    /// The sub-connection to `owner`, opened (client id and options sent
    /// first) if there is none.
    fn open(&mut self, owner: Owner, out: &mut Vec<Out>) -> &mut OwnerState {
        if !self.owners.contains_key(&owner) {
            let mut st = OwnerState::default();
            if let Some(id) = &self.client_id {
                out.push(Out::ToOwner(owner, id.clone()));
            }
            for o in &self.options {
                st.expect.push_back(Expect::Swallow);
                out.push(Out::ToOwner(owner, o.clone()));
            }
            self.owners.insert(owner, st);
        }
        self.owners.entry(owner).or_default()
    }

    /// Sends `packet` to `owner`, expecting a reply for entry `id`.
    fn ask(&mut self, owner: Owner, id: u64, packet: Bytes, out: &mut Vec<Out>) {
        self.open(owner, out).expect.push_back(Expect::Entry(id));
        out.push(Out::ToOwner(owner, packet));
    }

    /// Asks `owner` for a job (a GRAB wakes the sub-connection there).
    fn ask_grab(&mut self, owner: Owner, id: u64, packet: Bytes, out: &mut Vec<Out>) {
        self.open(owner, out).asleep = false;
        self.ask(owner, id, packet, out);
    }

    /// Sends `owner` the worker's PRE_SLEEP unless it sleeps there already.
    fn sleep_at(&mut self, owner: Owner, packet: &Bytes, out: &mut Vec<Out>) {
        let st = self.open(owner, out);
        if !std::mem::replace(&mut st.asleep, true) {
            out.push(Out::ToOwner(owner, packet.clone()));
        }
    }

    /// Queues a request with a reply; returns its id.
    fn push(&mut self, kind: Kind, done: Option<Bytes>) -> u64 {
        let id = self.head + self.pending.len() as u64;
        self.pending.push_back(Entry { kind, done });
        id
    }

    fn entry(&mut self, id: u64) -> Option<&mut Entry> {
        let i = usize::try_from(id.checked_sub(self.head)?).ok()?;
        self.pending.get_mut(i)
    }
}
