//! Reply order per connection. A client matches JOB_CREATED (and every
//! other reply) to its requests by order, so when a background submission
//! waits for the store, every packet for that connection produced after it
//! waits too, and goes out, in order, once the store has answered.

use std::collections::VecDeque;

use gearshift_proto::Response;

use crate::effect::Effect;
use crate::engine::Core;
use crate::ids::{ConnId, JobId};

/// One place in a connection's held output.
#[derive(Debug)]
pub enum Held {
    /// The answer to a submission of this job, still waiting for the store.
    Ack(JobId),
    /// A packet ready to go once everything before it has gone.
    Ready(Effect),
}

impl Core {
    /// Queues a packet or text for a connection, behind any held answer.
    #[inline]
    pub(crate) fn emit(&mut self, conn: ConnId, effect: Effect) {
        if !self.cfg.durable {
            // Only answers waiting for the store are ever held.
            self.effects.push(effect);
            return;
        }
        self.emit_in_order(conn, effect);
    }

    fn emit_in_order(&mut self, conn: ConnId, effect: Effect) {
        match self.conns.get_mut(&conn.0) {
            Some(c) if !c.outbox.is_empty() => c.outbox.push_back(Held::Ready(effect)),
            _ => self.effects.push(effect),
        }
    }

    /// Reserves the place of a submission's answer until the store decides.
    pub(crate) fn hold_ack(&mut self, conn: ConnId, job: JobId) {
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.outbox.push_back(Held::Ack(job));
        }
    }

    /// Fills a held answer and sends everything that is now in order.
    pub(crate) fn resolve_ack(&mut self, conn: ConnId, job: JobId, answer: Response) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        if let Some(slot) = c
            .outbox
            .iter_mut()
            .find(|h| matches!(h, Held::Ack(j) if *j == job))
        {
            *slot = Held::Ready(Effect::Send(conn, answer));
        }
        release(&mut c.outbox, &mut self.effects);
    }

    /// A packet for a connection, in order behind any held answer (for a
    /// driver that answers on the core's behalf, e.g. while shutting down).
    pub fn reply(&mut self, conn: ConnId, r: Response) {
        self.emit(conn, Effect::Send(conn, r));
    }
}

fn release(held: &mut VecDeque<Held>, effects: &mut Vec<Effect>) {
    while let Some(Held::Ready(_)) = held.front() {
        if let Some(Held::Ready(e)) = held.pop_front() {
            effects.push(e);
        }
    }
}
