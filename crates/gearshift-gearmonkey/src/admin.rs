//! What the bridge asks Gearshift's admin port about a Gearman job, over
//! the shared admin connection: its priority (for the GearMonkey queue it
//! goes to). Its last error is [`SharedAdmin::last_error`].

use gearshift_client::admin::SharedAdmin;
use gearshift_client::Priority;

use crate::keys::Prio;

/// The GearMonkey queue a Gearman job goes to (normal when unknown).
pub async fn prio_of(admin: &SharedAdmin, handle: &str) -> Prio {
    match admin.show_job(handle).await.map(|d| d.priority) {
        Some(Priority::High) => Prio::High,
        Some(Priority::Low) => Prio::Low,
        _ => Prio::Normal,
    }
}
