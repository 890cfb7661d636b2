//! Buffered, framed I/O on one connection (plain TCP or TLS), shared by
//! the client connection task, the worker sessions and the admin client.
//!
//! Requests are encoded with [`Request::encode`] into a write buffer;
//! [`Wire::recv`] reads and writes at the same time (so neither side can
//! stall the other with a full socket buffer) until a whole frame is there,
//! cut by [`decode_frame`] and parsed by [`Response::parse`]. Every method
//! is cancel safe: all progress lives in the two buffers (and, with TLS,
//! in rustls's own buffer, flushed before the next wait for a reply).
//!
//! The two transports are an enum, not a boxed trait object, so the plain
//! path stays a direct call on tokio's TCP halves.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use gearshift_proto::frame::DEFAULT_MAX_PACKET;
use gearshift_proto::{decode_frame, Frame, Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::addr::ServerAddr;
use crate::error::{Error, Result};
use crate::tls::TlsConfig;

/// Room kept free in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

/// The receiving half of a connection.
enum Reader {
    Tcp(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<TlsStream<TcpStream>>),
}

/// The sending half; a TLS half remembers bytes rustls may still hold.
enum Writer {
    Tcp(OwnedWriteHalf),
    Tls {
        half: tokio::io::WriteHalf<TlsStream<TcpStream>>,
        unflushed: bool,
    },
}

impl AsyncRead for Reader {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            Reader::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl Reader {
    /// Reads what has already arrived; `WouldBlock` when nothing has.
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Reader::Tcp(r) => r.try_read_buf(buf),
            Reader::Tls(r) => {
                // No readiness API through TLS: poll once with a waker that
                // does nothing (the next real read registers its own).
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let read = std::pin::pin!(r.read_buf(buf));
                match read.poll(&mut cx) {
                    Poll::Ready(r) => r,
                    Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                }
            }
        }
    }
}

impl AsyncWrite for Writer {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            Writer::Tls { half, unflushed } => {
                let r = Pin::new(half).poll_write(cx, buf);
                if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
                    *unflushed = true;
                }
                r
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_flush(cx),
            Writer::Tls { half, unflushed } => {
                let r = Pin::new(half).poll_flush(cx);
                if matches!(r, Poll::Ready(Ok(()))) {
                    *unflushed = false;
                }
                r
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            Writer::Tls { half, .. } => Pin::new(half).poll_shutdown(cx),
        }
    }
}

impl Writer {
    /// True while rustls may hold written bytes not yet on the socket
    /// (its `poll_write` returns before sending all it took).
    #[inline]
    fn unflushed(&self) -> bool {
        matches!(
            self,
            Writer::Tls {
                unflushed: true,
                ..
            }
        )
    }

    /// Writes some of `wbuf`, or flushes rustls when `wbuf` is empty.
    async fn push(&mut self, wbuf: &mut BytesMut) -> Result<()> {
        if wbuf.is_empty() {
            self.flush().await?;
        } else if self.write_buf(wbuf).await? == 0 {
            return Err(Error::ConnectionLost);
        }
        Ok(())
    }
}

/// One connection's socket halves and buffers.
pub(crate) struct Wire {
    rd: Reader,
    wr: Writer,
    rbuf: BytesMut,
    wbuf: BytesMut,
    addr: ServerAddr,
    /// Plain TCP: a reply that starts like a TLS record means a TLS port.
    plain: bool,
    /// A write failed: nothing more is sent, but what the server sent
    /// before closing (an ERROR saying why) is still read.
    write_failed: bool,
}

/// True if `buf` starts like a TLS record (alert or handshake, version
/// 3.x), which no Gearman reply does: binary replies start with NUL, admin
/// replies with printable text.
fn tls_record(buf: &[u8]) -> bool {
    matches!(buf, [0x15 | 0x16, 0x03, minor, ..] if *minor <= 0x04)
}

impl Wire {
    /// Connects to `addr` (TCP within `limit`, then the TLS handshake
    /// within `limit` again when `tls` is set).
    pub(crate) async fn connect(
        addr: &ServerAddr,
        limit: Duration,
        tls: Option<&TlsConfig>,
    ) -> Result<Wire> {
        let tcp = addr.connect(limit).await?;
        let plain = tls.is_none();
        let (rd, wr) = match tls {
            None => {
                let (rd, wr) = tcp.into_split();
                (Reader::Tcp(rd), Writer::Tcp(wr))
            }
            Some(tls) => {
                let stream = tls.handshake(addr, tcp, limit).await?;
                let (rd, wr) = tokio::io::split(stream);
                (
                    Reader::Tls(rd),
                    Writer::Tls {
                        half: wr,
                        unflushed: false,
                    },
                )
            }
        };
        Ok(Wire {
            rd,
            wr,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::new(),
            addr: addr.clone(),
            plain,
            write_failed: false,
        })
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
        if self.write_failed {
            return if self.wbuf.is_empty() {
                Ok(())
            } else {
                Err(Error::ConnectionLost)
            };
        }
        while !self.wbuf.is_empty() {
            let n = self.wr.write_buf(&mut self.wbuf).await?;
            if n == 0 {
                return Err(Error::ConnectionLost);
            }
        }
        if self.wr.unflushed() {
            self.wr.flush().await?;
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

    /// [`Error::TlsPort`] if a plain connection's reply starts like a TLS
    /// record; checked where a reply starts.
    fn check_not_tls(&self) -> Result<()> {
        if self.plain && tls_record(&self.rbuf) {
            return Err(Error::TlsPort {
                addr: self.addr.to_string(),
            });
        }
        Ok(())
    }

    /// The next frame, writing queued bytes meanwhile; `None` at a clean EOF.
    pub(crate) async fn recv_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            // Binary replies start with NUL: one compare on the usual path.
            if self.rbuf.first().is_some_and(|&b| b != 0) {
                self.check_not_tls()?;
            }
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
            if scanned < 3 {
                // Until a record header could be complete.
                self.check_not_tls()?;
            }
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
        if self.write_failed {
            return Ok(true);
        }
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
    ///
    /// A failed write does not end the connection here: a server that
    /// refuses a request (a packet over its size limit) sends ERROR and
    /// closes while the request is still being written, so reading goes
    /// on until the end of what it sent.
    async fn fill(&mut self) -> Result<bool> {
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                self.rbuf.reserve(READ_CHUNK);
            }
            let Wire {
                rd,
                wr,
                rbuf,
                wbuf,
                write_failed,
                ..
            } = self;
            let read = if *write_failed || (wbuf.is_empty() && !wr.unflushed()) {
                rd.read_buf(rbuf).await
            } else {
                tokio::select! {
                    r = rd.read_buf(rbuf) => r,
                    w = wr.push(wbuf) => {
                        if let Err(e) = w {
                            tracing::debug!(addr = %self.addr, error = %e, "write failed; reading what the server sent");
                            self.write_failed = true;
                            self.wbuf.clear();
                        }
                        continue;
                    }
                }
            };
            return match read {
                Ok(n) => Ok(n > 0),
                // After a failed write the reset is expected: the end of input.
                Err(_) if self.write_failed => Ok(false),
                Err(e) => Err(e.into()),
            };
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
