//! The server's live events the bridge needs, as [`ServerEvent`]s: workers
//! joining and leaving (for the registry) and retries (for `QUEUED` with
//! the retry time). These kinds are rare, so subscribing costs nothing per job.

use std::sync::Arc;

use gearshift_core::events::{EventKind, Kind};
use gearshift_core::history::Step;
use gearshift_server::events::EventBus;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::ServerEvent;

/// Subscribes to the rare kinds the bridge needs (workers joining and
/// leaving, retries: nothing per job) and forwards them.
pub fn forward(bus: &Arc<EventBus>) -> mpsc::UnboundedReceiver<ServerEvent> {
    let mask = Kind::WorkerJoined.bit() | Kind::WorkerLeft.bit() | Kind::Retrying.bit();
    let mut sub = bus.subscribe(mask);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let batch = match sub.rx.recv().await {
                Ok(b) => b,
                Err(RecvError::Lagged(_)) => {
                    let _ = tx.send(ServerEvent::Lagged);
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            for e in batch.iter() {
                let ev = match &e.kind {
                    EventKind::WorkerJoined(w) => ServerEvent::WorkerJoined {
                        id: w.id,
                        fd: w.fd,
                        label: String::from_utf8_lossy(&w.label).into_owned(),
                        address: w.address.clone(),
                        identity: w.identity.clone(),
                    },
                    EventKind::WorkerLeft(w) => ServerEvent::WorkerLeft { id: w.id },
                    EventKind::Job {
                        handle,
                        step: Step::RetryAt(at),
                        ..
                    } => ServerEvent::Retrying {
                        handle: String::from_utf8_lossy(handle).into_owned(),
                        at_ms: i64::try_from(*at).unwrap_or(i64::MAX),
                    },
                    _ => continue,
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        }
    });
    rx
}
