//! Reaching the hub from outside the I/O threads ([`HubLink`]), and a
//! handle for running calls on its core from other tasks (the HTTP API):
//! each call travels to where the hub runs, like a config reload, runs
//! between two rounds of connection traffic, and answers on a oneshot; a
//! store call goes on to the store's thread behind the core's operations.
//! Nothing on the job path changes.

use gearshift_core::Core;
use tokio::sync::{mpsc as tmpsc, oneshot};

use std::sync::{Arc, OnceLock};

use crate::core_lock::{CoreLock, ToCore};
use crate::hub::ToHub;
use crate::io_thread::ToIo;
use crate::store_task::Committer;

/// A call to run on the core (the hub routes the effects it produced).
pub type Call = Box<dyn FnOnce(&mut Core) + Send>;

/// The server has stopped (or is stopping): the call did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is shutting down")]
pub struct Stopped;

/// Where the hub is reached: the only I/O thread's inbox (the hub runs
/// there), or the queue of the hub the I/O threads share.
#[derive(Clone)]
pub(crate) enum HubLink {
    Inline(tmpsc::UnboundedSender<ToIo>),
    Shared(Arc<CoreLock>),
}

impl HubLink {
    /// Hands `msg` to the hub; false when it is gone.
    pub(crate) fn send(&self, msg: ToHub) -> bool {
        match self {
            HubLink::Inline(io) => io.send(ToIo::Hub(msg)).is_ok(),
            HubLink::Shared(core) => core.post(ToCore::Hub(msg)).is_ok(),
        }
    }
}

/// Runs closures on the core. Cheap to clone.
#[derive(Clone)]
pub struct Control {
    link: Arc<OnceLock<HubLink>>,
}

impl Control {
    /// Calls to the hub behind `link`.
    pub(crate) fn new(link: HubLink) -> Self {
        Control {
            link: Arc::new(OnceLock::from(link)),
        }
    }

    /// Calls to a hub not running yet ([`Control::attach`] names it).
    pub(crate) fn pending() -> Self {
        Control {
            link: Arc::default(),
        }
    }

    /// The hub has started behind `link`.
    pub(crate) fn attach(&self, link: HubLink) {
        let _ = self.link.set(link);
    }

    /// Runs `f` on the core and returns what it returned; [`Stopped`] when
    /// the hub is gone.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        self.ask(|tx| ToHub::Call(Box::new(move |core| drop(tx.send(f(core))))))
            .await
    }

    /// Runs `f` on the store's thread once every store operation the core
    /// made before it is written, and returns what it returned; [`Stopped`]
    /// when the hub or the store is gone.
    pub async fn store<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Committer) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        self.ask(|tx| ToHub::Store(Box::new(move |c| drop(tx.send(f(c))))))
            .await
    }

    /// Sends the hub the message `msg` makes around an answer's sender, and
    /// waits for the answer.
    async fn ask<R>(&self, msg: impl FnOnce(oneshot::Sender<R>) -> ToHub) -> Result<R, Stopped> {
        let (tx, rx) = oneshot::channel();
        if !self.link.get().is_some_and(|l| l.send(msg(tx))) {
            return Err(Stopped);
        }
        rx.await.map_err(|_| Stopped)
    }
}
