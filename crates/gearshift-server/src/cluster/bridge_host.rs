//! Which node of a cluster runs its GearMonkey bridge (`--gearmonkey`),
//! and on partitioned nodes its etcd bridge (`--etcd`): one at a time,
//! since a GearMonkey bridge that starts puts back every job Redis shows
//! taken, another bridge's running ones included, and one etcd registry
//! lists each worker once. The leader in leader mode, the owner of
//! partition 0 when partitioned, while its lease is trusted.

use std::time::Duration;

use tokio::sync::watch;

/// How often the choice is looked at again.
const POLL: Duration = Duration::from_millis(200);

/// Keeps `tx` saying whether `holds()` until `stopping` turns true, then
/// says false.
pub(super) async fn follow(
    tx: watch::Sender<bool>,
    holds: impl Fn() -> bool,
    mut stopping: watch::Receiver<bool>,
) {
    loop {
        let here = !*stopping.borrow() && holds();
        tx.send_if_modified(|now| std::mem::replace(now, here) != here);
        if *stopping.borrow() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            r = stopping.changed() => if r.is_err() {
                tx.send_replace(false);
                return;
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn the_choice_follows_the_role_and_ends_false() {
        let (tx, mut rx) = watch::channel(false);
        let (stop_tx, stop) = watch::channel(false);
        let role = Arc::new(AtomicBool::new(false));
        let r = role.clone();
        let task = tokio::spawn(follow(tx, move || r.load(Ordering::Relaxed), stop));
        tokio::time::sleep(POLL * 2).await;
        assert!(!*rx.borrow_and_update());
        role.store(true, Ordering::Relaxed);
        rx.changed().await.expect("chosen");
        assert!(*rx.borrow_and_update());
        role.store(false, Ordering::Relaxed);
        rx.changed().await.expect("no longer");
        assert!(!*rx.borrow_and_update());
        role.store(true, Ordering::Relaxed);
        rx.changed().await.expect("chosen again");
        stop_tx.send_replace(true);
        task.await.expect("ends");
        assert!(!*rx.borrow(), "a stopping node hosts nothing");
    }
}
