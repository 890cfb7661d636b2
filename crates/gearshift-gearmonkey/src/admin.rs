//! One admin connection to Gearshift shared by the bridge's jobs, for what
//! the Gearman job packets do not carry: a job's priority (for the
//! GearMonkey queue it goes to) and its last error (for `status error`).

use gearshift_client::{AdminClient, Priority};
use tokio::sync::Mutex;

use crate::keys::Prio;

/// The shared connection, opened on first use and again after a failure.
pub struct Admin {
    gearman: std::net::SocketAddr,
    conn: Mutex<Option<AdminClient>>,
}

impl Admin {
    /// Talks to the server at `gearman`.
    pub fn new(gearman: std::net::SocketAddr) -> Admin {
        Admin {
            gearman,
            conn: Mutex::new(None),
        }
    }

    /// `show job HANDLE`, or `None` when the server cannot say.
    async fn show(&self, handle: &str) -> Option<gearshift_client::admin::JobDetail> {
        let mut conn = self.conn.lock().await;
        if conn.is_none() {
            *conn = AdminClient::connect(self.gearman).await.ok();
        }
        let admin = conn.as_mut()?;
        match admin.show_job(handle).await {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::debug!("gearmonkey: show job {handle}: {e}");
                // A broken connection is reopened next time.
                *conn = None;
                None
            }
        }
    }

    /// The GearMonkey queue a Gearman job goes to (normal when unknown).
    pub async fn prio_of(&self, handle: &str) -> Prio {
        match self.show(handle).await.map(|d| d.priority) {
            Some(Priority::High) => Prio::High,
            Some(Priority::Low) => Prio::Low,
            _ => Prio::Normal,
        }
    }

    /// A failed job's last error text, if the server kept one.
    pub async fn last_error(&self, handle: &str) -> Option<String> {
        let d = self.show(handle).await?;
        d.last_failure.map(|f| f.detail).or(d.error)
    }
}
