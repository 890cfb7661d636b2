//! A handle for running calls on the hub's core from other tasks (the HTTP
//! API): each call travels to the thread that owns the hub, like a config
//! reload, runs between two rounds of connection traffic, and answers on a
//! oneshot. Nothing on the job path changes.

use gearshift_core::Core;
use tokio::sync::{mpsc as tmpsc, oneshot};

use std::sync::Arc;

use crate::core_lock::{CoreLock, ToCore};
use crate::io_thread::ToIo;

/// A call to run on the core (the hub routes the effects it produced).
pub type Call = Box<dyn FnOnce(&mut Core) + Send>;

/// The server has stopped (or is stopping): the call did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is shutting down")]
pub struct Stopped;

/// Where calls go: the only I/O thread (hub inline) or the shared hub.
#[derive(Clone)]
enum Route {
    Inline(tmpsc::UnboundedSender<ToIo>),
    Core(Arc<CoreLock>),
}

/// Runs closures on the core. Cheap to clone.
#[derive(Clone)]
pub struct Control {
    route: Route,
}

impl Control {
    /// Calls to the hub on the only I/O thread.
    pub(crate) fn inline(tx: tmpsc::UnboundedSender<ToIo>) -> Self {
        Control {
            route: Route::Inline(tx),
        }
    }

    /// Calls to the shared hub.
    pub(crate) fn core(core: Arc<CoreLock>) -> Self {
        Control {
            route: Route::Core(core),
        }
    }

    /// Runs `f` on the core and returns what it returned; [`Stopped`] when
    /// the hub is gone.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (tx, rx) = oneshot::channel();
        let call: Call = Box::new(move |core| {
            let _ = tx.send(f(core));
        });
        let sent = match &self.route {
            Route::Inline(io) => io.send(ToIo::Call(call)).is_ok(),
            Route::Core(core) => core.post(ToCore::Call(call)).is_ok(),
        };
        if !sent {
            return Err(Stopped);
        }
        rx.await.map_err(|_| Stopped)
    }
}
