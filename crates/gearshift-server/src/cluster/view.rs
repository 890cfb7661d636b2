//! What the HTTP API shows of the cluster: the node table (and on
//! partitioned nodes who owns each partition) as last read, once per
//! beat, and this node's name.

use std::sync::Mutex;

use gearshift_store::postgres::lease::NodeRow;
use gearshift_store::postgres::partitions::PartitionOwner;

/// The cluster's members, refreshed by the lease thread.
#[derive(Debug)]
pub struct ClusterView {
    /// This node's name.
    pub me: String,
    nodes: Mutex<Vec<NodeRow>>,
    /// Every partition's owner, on partitioned nodes.
    partitions: Mutex<Vec<PartitionOwner>>,
}

impl ClusterView {
    /// A view for node `me`, empty until the first read.
    pub fn new(me: String) -> Self {
        ClusterView {
            me,
            nodes: Mutex::new(Vec::new()),
            partitions: Mutex::new(Vec::new()),
        }
    }

    /// Replaces the node rows.
    pub fn set(&self, nodes: Vec<NodeRow>) {
        if let Ok(mut n) = self.nodes.lock() {
            *n = nodes;
        }
    }

    /// Replaces the partitions' owners.
    pub fn set_partitions(&self, owners: Vec<PartitionOwner>) {
        if let Ok(mut p) = self.partitions.lock() {
            *p = owners;
        }
    }

    /// The partitions' owners as last read (empty unless partitioned).
    pub fn partitions(&self) -> Vec<PartitionOwner> {
        self.partitions
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The node rows as last read.
    pub fn nodes(&self) -> Vec<NodeRow> {
        self.nodes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}
