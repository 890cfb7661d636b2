//! A set's store taking partitions on and letting them go while it runs
//! ([`Repartition`]), so a partitioned node's job server need not restart
//! when partitions move. The fence is replaced by one over the new set; the
//! flush statements take the set as arrays, so they stay prepared as they
//! are.

use std::collections::BTreeSet;
use std::sync::Arc;

use postgres::Client;

use super::connect::unreachable_or_refused;
use super::flush::{Fence, SetFence};
use super::pins;
use super::replay::{self, Scope};
use super::PgStore;
use crate::{Repartition, Replayed, Sets, StoreError};
use gearshift_core::Placement;

impl PgStore {
    /// The set this store is fenced on; an error for any other store.
    fn set_fence(&self) -> Result<Arc<SetFence>, StoreError> {
        match &self.fence {
            Fence::Set(set) => Ok(set.clone()),
            _ => Err(StoreError::InvalidRequest(
                "only a partition set's store takes partitions on or lets them go".into(),
            )),
        }
    }

    /// Refuses to change the set with ops buffered: they were placed
    /// against the old one.
    fn nothing_buffered(&self, what: &str) -> Result<(), StoreError> {
        match self.batch.is_empty() {
            true => Ok(()),
            false => Err(StoreError::InvalidRequest(format!(
                "{what} with ops buffered: flush them first"
            ))),
        }
    }

    /// Swaps in the fence over `owned` (partition, epoch), in order.
    fn refence(&mut self, set: &SetFence, mut owned: Vec<(i32, i64)>) {
        owned.sort_unstable();
        self.fence = Fence::Set(Arc::new(SetFence {
            parts: owned.iter().map(|&(p, _)| p).collect(),
            epochs: owned.iter().map(|&(_, e)| e).collect(),
            placement: set.placement.clone(),
            ids: set.ids.clone(),
        }));
    }
}

impl Repartition for PgStore {
    fn partitions(&self) -> Vec<(u32, i64)> {
        let Fence::Set(set) = &self.fence else {
            return Vec::new();
        };
        let mut owned: Vec<(u32, i64)> = set
            .parts
            .iter()
            .zip(&set.epochs)
            .filter_map(|(&p, &e)| Some((u32::try_from(p).ok()?, e)))
            .collect();
        owned.sort_unstable();
        owned
    }

    fn adopt(&mut self, parts: &[(u32, i64)]) -> Result<Replayed, StoreError> {
        let set = self.set_fence()?;
        self.nothing_buffered("adopting partitions")?;
        let mut new: Vec<(i32, i64)> = Vec::with_capacity(parts.len());
        for &(p, epoch) in parts {
            let n = i32::try_from(p)
                .ok()
                .filter(|_| p < set.placement.count.max(1))
                .ok_or_else(|| {
                    StoreError::InvalidRequest(format!(
                        "partition {p} is past the cluster's {} partitions",
                        set.placement.count
                    ))
                })?;
            if set.parts.contains(&n) || new.iter().any(|&(q, _)| q == n) {
                return Err(StoreError::InvalidRequest(format!(
                    "partition {p} is already in this store's set"
                )));
            }
            new.push((n, epoch));
        }
        let next_id = next_id(self.sets.as_ref(), set.ids.start);
        if new.is_empty() {
            return Ok(Replayed {
                next_id,
                ..Replayed::default()
            });
        }
        let server = self.server.clone();
        let read = self.conn().and_then(|(client, _)| {
            let parts = new.iter().map(|&(p, _)| p).collect();
            read_adopted(client, &server, &new, &Scope::Partitions(parts))
        });
        let loaded = match read {
            Ok(loaded) => loaded,
            Err(e) => return Err(self.failed(e)),
        };
        let mut replayed = loaded.replayed();
        replayed.next_id = next_id;
        // Not in memory (a lost connection): the next load reads the new set.
        if let Some(sets) = self.sets.as_mut() {
            merge(sets, loaded);
        }
        let owned = set.parts.iter().copied().zip(set.epochs.iter().copied());
        self.refence(&set, owned.chain(new).collect());
        Ok(replayed)
    }

    fn release(&mut self, parts: &[u32]) -> Result<(), StoreError> {
        let set = self.set_fence()?;
        self.nothing_buffered("releasing partitions")?;
        let gone: BTreeSet<u32> = parts
            .iter()
            .copied()
            .filter(|&p| i32::try_from(p).is_ok_and(|n| set.parts.contains(&n)))
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        if let Some(sets) = self.sets.as_mut() {
            forget(sets, |f| gone.contains(&set.placement.partition_of(f)));
        }
        let owned = set
            .parts
            .iter()
            .copied()
            .zip(set.epochs.iter().copied())
            .filter(|&(p, _)| u32::try_from(p).map_or(true, |p| !gone.contains(&p)));
        self.refence(&set, owned.collect());
        Ok(())
    }

    fn place(&mut self, placement: Placement) -> Result<(), StoreError> {
        let set = self.set_fence()?;
        self.nothing_buffered("changing the placement")?;
        self.fence = Fence::Set(Arc::new(SetFence {
            placement,
            ..(*set).clone()
        }));
        Ok(())
    }

