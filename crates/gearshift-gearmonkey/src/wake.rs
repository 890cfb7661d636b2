//! GearMonkey announces each new job (`PUBLISH channel:{FN} create:{ID}`)
//! and each finished one (`finish:{ID}`). One pub/sub connection,
//! subscribed to the channel of every function the bridge takes from or
//! gives to, wakes the function's taker on `create:` and the task following
//! a given job on its `finish:`, so neither polls Redis at a short
//! interval. While the subscription is down, both poll as before.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::Notify;

use crate::keys;
use crate::stats::Stats;
use crate::take::Gate;

/// Who to wake, and the live subscription.
#[derive(Default)]
pub struct Wakes {
    /// Functions whose channel is subscribed (or will be, on connecting).
    channels: Mutex<HashSet<String>>,
    /// Takers by function.
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    /// Tasks following a given job, by function and id.
    followers: Mutex<HashMap<(String, u64), Arc<Notify>>>,
    sink: tokio::sync::Mutex<Option<PubSubSink>>,
    live: AtomicBool,
}

/// A follower's registration; dropping it forgets the follower.
pub struct Following {
    wakes: Arc<Wakes>,
    key: (String, u64),
    /// Notified on the job's `finish:` announcement.
    pub finished: Arc<Notify>,
}

impl Drop for Following {
    fn drop(&mut self) {
        lock(&self.wakes.followers).remove(&self.key);
    }
}

impl Wakes {
    /// Whether announcements reach the takers and followers now.
    pub fn live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Wakes `gate` on `create:` announcements of `function` from now on.
    pub async fn add_taker(&self, function: &str, gate: Arc<Gate>) {
        lock(&self.gates).insert(function.to_owned(), gate);
        self.subscribe(function).await;
    }

    /// Wakes the returned registration on job `id`'s `finish:`.
    pub async fn follow(self: &Arc<Self>, function: &str, id: u64) -> Following {
        let key = (function.to_owned(), id);
        let finished = Arc::new(Notify::new());
        lock(&self.followers).insert(key.clone(), finished.clone());
        self.subscribe(function).await;
        Following {
            wakes: self.clone(),
            key,
            finished,
        }
    }

    /// Subscribes to `function`'s channel once.
    async fn subscribe(&self, function: &str) {
        if !lock(&self.channels).insert(function.to_owned()) {
            return;
        }
        if let Some(sink) = self.sink.lock().await.as_mut() {
            // A failure ends the stream too: the next connection subscribes.
            let _ = sink.subscribe(keys::channel(function)).await;
        }
    }

    /// Wakes every taker and follower (after a gap in the subscription).
    fn wake_all(&self) {
        for gate in lock(&self.gates).values() {
            gate.wake.notify_one();
        }
        for f in lock(&self.followers).values() {
            f.notify_one();
        }
    }

    /// One announcement on a channel.
    fn announce(&self, channel: &str, payload: &[u8]) {
        let Some(function) = channel.strip_prefix("channel:") else {
            return;
        };
        if payload.starts_with(b"create:") {
            if let Some(gate) = lock(&self.gates).get(function) {
                gate.wake.notify_one();
            }
        } else if let Some(id) = payload.strip_prefix(b"finish:").and_then(keys::parse_id) {
            if let Some(f) = lock(&self.followers).get(&(function.to_owned(), id)) {
                f.notify_one();
            }
        }
    }
}

/// A map or set (a poisoned lock still holds a usable one).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps the subscription up (reconnecting every second while Redis is
/// away) and wakes takers and followers, until aborted.
pub async fn run(client: redis::Client, wakes: Arc<Wakes>, stats: Arc<Stats>) {
    loop {
        match client.get_async_pubsub().await {
            Ok(pubsub) => {
                let (sink, mut stream) = pubsub.split();
                *wakes.sink.lock().await = Some(sink);
                let channels: Vec<String> = lock(&wakes.channels)
                    .iter()
                    .map(|f| keys::channel(f))
                    .collect();
                let subscribed = match wakes.sink.lock().await.as_mut() {
                    Some(sink) if !channels.is_empty() => sink.subscribe(channels).await,
                    _ => Ok(()),
                };
                if subscribed.is_ok() {
                    wakes.live.store(true, Ordering::Release);
                    // What was announced while nobody listened.
                    wakes.wake_all();
                    while let Some(msg) = stream.next().await {
                        wakes.announce(msg.get_channel_name(), msg.get_payload_bytes());
                    }
                }
                wakes.live.store(false, Ordering::Release);
                *wakes.sink.lock().await = None;
                Stats::bump(&stats.redis_errors);
                tracing::warn!(
                    "gearmonkey: the job announcements' subscription dropped; polling until it is back"
                );
            }
            Err(e) => {
                Stats::bump(&stats.redis_errors);
                tracing::debug!("gearmonkey: cannot subscribe to job announcements: {e}");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn announcements_wake_the_right_taker_and_follower() {
        let wakes = Arc::new(Wakes::default());
        let gate = Arc::new(Gate::default());
        wakes.add_taker("f", gate.clone()).await;
        let seven = wakes.follow("f", 7).await;
        let eight = wakes.follow("f", 8).await;
        wakes.announce("channel:f", b"create:9");
        wakes.announce("channel:f", b"finish:7");
        wakes.announce("channel:g", b"finish:8");
        wakes.announce("channel:f", b"start:8");
        let now = Duration::from_millis(50);
        assert!(tokio::time::timeout(now, gate.wake.notified())
            .await
            .is_ok());
        assert!(tokio::time::timeout(now, seven.finished.notified())
            .await
            .is_ok());
        assert!(tokio::time::timeout(now, eight.finished.notified())
            .await
            .is_err());
        drop(seven);
        assert_eq!(lock(&wakes.followers).len(), 1);
        assert_eq!(lock(&wakes.channels).len(), 1);
    }
}
