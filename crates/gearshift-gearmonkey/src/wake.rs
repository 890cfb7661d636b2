//! GearMonkey clients announce each new job (`PUBLISH channel:{FN}
//! create:{ID}`). One pub/sub connection, subscribed to the channel of
//! every function with a taker, wakes that taker, so an idle taker waits for
//! an announcement (or its next scheduled job, or a safety look) instead of
//! polling Redis. While the subscription is down, takers poll as before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;

use crate::keys;
use crate::stats::Stats;
use crate::take::Gate;

/// The takers to wake, by function, and the live subscription.
#[derive(Default)]
pub struct Wakes {
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    sink: tokio::sync::Mutex<Option<PubSubSink>>,
    live: AtomicBool,
}

impl Wakes {
    /// Whether announcements reach the takers now.
    pub fn live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Wakes `gate` on announcements of `function` from now on.
    pub async fn add(&self, function: &str, gate: Arc<Gate>) {
        lock(&self.gates).insert(function.to_owned(), gate);
        if let Some(sink) = self.sink.lock().await.as_mut() {
            // A failure ends the stream too: the next connection subscribes.
            let _ = sink.subscribe(keys::channel(function)).await;
        }
    }

    /// Wakes every taker (after a gap in the subscription).
    fn wake_all(&self) {
        for gate in lock(&self.gates).values() {
            gate.wake.notify_one();
        }
    }

    /// The taker of the function whose channel this is.
    fn gate_of(&self, channel: &str) -> Option<Arc<Gate>> {
        let function = channel.strip_prefix("channel:")?;
        lock(&self.gates).get(function).cloned()
    }
}

/// The map (a poisoned lock still holds a usable map).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps the subscription up (reconnecting every second while Redis is
/// away) and wakes takers, until aborted.
pub async fn run(client: redis::Client, wakes: Arc<Wakes>, stats: Arc<Stats>) {
    loop {
        match client.get_async_pubsub().await {
            Ok(pubsub) => {
                let (sink, mut stream) = pubsub.split();
                *wakes.sink.lock().await = Some(sink);
                let channels: Vec<String> = lock(&wakes.gates)
                    .keys()
                    .map(|f| keys::channel(f))
                    .collect();
                let subscribed = match wakes.sink.lock().await.as_mut() {
                    Some(sink) if !channels.is_empty() => sink.subscribe(channels).await,
                    _ => Ok(()),
                };
                if subscribed.is_ok() {
                    wakes.live.store(true, Ordering::Release);
                    // Jobs announced while nobody listened.
                    wakes.wake_all();
                    while let Some(msg) = stream.next().await {
                        let create = msg.get_payload_bytes().starts_with(b"create:");
                        if let Some(gate) = create
                            .then(|| wakes.gate_of(msg.get_channel_name()))
                            .flatten()
                        {
                            gate.wake.notify_one();
                        }
                    }
                }
                wakes.live.store(false, Ordering::Release);
                *wakes.sink.lock().await = None;
                Stats::bump(&stats.redis_errors);
                tracing::warn!("gearmonkey: the job announcements' subscription dropped; takers poll until it is back");
            }
            Err(e) => {
                Stats::bump(&stats.redis_errors);
                tracing::debug!("gearmonkey: cannot subscribe to job announcements: {e}");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
