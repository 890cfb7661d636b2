//! Per-function load as the bridges read it (`status` and `workers`): a
//! bridge takes outside jobs for a function only while one of its Gearman
//! workers is free.

use std::collections::HashMap;

use super::AdminClient;
use crate::error::Result;

/// One function's load: Gearman workers (a bridge's own left out), jobs
/// queued or running, and jobs running.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Worker connections that registered it.
    pub workers: usize,
    /// Jobs queued or running.
    pub total: usize,
    /// Jobs running.
    pub running: usize,
}

impl Load {
    /// Workers free for more of a bridge's jobs, given that `mine` of the
    /// function's jobs are the bridge's own (the others use workers too).
    ///
    /// ```
    /// use gearshift_client::admin::Load;
    /// let l = Load { workers: 3, total: 2, running: 2 };
    /// assert_eq!(l.free(0), 1);
    /// assert_eq!(l.free(2), 3);
    /// ```
    pub fn free(&self, mine: usize) -> usize {
        self.workers.saturating_sub(self.total.saturating_sub(mine))
    }
}

impl AdminClient {
    /// Every function's [`Load`]; workers whose client id is `skip` (a
    /// bridge's own) are not counted.
    pub async fn loads(&mut self, skip: Option<&str>) -> Result<HashMap<String, Load>> {
        let mut out: HashMap<String, Load> = HashMap::new();
        for s in self.status().await? {
            let l = out.entry(s.function).or_default();
            l.total = usize::try_from(s.total).unwrap_or(usize::MAX);
            l.running = usize::try_from(s.running).unwrap_or(usize::MAX);
        }
        for w in self.workers().await? {
            if Some(w.client_id.as_str()) == skip {
                continue;
            }
            for f in w.functions {
                out.entry(f).or_default().workers += 1;
            }
        }
        Ok(out)
    }
}
