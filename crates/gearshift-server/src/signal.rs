//! A wake-up between tasks of one I/O thread: a flag and the waker of the
//! one task that waits on it. It does what tokio's `Notify::notify_one`
//! does for a single waiter (a wake-up with no one waiting is kept for the
//! next wait) without `Notify`'s lock and waiter list, which a connection's
//! task would otherwise take twice per read.

use std::cell::Cell;
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// A wake-up for one task on the same thread.
#[derive(Default)]
pub struct Signal {
    set: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl Signal {
    /// A signal nobody has raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal: the waiting task (or the next to wait) wakes.
    pub fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Waits until the signal is raised, and lowers it.
    pub async fn wait(&self) {
        poll_fn(|cx| {
            if self.set.replace(false) {
                return Poll::Ready(());
            }
            let w = match self.waker.take() {
                Some(w) if w.will_wake(cx.waker()) => w,
                _ => cx.waker().clone(),
            };
            self.waker.set(Some(w));
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[tokio::test(flavor = "current_thread")]
    async fn a_raise_with_no_one_waiting_is_kept_for_the_next_wait() {
        let s = Signal::new();
        s.notify();
        s.notify();
        s.wait().await;
        // Two raises before a wait are one wake-up: the next wait blocks.
        let blocked = tokio::time::timeout(std::time::Duration::from_millis(20), s.wait()).await;
        assert!(blocked.is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_task_is_woken_by_a_raise() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let s = Rc::new(Signal::new());
                let waiter = tokio::task::spawn_local({
                    let s = s.clone();
                    async move {
                        s.wait().await;
                        7
                    }
                });
                tokio::task::yield_now().await;
                assert!(!waiter.is_finished());
                s.notify();
                assert_eq!(waiter.await.ok(), Some(7));
            })
            .await;
    }
}
