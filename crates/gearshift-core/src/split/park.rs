//! Submissions that found no owner: no node owned the function's partition
//! in this node's view, or its owner refused it because the partition was
//! moving. They wait, in their place among the client's replies, and are
//! sent again when the view changes or the driver says to try again, until
//! the driver gives up on them (the client then gets the refusal).

use bytes::Bytes;

use super::packets::error;
use super::{Kind, Out, Owners, Split};

/// An owner's refusal of a submission for a partition it no longer owns.
pub const NOT_OWNER: &str = "this node no longer owns the function's partition; try again";
/// An owner's answer to an admin line naming a function of a partition it
/// does not own (the line raced a move; asked again, it finds the owner).
pub const ADMIN_NOT_OWNER: &[u8] =
    b"ERR NOT_OWNER this+node+does+not+own+the+function's+partition;+try+again\r\n";
/// An owner's refusal while it stops (gearmand's words; its partitions move).
pub const SHUTTING_DOWN: &str = "Server is shutting down";

/// A submission in flight, kept until answered so it can be sent again.
pub(super) struct Retry {
    function: Bytes,
    packet: Bytes,
}

impl Split {
    /// Keeps submission `id` (answered by the owner of `function`) until
    /// its answer.
    pub(super) fn keep(&mut self, id: u64, function: Bytes, packet: Bytes) {
        self.kept_bytes += packet.len();
        self.retries.insert(id, Retry { function, packet });
    }

    /// Submission `id` is answered: it is not kept any longer; its
    /// function and packet, if it was.
    pub(super) fn answered(&mut self, id: u64) -> Option<(Bytes, Bytes)> {
        let r = self.retries.remove(&id)?;
        self.kept_bytes -= r.packet.len();
        Some((r.function, r.packet))
    }

    /// Whether this reply to entry `id` parks it rather than answers it.
    pub(super) fn parks(&mut self, id: u64, body: &[u8], reply: &Bytes) -> bool {
        let Some(text) = queue_error_text(body) else {
            return false;
        };
        let moving = text == NOT_OWNER.as_bytes() || text == SHUTTING_DOWN.as_bytes();
        if !moving || !self.retries.contains_key(&id) {
            return false;
        }
        self.parked.insert(id, reply.clone());
        true
    }

    /// Parks submission `id` if it is one: its owner closed without
    /// taking it.
    pub(super) fn park_untaken(&mut self, id: u64) -> bool {
        if !self.retries.contains_key(&id) {
            return false;
        }
        let e = error(
            "QUEUE_ERROR",
            "the node that owned this function's partition stopped",
        );
        self.parked.insert(id, e);
        true
    }

    /// Parks submission `id`: nobody owns its function now.
    pub(super) fn park_unowned(&mut self, id: u64) {
        let e = error("QUEUE_ERROR", "no node owns this function's partition now");
        self.parked.insert(id, e);
    }

    /// Whether submissions wait for an owner (the driver then calls
    /// [`Split::retry_parked`] now and then, and [`Split::give_up_parked`]
    /// when they have waited too long).
    pub fn parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Sends every parked submission whose function has an owner to it.
    pub fn retry_parked(&mut self, owners: &dyn Owners, out: &mut Vec<Out>) {
        for (id, refusal) in std::mem::take(&mut self.parked) {
            let to = self
                .retries
                .get(&id)
                .and_then(|r| Some((owners.owner_of(&r.function)?, r.packet.clone())));
            match to {
                Some((owner, packet)) => self.ask(owner, id, packet, out),
                None => {
                    self.parked.insert(id, refusal);
                }
            }
        }
    }

    /// Answers every parked submission with the refusal that parked it.
    pub fn give_up_parked(&mut self, out: &mut Vec<Out>) {
        for (id, refusal) in std::mem::take(&mut self.parked) {
            self.answered(id);
            let mut ended = None;
            if let Some(e) = self.entry(id) {
                // A job submitted again fails as a job, not as a submission.
                let refusal = match &e.kind {
                    Kind::Resubmit { handle } => {
                        ended = Some(handle.clone());
                        super::resubmit::work_fail(handle)
                    }
                    _ => refusal,
                };
                e.done = Some(refusal);
            }
            if let Some(handle) = ended {
                self.foreground_ended(&handle);
            }
        }
        self.release(out);
    }
}

/// The text of an ERROR QUEUE_ERROR body, or None for another error.
fn queue_error_text(body: &[u8]) -> Option<&[u8]> {
    let mut parts = body.splitn(2, |&b| b == 0);
    (parts.next()? == b"QUEUE_ERROR").then(|| parts.next().unwrap_or_default())
}
