//! One client connection: a reader that cuts bytes into frames and forwards
//! them to the engine, and a writer that encodes whatever the engine queued
//! for it into as few writes as possible.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use gearshift_core::{ConnId, Input};
use gearshift_proto::{decode_frame, parse_admin, Frame, FrameError, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, Notify};

use crate::engine::{EngineMsg, Out};

/// Spare room kept in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;
/// A write buffer grown past this is released after use.
const KEEP_WRITE_BUF: usize = 64 * 1024;

/// Reads frames until the peer closes, the framing breaks, or the writer
/// says the connection is closed.
pub async fn read_loop(
    id: ConnId,
    peer: SocketAddr,
    mut rd: OwnedReadHalf,
    engine: mpsc::UnboundedSender<EngineMsg>,
    closed: Arc<Notify>,
    max_packet: usize,
) {
    let mut buf = BytesMut::new();
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_CHUNK);
        }
        let n = tokio::select! {
            r = rd.read_buf(&mut buf) => r,
            _ = closed.notified() => break,
        };
        match n {
            Ok(0) => {
                if !buf.is_empty() {
                    tracing::info!(%peer, bytes = buf.len(), "connection closed in the middle of a packet; partial packet discarded");
                }
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "read failed");
                break;
            }
        }
        let mut inputs = Vec::new();
        loop {
            match decode_frame(&mut buf, max_packet) {
                Ok(Some(Frame::Packet(p))) => inputs.push(match Request::parse(&p) {
                    Ok(r) => Input::Request(r),
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "refused packet");
                        Input::Invalid(e)
                    }
                }),
                Ok(Some(Frame::Text(line))) => inputs.push(Input::Admin(parse_admin(&line))),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: unusable input");
                    if !inputs.is_empty() {
                        let _ = engine.send(EngineMsg::Inputs(id, inputs));
                    }
                    let reply = match e {
                        FrameError::TooLarge { .. } => {
                            Some(Response::error("ARGUMENT_TOO_LARGE", e.to_string()))
                        }
                        _ => None,
                    };
                    let _ = engine.send(EngineMsg::Fatal(id, reply));
                    return;
                }
            }
        }
        if !inputs.is_empty() && engine.send(EngineMsg::Inputs(id, inputs)).is_err() {
            return;
        }
        if buf.is_empty() && buf.capacity() > KEEP_WRITE_BUF {
            buf = BytesMut::new();
        }
    }
    let _ = engine.send(EngineMsg::Disconnect(id));
}

/// Writes batches from the engine; several queued batches become one write.
pub async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<Out>>,
    closed: Arc<Notify>,
) {
    let mut out = BytesMut::new();
    'outer: while let Some(batch) = rx.recv().await {
        let mut close = encode(batch, &mut out);
        while !close {
            match rx.try_recv() {
                Ok(batch) => close = encode(batch, &mut out),
                Err(_) => break,
            }
        }
        if !out.is_empty() {
            if let Err(e) = wr.write_all(&out).await {
                tracing::debug!(error = %e, "write failed");
                break 'outer;
            }
            out.clear();
            if out.capacity() > KEEP_WRITE_BUF {
                out = BytesMut::new();
            }
        }
        if close {
            let _ = wr.shutdown().await;
            break;
        }
    }
    closed.notify_one();
}

/// Encodes a batch; true when it ends with a close.
fn encode(batch: Vec<Out>, out: &mut BytesMut) -> bool {
    for item in batch {
        match item {
            Out::Packet(r) => r.encode(out),
            Out::Text(t) => out.extend_from_slice(&t),
            Out::Close => return true,
        }
    }
    false
}
