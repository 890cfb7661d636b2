//! A connection's read and write buffers as the server keeps them, for the
//! tests and benches that push whole packets through the core (decode,
//! parse or read in place, route, encode) without sockets. Shared by `tests/memory.rs` and
//! `benches/core.rs`.

use bytes::{Bytes, BytesMut};
use gearshift_core::{ConnId, Core, Effect, Input, Millis};
use gearshift_proto::frame::{encode_parts, DEFAULT_MAX_PACKET};
use gearshift_proto::{decode_frame, Magic, PacketType, Response};

/// A connection's two buffers.
pub struct Wire {
    input: BytesMut,
    out: BytesMut,
}

impl Wire {
    /// Empty buffers of the server's read chunk size.
    pub fn new() -> Self {
        Wire {
            input: BytesMut::with_capacity(16 * 1024),
            out: BytesMut::with_capacity(16 * 1024),
        }
    }

    /// The peer sends a packet.
    pub fn send(&mut self, kind: PacketType, parts: &[&[u8]]) {
        if self.input.capacity() - self.input.len() < 1024 {
            self.input.reserve(16 * 1024);
        }
        encode_parts(Magic::Req, kind, parts, &mut self.input);
    }

    /// The server reads, decodes and parses what arrived, hands it to the
    /// core at `now` and encodes the replies; returns the handle of the last
    /// JOB_ASSIGN_UNIQ.
    pub fn serve(
        &mut self,
        core: &mut Core,
        conn: ConnId,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) -> Bytes {
        let mut handle = Bytes::new();
        while let Ok(Some(frame)) = decode_frame(&mut self.input, DEFAULT_MAX_PACKET) {
            core.handle(conn, Input::from(frame), now);
            core.drain_effects_into(effects);
            self.out.clear();
            for e in effects.drain(..) {
                match e {
                    Effect::Send(_, r) => {
                        r.encode(&mut self.out);
                        if let Response::JobAssignUniq { handle: h, .. } = r {
                            handle = h;
                        }
                    }
                    Effect::Created(_, id) => core.encode_job_created(id, &mut self.out),
                    _ => {}
                }
            }
        }
        handle
    }
}
