//! One client connection's task: it reads, and hands each read's bytes to
//! the engine, which cuts them into frames and runs them in one go;
//! when the engine could not write everything it owed the connection, the
//! task waits for the socket to drain and writes the rest.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use gearshift_core::ConnId;
use gearshift_proto::frame::HEADER_LEN;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::engine::{lock, PeerStatus, Shared};

/// Read buffer size a new connection starts with: an idle connection holds
/// no more than this.
const MIN_CHUNK: usize = 256;
/// Largest read buffer a busy connection grows to.
const MAX_CHUNK: usize = 64 * 1024;

/// Serves one connection until the peer closes, its framing breaks, or the
/// engine is done with it.
pub async fn serve(
    id: ConnId,
    peer: SocketAddr,
    stream: Arc<TcpStream>,
    ctl: Arc<Notify>,
    engine: Shared,
    max_packet: usize,
) {
    let mut buf = BytesMut::new();
    let mut blocked = false;
    let mut reading = true;
    // Packets are cut out of the read buffer without copying, and queued
    // jobs keep their slices of it; the buffer grows only while reads fill
    // it, so a connection sending one small job at a time does not pin a
    // large buffer per job, and a pipelining one reads in large gulps.
    let mut chunk = MIN_CHUNK;
    loop {
        tokio::select! {
            biased;
            _ = ctl.notified() => {
                match lock(&engine).status(id) {
                    PeerStatus::Gone => return,
                    PeerStatus::Open { blocked: b } => blocked = b,
                }
                continue;
            }
            w = stream.writable(), if blocked => {
                if w.is_err() {
                    break;
                }
                let mut e = lock(&engine);
                e.on_writable(id);
                match e.status(id) {
                    PeerStatus::Gone => return,
                    PeerStatus::Open { blocked: b } => blocked = b,
                }
                continue;
            }
            r = stream.readable(), if reading => {
                if r.is_err() {
                    break;
                }
            }
        }
        if buf.capacity() - buf.len() < chunk / 4 {
            buf.reserve(chunk);
        }
        let room = buf.capacity() - buf.len();
        let ended = match read_some(&stream, &mut buf, room) {
            Ok(0) => {
                if !buf.is_empty() {
                    tracing::info!(%peer, bytes = buf.len(), "connection closed in the middle of a packet; partial packet discarded");
                }
                true
            }
            Ok(n) => {
                if n == room {
                    chunk = (chunk * 2).min(MAX_CHUNK);
                }
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "read failed");
                true
            }
        };
        if ended {
            reading = false;
            let mut e = lock(&engine);
            e.on_disconnect(id);
            match e.status(id) {
                PeerStatus::Gone => return,
                PeerStatus::Open { blocked: b } => blocked = b,
            }
            continue;
        }
        let mut e = lock(&engine);
        let fatal = e.on_read(id, &mut buf, max_packet, peer);
        if fatal.is_none() {
            make_room_for_frame(&mut buf, max_packet);
        }
        if let Some(reply) = fatal {
            e.on_fatal(id, reply);
            reading = false;
        }
        match e.status(id) {
            PeerStatus::Gone => return,
            PeerStatus::Open { blocked: b } => blocked = b,
        }
        drop(e);
    }
    // The socket failed: nothing owed can be written any more.
    let mut e = lock(&engine);
    e.on_disconnect(id);
    e.forget(id);
}

/// Reads what the socket holds. A read that did not fill the buffer emptied
/// the socket, so the readiness is cleared at once (the outer `WouldBlock`
/// tells tokio so): the task then sleeps until new bytes arrive instead of
/// spending a second `recv` to learn that there are none.
fn read_some(stream: &TcpStream, buf: &mut BytesMut, room: usize) -> std::io::Result<usize> {
    let mut got = None;
    let result = stream.try_io(Interest::READABLE, || {
        let n = stream.try_read_buf(buf)?;
        got = Some(n);
        if n > 0 && n < room {
            Err(std::io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match got {
        Some(n) => Ok(n),
        None => result,
    }
}

/// When the buffer holds the start of a binary packet larger than the room
/// left, makes room for all of it at once: the rest then arrives in as few
/// reads as the socket allows, instead of the buffer growing (and copying
/// what it holds) a chunk at a time.
fn make_room_for_frame(buf: &mut BytesMut, max_packet: usize) {
    if buf.len() < HEADER_LEN || buf[0] != 0 {
        return;
    }
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if body > max_packet {
        return;
    }
    let whole = HEADER_LEN + body;
    if whole > buf.capacity() {
        buf.reserve(whole - buf.len());
    }
}
