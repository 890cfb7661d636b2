//! Foreground jobs that outlive a move. A foreground job's submission is
//! kept until the job ends. When its owner closes the sub-connection in
//! order, the job never ran there (an owner that stops in order lets its
//! running jobs finish first) and died with that owner (foreground jobs
//! are not stored), so it is submitted again to the function's owner now,
//! waiting like any parked submission. The client keeps the handle it was
//! given: the new owner's handle is renamed to it on the way out, and back
//! on the way in.

use bytes::Bytes;
use gearshift_proto::frame::Magic;
use gearshift_proto::packet_type::PacketType;

use super::packets::{self, first_arg};
use super::{Held, Kind, Out, Owner, Split};

/// The ERROR code with which an owner that hands a partition over tells a
/// waiting client's sub-connection that a foreground job, not yet run,
/// left with it (the text is the job's handle): the job is submitted again
/// to the function's new owner, as after an orderly close. Only a
/// splitter ever gets it.
pub const JOB_MOVED: &str = "JOB_MOVED";

/// A foreground job this client waits on.
pub(super) struct Foreground {
    function: Bytes,
    packet: Bytes,
}

impl Split {
    /// Foreground job `handle` was created from `packet`: kept until it ends.
    pub(super) fn keep_foreground(&mut self, handle: Bytes, function: Bytes, packet: Bytes) {
        self.kept_bytes += packet.len();
        if let Some(old) = self
            .foreground
            .insert(handle, Foreground { function, packet })
        {
            self.kept_bytes -= old.packet.len();
        }
    }

    /// The job the client knows as `handle` ended (or failed here).
    pub(super) fn foreground_ended(&mut self, handle: &[u8]) {
        if let Some(f) = self.foreground.remove(handle) {
            self.kept_bytes -= f.packet.len();
        }
        if let Some(theirs) = self.renamed.remove(handle) {
            self.aliases.remove(&theirs);
        }
    }

    /// The owner's job `theirs` died with its owner's orderly close: true
    /// if it waits to be submitted again, false if it fails (unknown).
    pub(super) fn resubmit(&mut self, theirs: &Bytes) -> bool {
        let handle = self.client_handle(theirs);
        if let Some(mine) = self.aliases.remove(theirs) {
            self.renamed.remove(&mine);
        }
        let Some(f) = self.foreground.get(&handle) else {
            return false;
        };
        let (function, packet) = (f.function.clone(), f.packet.clone());
        let id = self.push(
            Kind::Resubmit {
                handle: handle.clone(),
            },
            None,
        );
        self.keep(id, function, packet);
        self.parked.insert(id, work_fail(&handle));
        true
    }

    /// `owner` handed over its partition with the foreground job `theirs`,
    /// which never ran there: submitted again (it fails if unknown).
    pub(super) fn job_moved(&mut self, owner: Owner, theirs: &Bytes, out: &mut Vec<Out>) {
        if let Some(st) = self.owners.get_mut(&owner) {
            st.foreground.remove(theirs);
        }
        if !self.resubmit(theirs) {
            let handle = self.client_handle(theirs);
            self.foreground_ended(&handle);
            self.emit(owner, work_fail(&handle), out);
        }
    }

    /// The new owner's answer to the submission again of `handle`.
    pub(super) fn resubmitted(
        &mut self,
        owner: Owner,
        id: u64,
        handle: Bytes,
        kind: PacketType,
        body: &Bytes,
    ) {
        let done = if kind == PacketType::JobCreated {
            let theirs = first_arg(body);
            self.aliases.insert(theirs.clone(), handle.clone());
            self.renamed.insert(handle, theirs.clone());
            if let Some(st) = self.owners.get_mut(&owner) {
                st.foreground.insert(theirs);
            }
            // The client already has its JOB_CREATED.
            Bytes::new()
        } else {
            self.foreground_ended(&handle);
            work_fail(&handle)
        };
        if let Some(e) = self.entry(id) {
            e.done = Some(done);
        }
        if let Some(st) = self.owners.get_mut(&owner) {
            st.held.push_back(Held::Reply(id));
        }
    }

    /// The client's name for the owner's handle `theirs`.
    pub(super) fn client_handle(&self, theirs: &Bytes) -> Bytes {
        self.aliases.get(theirs).unwrap_or(theirs).clone()
    }

    /// The owner's name for the client's handle `mine`, if it was renamed.
    pub(super) fn owner_handle(&self, mine: &[u8]) -> Option<&Bytes> {
        self.renamed.get(mine)
    }

    /// An owner's packet about a job submitted again, with the client's
    /// handle in place of the owner's (others unchanged).
    pub(super) fn rename(&self, kind: PacketType, body: &Bytes, bytes: Bytes) -> Bytes {
        use PacketType::*;
        if self.aliases.is_empty()
            || !matches!(
                kind,
                WorkStatus
                    | WorkData
                    | WorkWarning
                    | WorkComplete
                    | WorkFail
                    | WorkException
                    | StatusRes
            )
        {
            return bytes;
        }
        let theirs = first_arg(body);
        let Some(mine) = self.aliases.get(&theirs) else {
            return bytes;
        };
        let rest = body.get(theirs.len()..).unwrap_or_default();
        let mut renamed = Vec::with_capacity(mine.len() + rest.len());
        renamed.extend_from_slice(mine);
        renamed.extend_from_slice(rest);
        packets::raw(Magic::Res, kind, &renamed)
    }
}

/// A WORK_FAIL for the client's `handle`.
pub(super) fn work_fail(handle: &[u8]) -> Bytes {
    packets::packet(Magic::Res, PacketType::WorkFail, &[handle])
}
