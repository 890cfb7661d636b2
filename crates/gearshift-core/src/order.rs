//! Reply order per connection. A client matches JOB_CREATED (and every
//! other reply) to its requests by order, so when a background submission
//! waits for the store, every packet for that connection produced after it
//! waits too, and goes out, in order, once the store has answered.

use gearshift_proto::Response;

use crate::effect::Effect;
use crate::engine::Core;
use crate::ids::{ConnId, JobId};

impl Core {
    /// Sends a packet to a connection, behind any held answer.
    pub(crate) fn send(&mut self, conn: ConnId, r: Response) {
        self.emit(conn, Effect::Send(conn, r));
    }
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
        if let Some(effect) = self.conns.hold_output(conn, effect) {
            self.effects.push(effect);
        }
    }

    /// Reserves the place of a submission's answer until the store decides.
    pub(crate) fn hold_ack(&mut self, conn: ConnId, job: JobId) {
        self.conns.hold_ack(conn, job);
    }

    /// Fills a held answer and sends everything that is now in order.
    pub(crate) fn resolve_ack(&mut self, conn: ConnId, job: JobId, answer: Response) {
        let answer = Effect::Send(conn, answer);
        self.conns.resolve_ack(conn, job, answer, &mut self.effects);
    }

    /// A packet for a connection, in order behind any held answer (for a
    /// driver that answers on the core's behalf, e.g. while shutting down).
    pub fn reply(&mut self, conn: ConnId, r: Response) {
        self.emit(conn, Effect::Send(conn, r));
    }
}
