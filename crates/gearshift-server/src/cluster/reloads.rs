//! Config reloads (SIGHUP) on a cluster node: the node keeps the latest,
//! and whichever job server it runs now puts it in force at its start and
//! at every later reload.

use std::sync::Arc;

use tokio::sync::watch;

use crate::{Reload, Reloader};

/// The latest reload, if any.
pub(crate) type Reloads = watch::Receiver<Option<Arc<Reload>>>;

/// Forwards reloads to a job server while alive.
pub(super) struct Following(tokio::task::JoinHandle<()>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Puts the latest reload in force through `reloader` now, and each later
/// one as it comes, until the result is dropped.
pub(super) fn follow(reloader: Reloader, reloads: &Reloads) -> Following {
    let mut reloads = reloads.clone();
    Following(tokio::spawn(async move {
        loop {
            let latest = reloads.borrow_and_update().clone();
            if let Some(r) = latest {
                reloader.reload((*r).clone());
            }
            if reloads.changed().await.is_err() {
                return;
            }
        }
    }))
}
