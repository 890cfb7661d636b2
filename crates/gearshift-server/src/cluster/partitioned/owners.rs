//! Who owns what: every partition's owner as the last beat read it, each
//! node named by a slot number that stays the same for the life of this
//! process (the splitter's [`Owner`]).

use std::collections::HashMap;

use gearshift_core::placement::Placement;
use gearshift_core::split::{Owner, Owners};
use gearshift_store::postgres::lease::NodeAddrs;
use gearshift_store::postgres::partitions::PartitionOwner;

/// Slot numbers by node name, never reused.
#[derive(Debug, Default)]
pub struct Slots(HashMap<String, Owner>);

impl Slots {
    fn of(&mut self, name: &str) -> Owner {
        let next = self.0.len() as Owner;
        *self.0.entry(name.to_owned()).or_insert(next)
    }
}

/// A node that owns partitions (or this node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// Its name.
    pub name: String,
    /// Where its Gearman listener (and so its links) are reached.
    pub addr: String,
}

/// The cluster's partitions and their owners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    placement: Placement,
    /// The owner of each partition, by number.
    by_partition: Vec<Option<Owner>>,
    /// The owners and this node, by slot.
    nodes: HashMap<Owner, NodeRef>,
    local: Owner,
}

impl Ownership {
    /// The view of `owners` for the node named `me`.
    pub fn new(
        placement: Placement,
        owners: &[PartitionOwner],
        me: &NodeAddrs,
        slots: &mut Slots,
    ) -> Self {
        let mut nodes = HashMap::new();
        let local = slots.of(&me.name);
        nodes.insert(
            local,
            NodeRef {
                name: me.name.clone(),
                addr: me.gearman.clone(),
            },
        );
        let mut by_partition = vec![None; placement.count as usize];
        for o in owners {
            let Some(n) = o.node.as_ref().filter(|n| !n.gearman.is_empty()) else {
                continue;
            };
            let slot = slots.of(&n.name);
            nodes.entry(slot).or_insert_with(|| NodeRef {
                name: n.name.clone(),
                addr: n.gearman.clone(),
            });
            if let Some(p) = by_partition.get_mut(o.partition as usize) {
                *p = Some(slot);
            }
        }
        Ownership {
            placement,
            by_partition,
            nodes,
            local,
        }
    }

    /// Nothing known yet (before the first beat): no partition has an owner.
    pub fn empty(me: &NodeAddrs, slots: &mut Slots) -> Self {
        Ownership::new(Placement::new(1), &[], me, slots)
    }

    /// Where functions live.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The node in `slot`, if it owns anything or is this node.
    pub fn node(&self, slot: Owner) -> Option<&NodeRef> {
        self.nodes.get(&slot)
    }

    /// How many partitions each node owns, by name.
    pub fn shares(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .nodes
            .iter()
            .map(|(slot, n)| {
                let count = self
                    .by_partition
                    .iter()
                    .filter(|o| **o == Some(*slot))
                    .count();
                (n.name.clone(), count)
            })
            .collect();
        out.sort();
        out
    }
}

impl Owners for Ownership {
    fn owner_of(&self, function: &[u8]) -> Option<Owner> {
        let p = self.placement.partition_of(function);
        self.by_partition.get(p as usize).copied().flatten()
    }

    fn all(&self) -> Vec<Owner> {
        let mut all: Vec<Owner> = self.nodes.keys().copied().collect();
        all.sort_unstable();
        all
    }

    fn local(&self) -> Owner {
        self.local
    }
}
