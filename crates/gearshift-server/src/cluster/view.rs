//! What the HTTP API shows of the cluster: the node table (and on
//! partitioned nodes who owns each partition) as last read, once per
//! beat, and this node's name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use gearshift_core::placement::Placement;
use gearshift_core::split::Role;
use gearshift_store::postgres::lease::NodeRow;
use gearshift_store::postgres::partitions::PartitionOwner;
use gearshift_store::postgres::pins::PinMove;

/// The cluster's members, refreshed by the lease thread.
#[derive(Debug)]
pub struct ClusterView {
    /// This node's name.
    pub me: String,
    nodes: Mutex<Vec<NodeRow>>,
    /// Every partition's owner, on partitioned nodes.
    partitions: Mutex<Vec<PartitionOwner>>,
    /// Which partition each function lives in, on partitioned nodes.
    placement: Mutex<Option<Placement>>,
    /// Pins asked for and not in force yet.
    asked: Mutex<Vec<PinMove>>,
    /// The connections a partitioned node accepted, by role (its job
    /// server sees each once per owner it talks to).
    entry: OnceLock<EntryRoles>,
}

/// Connections by role: clients, workers, admin.
#[derive(Debug, Default)]
pub struct EntryRoles([AtomicU64; 3]);

impl EntryRoles {
    /// A connection's role changed (None: it opened, or closed).
    pub fn moved(&self, from: Option<Role>, to: Option<Role>) {
        let slot = |r: Role| match r {
            Role::Client => 0,
            Role::Worker => 1,
            Role::Admin => 2,
        };
        if from == to {
            return;
        }
        if let Some(r) = from {
            self.0[slot(r)].fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(r) = to {
            self.0[slot(r)].fetch_add(1, Ordering::AcqRel);
        }
    }

    /// (clients, workers, admin).
    pub fn counts(&self) -> (u64, u64, u64) {
        let n = |i: usize| self.0[i].load(Ordering::Acquire);
        (n(0), n(1), n(2))
    }
}

impl ClusterView {
    /// A view for node `me`, empty until the first read.
    pub fn new(me: String) -> Self {
        ClusterView {
            me,
            nodes: Mutex::new(Vec::new()),
            partitions: Mutex::new(Vec::new()),
            placement: Mutex::new(None),
            asked: Mutex::new(Vec::new()),
            entry: OnceLock::new(),
        }
    }

    /// Counts the connections this partitioned node accepts (from now on
    /// they are what its connection counts show).
    pub fn entry_roles(&self) -> &EntryRoles {
        self.entry.get_or_init(EntryRoles::default)
    }

    /// The connections this node accepted, by role, if it counts them
    /// (clients, workers, admin).
    pub fn entry_counts(&self) -> Option<(u64, u64, u64)> {
        self.entry.get().map(EntryRoles::counts)
    }

    /// Replaces the node rows.
    pub fn set(&self, nodes: Vec<NodeRow>) {
        if let Ok(mut n) = self.nodes.lock() {
            *n = nodes;
        }
    }

    /// Replaces the partitions' owners, the functions' placement and the
    /// pins asked for.
    pub fn set_partitions(
        &self,
        owners: Vec<PartitionOwner>,
        placement: Placement,
        asked: Vec<PinMove>,
    ) {
        if let Ok(mut p) = self.partitions.lock() {
            *p = owners;
        }
        if let Ok(mut p) = self.placement.lock() {
            *p = Some(placement);
        }
        if let Ok(mut a) = self.asked.lock() {
            *a = asked;
        }
    }

    /// The pins asked for and not in force yet, with the partition each
    /// function lives in now and the one asked (None: unpinned).
    pub fn pins_asked(&self) -> Vec<(bytes::Bytes, u32, Option<u32>)> {
        let asked = self.asked.lock().map(|a| a.clone()).unwrap_or_default();
        let placement = self.placement.lock();
        let Some(p) = placement.as_ref().ok().and_then(|p| p.as_ref()) else {
            return Vec::new();
        };
        asked
            .into_iter()
            .map(|m| {
                let from = p.partition_of(&m.function);
                (m.function, from, m.partition)
            })
            .collect()
    }

    /// The functions placed by hand, with their partitions.
    pub fn pins(&self) -> Vec<(bytes::Bytes, u32)> {
        let placement = self.placement.lock();
        let pins = placement.as_ref().ok().and_then(|p| p.as_ref());
        pins.map_or_else(Vec::new, |p| {
            p.pins.iter().map(|(f, &n)| (f.clone(), n)).collect()
        })
    }

    /// The HTTP address of the node serving `function`, when that is
    /// another node (None: this node, or nobody known).
    pub fn function_peer(&self, function: &[u8]) -> Option<String> {
        let owner = self.function_owner(function)?;
        if owner == self.me {
            return None;
        }
        self.nodes()
            .into_iter()
            .find(|n| n.node.name == owner)?
            .node
            .http
    }

    /// The partition `function` lives in (None: not partitioned).
    pub fn partition_of(&self, function: &[u8]) -> Option<u32> {
        Some(self.placement.lock().ok()?.as_ref()?.partition_of(function))
    }

    /// The name of the node serving `function` (None: nobody known).
    pub fn function_owner(&self, function: &[u8]) -> Option<String> {
        let partition = self.partition_of(function)?;
        self.partitions()
            .into_iter()
            .find(|p| p.partition == partition)?
            .node
            .map(|n| n.name)
    }

    /// The name of the node whose HTTP address is `http`.
    pub fn name_at(&self, http: &str) -> Option<String> {
        self.nodes()
            .into_iter()
            .find(|n| n.node.http.as_deref() == Some(http))
            .map(|n| n.node.name)
    }

    /// The partitions' owners as last read (empty unless partitioned).
    pub fn partitions(&self) -> Vec<PartitionOwner> {
        self.partitions
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The HTTP addresses of the other nodes that own partitions now.
    pub fn partition_peers(&self) -> Vec<String> {
        let owners: std::collections::BTreeSet<String> = self
            .partitions()
            .into_iter()
            .filter_map(|p| p.node.map(|n| n.name))
            .collect();
        self.nodes()
            .into_iter()
            .filter(|n| n.node.name != self.me && owners.contains(&n.node.name))
            .filter_map(|n| n.node.http)
            .collect()
    }

    /// The node rows as last read.
    pub fn nodes(&self) -> Vec<NodeRow> {
        self.nodes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}
