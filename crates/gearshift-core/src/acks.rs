//! Submitters still owed an answer: a durable job's or schedule's
//! JOB_CREATED waits until the store confirms it. Private, so the handlers
//! only add, and take the waiters once.

use bytes::Bytes;
use gearshift_proto::Response;

use crate::ids::{ConnId, IdMap, JobId};
use crate::job::ConnList;

/// The answer a submitter still owed JOB_CREATED gets when its job or
/// schedule moves to another node (it may be stored there: no resubmission).
pub(crate) fn moved() -> Response {
    let text = "The function moved to another node before its job was confirmed";
    Response::error("QUEUE_ERROR", Bytes::from_static(text.as_bytes()))
}

/// The connections waiting on each job's or schedule's acknowledgement.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    waiting: IdMap<JobId, ConnList>,
}

impl Acks {
    /// `conn` waits for `id`'s acknowledgement.
    pub(crate) fn wait(&mut self, id: JobId, conn: ConnId) {
        self.waiting.entry(id).or_default().push(conn);
    }

    /// Whether anyone waits for `id`'s acknowledgement.
    pub(crate) fn waits(&self, id: JobId) -> bool {
        self.waiting.contains_key(&id)
    }

    /// Who waits for `id`, removed; `None` when nobody does (a cheap check
    /// first, as most jobs end with no waiter).
    pub(crate) fn take(&mut self, id: JobId) -> Option<ConnList> {
        if self.waiting.is_empty() {
            return None;
        }
        self.waiting.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_are_taken_once() {
        let mut a = Acks::default();
        assert!(a.take(1).is_none());
        a.wait(1, ConnId(7));
        assert!(a.waits(1) && !a.waits(2));
        a.wait(1, ConnId(8));
        let got: Vec<_> = a.take(1).expect("two waiters").as_slice().to_vec();
        assert_eq!(got, vec![ConnId(7), ConnId(8)]);
        assert!(a.take(1).is_none() && !a.waits(1));
    }
}
