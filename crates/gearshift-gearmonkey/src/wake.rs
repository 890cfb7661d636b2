//! GearMonkey announces each new job (`PUBLISH channel:{FN} create:{ID}`)
//! and each finished one (`finish:{ID}`). An idle taker, or a task following
//! a given job that runs long, holds a subscription to its function's
//! channel ([`Wakes::listen`]) and is woken by the announcement instead of
//! polling Redis; busy takers and short jobs hold none, so a loaded bridge
//! reads no announcements. One pub/sub connection carries every channel
//! anyone holds; without it, takers and followers poll as before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::keys;
use crate::stats::Stats;

/// What the subscription task is asked.
pub enum Ask {
    /// Hold `function`'s channel; answers whether it is subscribed.
    Hold(String, oneshot::Sender<bool>),
    /// Let go of one hold of `function`'s channel.
    Release(String),
}

/// Who to wake on which announcement, and the way to the subscription task.
pub struct Wakes {
    asks: mpsc::UnboundedSender<Ask>,
    /// Idle takers, by function.
    takers: Mutex<HashMap<String, Arc<Notify>>>,
    /// Followers of given jobs, by function and id.
    followers: Mutex<HashMap<(String, u64), Arc<Notify>>>,
    live: AtomicBool,
}

/// A subscription held for one waiter; dropping it lets go.
pub struct Listening {
    wakes: Arc<Wakes>,
    function: String,
    follower: Option<u64>,
    /// Notified on the announcement waited for.
    pub woken: Arc<Notify>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        match self.follower {
            Some(id) => {
                lock(&self.wakes.followers).remove(&(self.function.clone(), id));
            }
            None => {
                lock(&self.wakes.takers).remove(&self.function);
            }
        }
        let _ = self
            .wakes
            .asks
            .send(Ask::Release(std::mem::take(&mut self.function)));
    }
}

impl Wakes {
    /// The waiters' side; [`run`] serves `asks`.
    pub fn new() -> (Arc<Wakes>, mpsc::UnboundedReceiver<Ask>) {
        let (asks, rx) = mpsc::unbounded_channel();
        let wakes = Wakes {
            asks,
            takers: Mutex::default(),
            followers: Mutex::default(),
            live: AtomicBool::new(false),
        };
        (Arc::new(wakes), rx)
    }

    /// Subscribes (once per function) for the taker of `function` (on
    /// `create:`) or the follower of its job `follower` (on `finish:{ID}`).
    /// `None` while announcements do not arrive: poll instead. The caller
    /// looks at Redis once more after this (an announcement made before
    /// the subscription is not heard).
    pub async fn listen(
        self: &Arc<Self>,
        function: &str,
        follower: Option<u64>,
    ) -> Option<Listening> {
        if !self.live.load(Ordering::Acquire) {
            return None;
        }
        let woken = Arc::new(Notify::new());
        match follower {
            Some(id) => lock(&self.followers).insert((function.to_owned(), id), woken.clone()),
            None => lock(&self.takers).insert(function.to_owned(), woken.clone()),
        };
        let listening = Listening {
            wakes: self.clone(),
            function: function.to_owned(),
            follower,
            woken,
        };
        let (tx, rx) = oneshot::channel();
        self.asks.send(Ask::Hold(function.to_owned(), tx)).ok()?;
        // Dropped without a yes: the registration goes with it.
        rx.await.unwrap_or(false).then_some(listening)
    }

    /// Wakes every waiter (after a gap in the subscription).
    fn wake_all(&self) {
        lock(&self.takers).values().for_each(|n| n.notify_one());
        lock(&self.followers).values().for_each(|n| n.notify_one());
    }

    /// One announcement on a channel.
    fn announce(&self, channel: &str, payload: &[u8]) {
        let Some(function) = channel.strip_prefix("channel:") else {
            return;
        };
        if payload.starts_with(b"create:") {
            if let Some(n) = lock(&self.takers).get(function) {
                n.notify_one();
            }
        } else if let Some(id) = payload.strip_prefix(b"finish:").and_then(keys::parse_id) {
            if let Some(n) = lock(&self.followers).get(&(function.to_owned(), id)) {
                n.notify_one();
            }
        }
    }
}

