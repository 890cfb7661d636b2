//! An I/O thread's work run as a task of a thread that already drives a
//! `LocalSet` (a partitioned node's router, when the job server has one I/O
//! thread): the router's connections, the node's own link and the job
//! server's connections then share one thread, and a packet for a partition
//! served here wakes no other thread on its way.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{IoSettings, Sink, ToIo};

type Start = Box<dyn FnOnce() + Send>;

/// Starts I/O work on the `LocalSet` it was made on. Cheap to clone.
#[derive(Clone)]
pub struct LocalIo(mpsc::UnboundedSender<Start>);

impl std::fmt::Debug for LocalIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalIo")
    }
}

impl LocalIo {
    /// Takes starts on the current `LocalSet` (panics outside one).
    pub fn start() -> LocalIo {
        let (tx, mut rx) = mpsc::unbounded_channel::<Start>();
        tokio::task::spawn_local(async move {
            while let Some(start) = rx.recv().await {
                start();
            }
        });
        LocalIo(tx)
    }

    /// Runs an I/O thread's work as a task there; its handle once started
    /// (None when that `LocalSet` has ended).
    pub(crate) fn run(
        &self,
        settings: IoSettings,
        sink: Sink,
        inbox: mpsc::UnboundedReceiver<ToIo>,
    ) -> Option<oneshot::Receiver<JoinHandle<()>>> {
        let (tx, rx) = oneshot::channel();
        let start: Start = Box::new(move || {
            let _ = tx.send(tokio::task::spawn_local(super::main(settings, sink, inbox)));
        });
        self.0.send(start).ok()?;
        Some(rx)
    }
}
