//! What the bridge asks Gearshift's admin port about a Gearman job, over
//! the shared admin connection: its priority and, for an epoch job not yet
//! due, its time (where it goes in GearMonkey). Its last error is
//! [`SharedAdmin::last_error`].

use gearshift_client::admin::SharedAdmin;
use gearshift_client::Priority;

use crate::keys::Prio;

/// Where a Gearman job goes in GearMonkey: its queue, and for the
/// scheduled set the score (Unix seconds, rounded up so it never runs early).
pub async fn placement(admin: &SharedAdmin, handle: &str, now_ms: i64) -> (Prio, Option<u64>) {
    let Some(job) = admin.show_job(handle).await else {
        return (Prio::Normal, None);
    };
    if let Some(due) = job.due_ms().filter(|&d| d > now_ms) {
        return (Prio::Scheduled, Some((due as u64).div_ceil(1000)));
    }
    let prio = match job.priority {
        Priority::High => Prio::High,
        Priority::Low => Prio::Low,
        Priority::Normal => Prio::Normal,
    };
    (prio, None)
}
