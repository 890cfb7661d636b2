//! One admin connection shared by the tasks of a bridge, for what Gearman
//! job packets do not carry (a job's priority, its last error) and for
//! cancelling: opened on first use, and again after a failure.

use std::net::SocketAddr;

use tokio::sync::Mutex;

use super::{AdminClient, JobDetail};

/// The shared connection.
pub struct SharedAdmin {
    addr: SocketAddr,
    conn: Mutex<Option<AdminClient>>,
}

impl SharedAdmin {
    /// Talks to the server at `addr` (not connected until first used).
    pub fn new(addr: SocketAddr) -> SharedAdmin {
        SharedAdmin {
            addr,
            conn: Mutex::new(None),
        }
    }

    /// Runs `call` on the connection; `None` when the server cannot be
    /// reached or the call fails (a broken connection is reopened next time).
    async fn with<T>(
        &self,
        call: impl AsyncFnOnce(&mut AdminClient) -> crate::Result<T>,
    ) -> Option<T> {
        let mut conn = self.conn.lock().await;
        if conn.is_none() {
            *conn = AdminClient::connect(self.addr).await.ok();
        }
        match call(conn.as_mut()?).await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::debug!("admin call to {}: {e}", self.addr);
                *conn = None;
                None
            }
        }
    }

    /// `show job HANDLE`, or `None` when the server cannot say.
    pub async fn show_job(&self, handle: &str) -> Option<JobDetail> {
        self.with(async |a: &mut AdminClient| a.show_job(handle).await)
            .await
    }

    /// A failed job's last error text, if the server kept one.
    pub async fn last_error(&self, handle: &str) -> Option<String> {
        let d = self.show_job(handle).await?;
        d.last_failure.map(|f| f.detail).or(d.error)
    }

    /// `cancel job HANDLE`; false when it could not be done.
    pub async fn cancel_job(&self, handle: &str) -> bool {
        self.with(async |a: &mut AdminClient| a.cancel_job(handle).await)
            .await
            .is_some()
    }
}
