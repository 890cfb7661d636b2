//! One connection's task on its I/O thread: it reads, cuts the bytes into
//! frames, parses each into an [`Item`] and feeds it on (to the hub on this
//! thread, or into the batch for the shared hub); when its output could
//! not all be written, it waits for the socket to drain and writes the rest.
//! It does not read while its output is over the limit.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use gearshift_core::{ConnId, Input};
use gearshift_proto::frame::HEADER_LEN;
use gearshift_proto::{decode_frame, FrameError, Response};
use tokio::io::Interest;

use crate::hub::Item;
use crate::io_thread::IoThread;
use crate::signal::Signal;
use crate::sock::Sock;

/// Read buffer size a new connection starts with: an idle connection holds
/// no more than this.
const MIN_CHUNK: usize = 256;
/// Largest read buffer a busy connection grows to.
const MAX_CHUNK: usize = 64 * 1024;
/// How long a connection waits before reading again while the hub
/// has not processed its earlier requests (only a connection with more
/// than `max_output` of requests unanswered, or a flood on its thread).
const THROTTLE_WAIT: Duration = Duration::from_millis(1);

/// Serves one connection until the peer closes, its framing breaks, or the
/// hub is done with it.
pub async fn serve(
    id: ConnId,
    peer: SocketAddr,
    stream: Rc<Sock>,
    ctl: Rc<Signal>,
    io: Rc<RefCell<IoThread>>,
) {
    let (max_packet, idle_timeout) = {
        let t = io.borrow();
        (t.max_packet, t.idle_timeout)
    };
    // Until the first byte arrives, the connection may stay silent only so long.
    let mut silent_until = idle_timeout.map(|d| tokio::time::Instant::now() + d);
    let mut buf = BytesMut::new();
    let mut reading = true;
    // Packets are cut out of the read buffer without copying, and queued
    // jobs keep their slices of it; the buffer grows only while reads fill
    // it, so a connection sending one small job at a time does not pin a
    // large buffer per job, and a pipelining one reads in large gulps.
    let mut chunk = MIN_CHUNK;
    loop {
        let Some(state) = io.borrow_mut().peer_state(id) else {
            return;
        };
        let can_read = reading && state.readable;
        tokio::select! {
            biased;
            _ = ctl.wait() => continue,
            w = stream.writable(), if state.blocked => {
                if w.is_err() {
                    break;
                }
                io.borrow_mut().on_writable(id);
                continue;
            }
            // An async block: the timer is made only when the branch is enabled.
            _ = async { tokio::time::sleep(THROTTLE_WAIT).await }, if can_read && state.throttled => continue,
            _ = async { tokio::time::sleep_until(silent_until.unwrap_or_else(tokio::time::Instant::now)).await }, if reading && silent_until.is_some() => {
                tracing::info!(%peer, "closing connection: nothing sent within --idle-timeout ({:?})", idle_timeout.unwrap_or_default());
                silent_until = None;
                reading = false;
                let mut t = io.borrow_mut();
                crate::counters::ConnCounters::bump(&t.counters.idle_closed);
                t.peer_closed(id);
                continue;
            }
            r = stream.readable(), if can_read && !state.throttled => {
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
                silent_until = None;
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
            buf = BytesMut::new();
            io.borrow_mut().peer_closed(id);
            continue;
        }
        let mut t = io.borrow_mut();
        if !feed_frames(&mut t, id, &mut buf, max_packet, peer) {
            reading = false;
            buf = BytesMut::new();
        } else {
            make_room_for_frame(&mut buf, max_packet);
        }
        t.pump(Some(id));
        t.poll_outputs();
    }
    // The socket failed: nothing owed can be written any more.
    io.borrow_mut().peer_failed(id);
}

/// Feeds every whole frame in `buf` on, in order; false when the framing
/// broke (the item that says so is fed last).
pub(crate) fn feed_frames(
    t: &mut IoThread,
    id: ConnId,
    buf: &mut BytesMut,
    max_packet: usize,
    peer: SocketAddr,
) -> bool {
    loop {
        let before = buf.len();
        match decode_frame(buf, max_packet) {
            Ok(Some(frame)) => {
                let bytes = before - buf.len();
                // Inlined at both of its calls: a submission then reaches
                // the core's rule as a submission, not as any input.
                Input::feed(
                    frame,
                    #[inline(always)]
                    |input| t.feed_input(id, input, bytes),
                );
            }
            Ok(None) => return true,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection: unusable input");
                let reply = match e {
                    FrameError::TooLarge { .. } => {
                        Some(Response::error("ARGUMENT_TOO_LARGE", e.to_string()))
                    }
                    _ => None,
                };
                t.feed(id, Item::Fatal(reply), 0);
                return false;
            }
        }
    }
}

/// Reads what the socket holds. A read that did not fill the buffer emptied
/// the socket, so the readiness is cleared at once (the outer `WouldBlock`
/// tells tokio so): the task then sleeps until new bytes arrive instead of
/// spending a second `recv` to learn that there are none.
pub(crate) fn read_some(stream: &Sock, buf: &mut BytesMut, room: usize) -> std::io::Result<usize> {
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