    fn give_function(
        &mut self,
        function: &[u8],
        asked: Option<u32>,
    ) -> Result<Placement, StoreError> {
        let set = self.set_fence()?;
        self.nothing_buffered("moving a function")?;
        let from = set.placement.partition_of(function);
        let epoch = epoch_in(&set, from).ok_or_else(|| {
            StoreError::InvalidRequest(format!("partition {from} is not in this store's set"))
        })?;
        let server = self.server.clone();
        let moved = self.conn().and_then(|(client, _)| {
            pins::move_asked(
                client,
                &server,
                &set.placement,
                (function, asked),
                (from, epoch),
            )
        });
        let placement = match moved {
            Ok(placement) => placement,
            Err(e) => return Err(self.failed(e)),
        };
        if let Some(sets) = self.sets.as_mut() {
            forget(sets, |f| f == function);
        }
        self.fence = Fence::Set(Arc::new(SetFence {
            placement: placement.clone(),
            ..(*set).clone()
        }));
        Ok(placement)
    }

    fn adopt_function(
        &mut self,
        function: &[u8],
        placement: Placement,
    ) -> Result<Replayed, StoreError> {
        let set = self.set_fence()?;
        self.nothing_buffered("taking a function on")?;
        let to = placement.partition_of(function);
        let epoch = epoch_in(&set, to).ok_or_else(|| {
            StoreError::InvalidRequest(format!("partition {to} is not in this store's set"))
        })?;
        let server = self.server.clone();
        let n = to as i32;
        let scope = Scope::Function(n, function.to_vec());
        let read = self
            .conn()
            .and_then(|(client, _)| read_adopted(client, &server, &[(n, epoch)], &scope));
        let mut loaded = match read {
            Ok(loaded) => loaded,
            Err(e) => return Err(self.failed(e)),
        };
        if let Some(sets) = self.sets.as_mut() {
            leave_out_known(&mut loaded, sets);
        }
        let mut replayed = loaded.replayed();
        replayed.next_id = next_id(self.sets.as_ref(), set.ids.start);
        if let Some(sets) = self.sets.as_mut() {
            merge(sets, loaded);
        }
        self.fence = Fence::Set(Arc::new(SetFence {
            placement,
            ..(*set).clone()
        }));
        Ok(replayed)
    }
}

/// The epoch `set` holds partition `p` at.
fn epoch_in(set: &SetFence, p: u32) -> Option<i64> {
    let n = i32::try_from(p).ok()?;
    let i = set.parts.iter().position(|&q| q == n)?;
    set.epochs.get(i).copied()
}

/// Drops from `loaded` what `known` already holds.
fn leave_out_known(loaded: &mut Sets, known: &Sets) {
    loaded.live.retain(|id, _| !known.live.contains_key(id));
    loaded.dead.retain(|id, _| !known.dead.contains_key(id));
    loaded
        .schedules
        .retain(|id, _| !known.schedules.contains_key(id));
    loaded.kept.retain(|id, _| !known.kept.contains_key(id));
    loaded
        .functions
        .retain(|f, _| !known.functions.contains_key(f));
    loaded.running.retain(|id| !known.running.contains(id));
}

/// The adopted partitions' rows, once each is seen at its epoch (else
/// [`StoreError::Fenced`]): the previous owner's last flush has then
/// committed or failed, as a takeover waits for the flushes it fences.
fn read_adopted(
    client: &mut Client,
    server: &str,
    new: &[(i32, i64)],
    scope: &Scope,
) -> Result<Sets, StoreError> {
    let parts: Vec<i32> = new.iter().map(|&(p, _)| p).collect();
    let epochs: Vec<i64> = new.iter().map(|&(_, e)| e).collect();
    let at: i64 = client
        .query_one(
            "SELECT count(*) FROM gearshift_partitions p
             JOIN UNNEST($1::int[], $2::bigint[]) AS o(partition, epoch)
             ON p.partition = o.partition AND p.epoch = o.epoch",
            &[&parts, &epochs],
        )
        .and_then(|row| row.try_get(0))
        .map_err(|e| unreachable_or_refused(&e, server, "the adopted partitions' epochs"))?;
    if usize::try_from(at).ok() != Some(new.len()) {
        return Err(StoreError::Fenced(format!(
            "{server} (partitions {parts:?})"
        )));
    }
    replay::load(client, server, scope)
}

/// The first handle number the store hands out as it stands, as its
/// replay says it: past its high-water mark and every id it holds (the
/// block's start when nothing is in memory).
fn next_id(sets: Option<&Sets>, start: u64) -> u64 {
    let Some(s) = sets else {
        return start.max(1);
    };
    crate::first_unused(
        s.high,
        [
            s.live.keys().next_back().copied(),
            s.dead.keys().next_back().copied(),
            s.schedules.keys().next_back().copied(),
            s.kept.keys().next_back().copied(),
        ],
    )
}

/// Adds the adopted partitions' rows to the state in memory (ids and
/// names are the database's keys, so none is already there); the
/// high-water mark stays the store's.
fn merge(sets: &mut Sets, loaded: Sets) {
    sets.live.extend(loaded.live);
    sets.dead.extend(loaded.dead);
    sets.schedules.extend(loaded.schedules);
    sets.kept.extend(loaded.kept);
    sets.functions.extend(loaded.functions);
    sets.running.extend(loaded.running);
}

/// Drops from memory every row of a function `gone` says was let go, and
/// its jobs' running marks.
fn forget(sets: &mut Sets, gone: impl Fn(&[u8]) -> bool) {
    let mut jobs = BTreeSet::new();
    sets.live.retain(|&id, r| {
        let keep = !gone(&r.function);
        if !keep {
            jobs.insert(id);
        }
        keep
    });
    sets.dead.retain(|&id, (r, _)| {
        let keep = !gone(&r.function);
        if !keep {
            jobs.insert(id);
        }
        keep
    });
    sets.running.retain(|id| !jobs.contains(id));
    sets.schedules.retain(|_, s| !gone(&s.function));
    sets.kept.retain(|_, k| !gone(&k.function));
    sets.functions.retain(|name, _| !gone(name));
}