/// A map (a poisoned lock still holds a usable one).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps the subscription up (reconnecting every second while Redis is
/// away), subscribed to every channel held, and wakes waiters, until aborted.
pub async fn run(
    client: redis::Client,
    wakes: Arc<Wakes>,
    mut asks: mpsc::UnboundedReceiver<Ask>,
    stats: Arc<Stats>,
) {
    // Holds per function, kept across reconnections.
    let mut held: HashMap<String, usize> = HashMap::new();
    loop {
        let connected = client.get_async_pubsub().await;
        let Ok(pubsub) = connected else {
            Stats::bump(&stats.redis_errors);
            // Nobody can be served meanwhile: waiters poll.
            while let Ok(ask) = asks.try_recv() {
                count(&mut held, ask, false);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let (mut sink, mut stream) = pubsub.split();
        let channels: Vec<String> = held.keys().map(|f| keys::channel(f)).collect();
        if channels.is_empty() || sink.subscribe(channels).await.is_ok() {
            wakes.live.store(true, Ordering::Release);
            // What was announced while nobody listened.
            wakes.wake_all();
            loop {
                tokio::select! {
                    msg = stream.next() => match msg {
                        Some(msg) => wakes.announce(msg.get_channel_name(), msg.get_payload_bytes()),
                        None => break,
                    },
                    ask = asks.recv() => {
                        let Some(ask) = ask else { return };
                        let channel = match &ask {
                            Ask::Hold(f, _) | Ask::Release(f) => keys::channel(f),
                        };
                        let ok = match count(&mut held, ask, true) {
                            Change::Subscribe(reply) => {
                                let ok = sink.subscribe(&channel).await.is_ok();
                                let _ = reply.send(ok);
                                ok
                            }
                            Change::Unsubscribe => sink.unsubscribe(&channel).await.is_ok(),
                            Change::None => true,
                        };
                        if !ok {
                            break;
                        }
                    }
                }
            }
        }
        wakes.live.store(false, Ordering::Release);
        Stats::bump(&stats.redis_errors);
        tracing::warn!(
            "gearmonkey: the job announcements' subscription dropped; polling until it is back"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What a hold or release changes on the connection.
enum Change {
    Subscribe(oneshot::Sender<bool>),
    Unsubscribe,
    None,
}

/// Counts `ask` into `held`; `live`: whether a hold can be answered yes.
fn count(held: &mut HashMap<String, usize>, ask: Ask, live: bool) -> Change {
    match ask {
        Ask::Hold(f, reply) => {
            let n = held.entry(f).or_default();
            *n += 1;
            if !live {
                let _ = reply.send(false);
                Change::None
            } else if *n == 1 {
                Change::Subscribe(reply)
            } else {
                let _ = reply.send(true);
                Change::None
            }
        }
        Ask::Release(f) => match held.get_mut(&f) {
            Some(n) if *n > 1 => {
                *n -= 1;
                Change::None
            }
            Some(_) => {
                held.remove(&f);
                Change::Unsubscribe
            }
            None => Change::None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_subscribe_once_and_the_last_release_unsubscribes() {
        let mut held = HashMap::new();
        let hold = |f: &str| Ask::Hold(f.into(), oneshot::channel().0);
        assert!(matches!(
            count(&mut held, hold("f"), true),
            Change::Subscribe(_)
        ));
        assert!(matches!(count(&mut held, hold("f"), true), Change::None));
        assert!(matches!(
            count(&mut held, Ask::Release("f".into()), true),
            Change::None
        ));
        assert!(matches!(
            count(&mut held, Ask::Release("f".into()), true),
            Change::Unsubscribe
        ));
        assert!(matches!(
            count(&mut held, Ask::Release("f".into()), true),
            Change::None
        ));
        // Counted while down, subscribed on the next connection.
        assert!(matches!(count(&mut held, hold("g"), false), Change::None));
        assert_eq!(held.get("g"), Some(&1));
    }

    #[tokio::test]
    async fn announcements_wake_the_right_waiter() {
        let (wakes, _asks) = Wakes::new();
        let taker = Arc::new(Notify::new());
        let seven = Arc::new(Notify::new());
        let eight = Arc::new(Notify::new());
        lock(&wakes.takers).insert("f".into(), taker.clone());
        lock(&wakes.followers).insert(("f".into(), 7), seven.clone());
        lock(&wakes.followers).insert(("f".into(), 8), eight.clone());
        wakes.announce("channel:f", b"create:9");
        wakes.announce("channel:f", b"finish:7");
        wakes.announce("channel:g", b"finish:8");
        wakes.announce("channel:f", b"start:8");
        let now = Duration::from_millis(50);
        assert!(tokio::time::timeout(now, taker.notified()).await.is_ok());
        assert!(tokio::time::timeout(now, seven.notified()).await.is_ok());
        assert!(tokio::time::timeout(now, eight.notified()).await.is_err());
    }
}
