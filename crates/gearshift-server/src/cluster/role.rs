//! What a cluster node sets on the server it runs in each role: the
//! leader's relay gate, lease and cluster view; a partitioned node's link
//! door, owned functions and HTTP submission address.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::Server;

impl Server {
    /// Publishes this server's entrance for links in `door` while it runs.
    pub(crate) fn open_door(&mut self, door: Arc<watch::Sender<Option<crate::accept::LinkDoor>>>) {
        self.door = Some(door);
    }

    /// Runs its I/O thread, if it has only one, on `here`'s thread.
    pub(crate) fn run_io_here(&mut self, here: crate::LocalIo) {
        self.local_io = Some(here);
    }

    /// Counts connection events in `counters` (shared with a partitioned
    /// node's listeners, and kept across its job servers).
    pub(crate) fn count_in(&mut self, counters: Arc<crate::counters::ConnCounters>) {
        self.counters = counters;
    }

    /// Takes submissions only for the functions `owns` says.
    pub(crate) fn only_functions(&mut self, owns: crate::hub::Owns) {
        self.owns = Some(owns);
    }

    /// Sends the HTTP API's submissions to the Gearman listener at `addr`
    /// (a partitioned node's, which routes them to their partition).
    pub(crate) fn submit_through(&mut self, addr: SocketAddr) {
        self.submit_to = Some(addr);
    }

    /// Accepts connections relayed by the cluster's other nodes (they
    /// start with a preamble naming the client: [`super::relay`]).
    pub fn accept_relays(&mut self, gate: Arc<super::relay::RelayGate>) {
        self.relays = Some(gate);
    }

    /// Acts only while `lease` is trusted: past it, nothing the core does
    /// leaves the hub (a deposed cluster leader).
    pub fn obey_lease(&mut self, lease: Arc<super::trust::LeaseTrust>) {
        self.lease = Some(lease);
    }

    /// Shows the cluster's members in the HTTP API (`/api/v1/cluster`).
    pub fn show_cluster(&mut self, view: Arc<super::view::ClusterView>) {
        self.cluster = Some(view);
    }
}
