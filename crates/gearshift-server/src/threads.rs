//! The job server's threads (or an I/O thread run as a local task), started
//! by name and joined when it stops; a panic in one ends `run` with it.

use std::any::Any;

use tokio::sync::oneshot;

/// One started thread or local I/O task.
pub(crate) enum Join {
    Thread(std::thread::JoinHandle<()>),
    Local(oneshot::Receiver<tokio::task::JoinHandle<()>>),
}

/// Starts a named thread; `None` (logged) when the system refuses.
pub(crate) fn spawn_thread(name: String, f: impl FnOnce() + Send + 'static) -> Option<Join> {
    match std::thread::Builder::new().name(name.clone()).spawn(f) {
        Ok(j) => Some(Join::Thread(j)),
        Err(e) => {
            tracing::error!(thread = %name, error = %e, "cannot start a thread");
            None
        }
    }
}

/// Waits until every one has ended; the first panic, if any.
pub(crate) async fn join_all(joins: Vec<Join>) -> Option<Box<dyn Any + Send>> {
    let mut first = None;
    let mut threads = Vec::new();
    for j in joins {
        match j {
            Join::Thread(t) => threads.push(t),
            Join::Local(started) => {
                if let Ok(task) = started.await {
                    if let Err(e) = task.await {
                        if e.is_panic() {
                            first.get_or_insert(e.into_panic());
                        }
                    }
                }
            }
        }
    }
    let joined = tokio::task::spawn_blocking(move || {
        let mut first = None;
        for t in threads {
            if let Err(p) = t.join() {
                first.get_or_insert(p);
            }
        }
        first
    })
    .await;
    first.or(joined.ok().flatten())
}
