//! Buffered, framed I/O on one TCP connection, shared by the client
//! connection task, the worker sessions and the admin client.
//!
//! Requests are encoded with [`Request::encode`] into a write buffer;
//! [`Wire::recv`] reads and writes at the same time (so neither side can
//! stall the other with a full socket buffer) until a whole frame is there,
//! cut by [`decode_frame`] and parsed by [`Response::parse`]. Every method
//! is cancel safe: all progress lives in the two buffers.

use bytes::BytesMut;
use gearshift_proto::frame::DEFAULT_MAX_PACKET;
use gearshift_proto::{decode_frame, Frame, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// Room kept free in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

/// One connection's socket halves and buffers.
pub(crate) struct Wire {
    rd: OwnedReadHalf,
    wr: OwnedWriteHalf,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

impl Wire {
    /// Wraps a connected stream.
    pub(crate) fn new(stream: TcpStream) -> Wire {
        let (rd, wr) = stream.into_split();
        Wire {
            rd,
            wr,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::new(),
        }
    }

    /// Queues a request; it is written by the next `recv` or `flush`.
    pub(crate) fn queue(&mut self, req: &Request) {
        req.encode(&mut self.wbuf);
    }

    /// Bytes queued but not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.wbuf.len()
    }

    /// Queues raw bytes (an admin text line).
    pub(crate) fn queue_raw(&mut self, bytes: &[u8]) {
        self.wbuf.extend_from_slice(bytes);
    }

    /// Writes everything queued.
    pub(crate) async fn flush(&mut self) -> Result<()> {
        while !self.wbuf.is_empty() {
            let n = self.wr.write_buf(&mut self.wbuf).await?;
            if n == 0 {
                return Err(Error::ConnectionLost);
            }
        }
        Ok(())
    }

    /// Writes what is queued, then closes the sending side.
    pub(crate) async fn close(&mut self) {
        if let Err(e) = self.flush().await {
            tracing::debug!(error = %e, "flush before close failed");
        }
        if let Err(e) = self.wr.shutdown().await {
            tracing::debug!(error = %e, "shutdown failed");
        }
    }

    /// The next frame, writing queued bytes meanwhile; `None` at a clean EOF.
    pub(crate) async fn recv_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            if let Some(frame) = decode_frame(&mut self.rbuf, DEFAULT_MAX_PACKET)? {
                return Ok(Some(frame));
            }
            if !self.fill().await? {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::ConnectionLost)
                };
            }
        }
    }

    /// The next text line of an admin reply, without `\n` and one `\r`;
    /// `None` at a clean EOF. Unlike [`decode_frame`] (which guards a server
    /// against 8 KiB command lines) a reply line may be long: a `workers`
    /// line lists every function of a connection.
    pub(crate) async fn recv_line(&mut self) -> Result<Option<BytesMut>> {
        let mut scanned = 0;
        loop {
            if let Some(nl) = self.rbuf[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + nl;
                let mut line = self.rbuf.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                return Ok(Some(line));
            }
            scanned = self.rbuf.len();
            if scanned > DEFAULT_MAX_PACKET {
                return Err(Error::protocol("admin reply line too long"));
            }
            if !self.fill().await? {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::ConnectionLost)
                };
            }
        }
    }

    /// Reads whatever has already arrived, without waiting; true when the
    /// peer has closed. Frames read here are returned by later `recv`s.
    /// Checked before writing a request, so a request is never written to
    /// a connection whose close is already known.
    pub(crate) fn peer_closed(&mut self) -> Result<bool> {
        for _ in 0..64 {
            if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                self.rbuf.reserve(READ_CHUNK);
            }
            match self.rd.try_read_buf(&mut self.rbuf) {
                Ok(0) => return Ok(true),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(false)
    }

    /// Reads more bytes, writing queued ones meanwhile; false at EOF.
    async fn fill(&mut self) -> Result<bool> {
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                self.rbuf.reserve(READ_CHUNK);
            }
            let Wire { rd, wr, rbuf, wbuf } = self;
            let read = if wbuf.is_empty() {
                rd.read_buf(rbuf).await?
            } else {
                tokio::select! {
                    r = rd.read_buf(rbuf) => r?,
                    w = wr.write_buf(wbuf) => {
                        if w? == 0 {
                            return Err(Error::ConnectionLost);
                        }
                        continue;
                    }
                }
            };
            return Ok(read > 0);
        }
    }

    /// The next binary packet from the server, parsed; `None` at a clean EOF.
    pub(crate) async fn recv(&mut self) -> Result<Option<Response>> {
        match self.recv_frame().await? {
            None => Ok(None),
            Some(Frame::Packet(p)) => Response::parse(&p)
                .map(Some)
                .map_err(|e| Error::protocol(e.to_string())),
            Some(Frame::Text(line)) => Err(Error::protocol(format!(
                "unexpected text line {:?}",
                String::from_utf8_lossy(&line)
            ))),
        }
    }
}
