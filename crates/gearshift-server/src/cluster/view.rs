//! What the HTTP API shows of the cluster: the node table as the lease
//! thread last read it (once per beat), and this node's name.

use std::sync::Mutex;

use gearshift_store::postgres::lease::NodeRow;

/// The cluster's members, refreshed by the lease thread.
#[derive(Debug)]
pub struct ClusterView {
    /// This node's name.
    pub me: String,
    nodes: Mutex<Vec<NodeRow>>,
}

impl ClusterView {
    /// A view for node `me`, empty until the first read.
    pub fn new(me: String) -> Self {
        ClusterView {
            me,
            nodes: Mutex::new(Vec::new()),
        }
    }

    /// Replaces the node rows.
    pub fn set(&self, nodes: Vec<NodeRow>) {
        if let Ok(mut n) = self.nodes.lock() {
            *n = nodes;
        }
    }

    /// The node rows as last read.
    pub fn nodes(&self) -> Vec<NodeRow> {
        self.nodes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}
