//! An in-process socket pair, where a Unix one would cost two system calls
//! per batch each way: a partitioned node's link to its own job server, and
//! a TLS session's plaintext side. One end is an I/O thread's
//! [`crate::sock::Sock`] (readiness, then a try) or a task's halves, the
//! other a task's `AsyncRead` and `AsyncWrite` halves. Each direction holds
//! a bounded number of bytes, as a socket's buffer would.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes one direction of a node's link to itself holds before its writer
/// waits (the link carries every client's traffic).
pub const LINK_CAP: usize = 1 << 20;

/// The same for a TLS session's plaintext side, about a Unix socket
/// pair's buffer: what a client that does not read can leave there.
pub const SESSION_CAP: usize = 256 * 1024;

/// Room an emptied direction keeps; a bigger buffer (a burst, a large
/// payload) is freed, so an idle connection holds little.
const KEEP: usize = 64 * 1024;

/// One direction.
struct Pipe(Mutex<State>);

#[derive(Default)]
struct State {
    buf: BytesMut,
    /// The writer is gone or shut its side: the reader sees the end once
    /// `buf` is empty.
    write_closed: bool,
    /// The reader is gone: writes fail.
    read_closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// `buf` held more than [`KEEP`] since it was last empty.
    grown: bool,
    /// The most `buf` holds.
    cap: usize,
}

impl Pipe {
    fn new(cap: usize) -> Arc<Pipe> {
        Arc::new(Pipe(Mutex::new(State {
            cap,
            ..State::default()
        })))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.lock();
        if !s.buf.is_empty() || s.write_closed {
            return Poll::Ready(Ok(()));
        }
        s.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.lock();
        if s.buf.len() < s.cap || s.read_closed {
            return Poll::Ready(Ok(()));
        }
        s.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    /// What is there, up to `max` bytes, given to `put`; `WouldBlock` when
    /// nothing is, `Ok(0)` at the end.
    fn try_read(&self, max: usize, put: impl FnOnce(&[u8])) -> io::Result<usize> {
        let mut s = self.lock();
        if s.buf.is_empty() {
            return match s.write_closed {
                true => Ok(0),
                false => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        let n = max.min(s.buf.len());
        put(&s.buf[..n]);
        s.buf.advance(n);
        if s.buf.is_empty() && s.grown {
            s.buf = BytesMut::new();
            s.grown = false;
        }
        if let Some(w) = s.writer.take() {
            w.wake();
        }
        Ok(n)
    }

    fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        let mut s = self.lock();
        if s.read_closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let n = data.len().min(s.cap - s.buf.len().min(s.cap));
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        s.buf.extend_from_slice(&data[..n]);
        s.grown |= s.buf.len() > KEEP;
        if let Some(r) = s.reader.take() {
            r.wake();
        }
        Ok(n)
    }

    fn close_write(&self) {
        let mut s = self.lock();
        s.write_closed = true;
        if let Some(r) = s.reader.take() {
            r.wake();
        }
    }

    fn close_read(&self) {
        let mut s = self.lock();
        s.read_closed = true;
        s.buf = BytesMut::new();
        if let Some(w) = s.writer.take() {
            w.wake();
        }
    }
}

/// A new pair holding `cap` bytes each way: the I/O thread's end and the
/// task's two halves.
pub fn pair(cap: usize) -> (End, ReadHalf, WriteHalf) {
    let (to_end, from_end) = (Pipe::new(cap), Pipe::new(cap));
    (
        End {
            rx: to_end.clone(),
            tx: from_end.clone(),
            fd: -1,
        },
        ReadHalf(from_end),
        WriteHalf(to_end),
    )
}

/// A new pair of two tasks' halves holding `cap` bytes each way: what one
/// writes, the other reads.
pub fn halves(cap: usize) -> ((ReadHalf, WriteHalf), (ReadHalf, WriteHalf)) {
    let (ab, ba) = (Pipe::new(cap), Pipe::new(cap));
    (
        (ReadHalf(ba.clone()), WriteHalf(ab.clone())),
        (ReadHalf(ab), WriteHalf(ba)),
    )
}

/// The I/O thread's end: reads what the peer wrote, writes what it reads.
pub struct End {
    rx: Arc<Pipe>,
    tx: Arc<Pipe>,
    /// The descriptor `workers` shows for it.
    fd: i32,
}

impl End {
    /// Shows as descriptor `fd` (a TLS session's socket) rather than -1.
    pub fn shown_as(mut self, fd: i32) -> End {
        self.fd = fd;
        self
    }

    pub fn fd(&self) -> i32 {
        self.fd
    }

    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.rx.poll_readable(cx)
    }

    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tx.poll_writable(cx)
    }

    /// Reads into `buf`'s spare room, as a socket's `try_read_buf` does.
    pub fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let room = buf.chunk_mut().len();
        self.rx.try_read(room, |bytes| buf.put_slice(bytes))
    }

    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        self.tx.try_write(data)
    }

    /// As a socket's shutdown: reading ends the peer's writes, writing
    /// gives the peer its end of file.
    pub fn shutdown(&self, how: std::net::Shutdown) {
        use std::net::Shutdown::*;
        if matches!(how, Read | Both) {
            self.rx.close_read();
        }
        if matches!(how, Write | Both) {
            self.tx.close_write();
        }
    }
}

impl Drop for End {
    fn drop(&mut self) {
        self.shutdown(std::net::Shutdown::Both);
    }
}

/// A task's reading half.
pub struct ReadHalf(Arc<Pipe>);

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // No room is not the end of file a zero-byte read would say.
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            match self
                .0
                .try_read(buf.remaining(), |bytes| buf.put_slice(bytes))
            {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.0.poll_readable(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl Drop for ReadHalf {
    fn drop(&mut self) {
        self.0.close_read();
    }
}

/// A task's writing half.
pub struct WriteHalf(Arc<Pipe>);

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.0.try_write(data) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.0.poll_writable(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.close_write();
        Poll::Ready(Ok(()))
    }
}

impl Drop for WriteHalf {
    fn drop(&mut self) {
        self.0.close_write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_go_both_ways_and_ends_are_seen() {
        let (end, mut r, mut w) = pair(LINK_CAP);
        w.write_all(b"hello").await.expect("write");
        std::future::poll_fn(|cx| end.poll_read_ready(cx))
            .await
            .expect("readable");
        let mut got = BytesMut::new();
        assert_eq!(end.try_read_buf(&mut got).expect("read"), 5);
        assert_eq!(&got[..], b"hello");
        assert_eq!(
            end.try_read_buf(&mut got).map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock)
        );
        assert_eq!(end.try_write(b"back").expect("write"), 4);
        let mut four = [0; 4];
        r.read_exact(&mut four).await.expect("read back");
        assert_eq!(&four, b"back");
        // A read with no room returns at once, whatever waits.
        assert_eq!(end.try_write(b"more").expect("write"), 4);
        assert_eq!(r.read(&mut []).await.expect("no room"), 0);
        r.read_exact(&mut four).await.expect("read more");
        assert_eq!(&four, b"more");
        // The task's writer goes: the end reads its end of file.
        drop(w);
        assert_eq!(end.try_read_buf(&mut got).expect("end of file"), 0);
        // The end goes: the task reads its end of file.
        drop(end);
        assert_eq!(r.read(&mut four).await.expect("end of file"), 0);
    }

    #[tokio::test]
    async fn two_tasks_halves_cross_and_see_each_end() {
        let ((mut ar, mut aw), (mut br, mut bw)) = halves(SESSION_CAP);
        aw.write_all(b"ping").await.expect("write a");
        bw.write_all(b"pong").await.expect("write b");
        let mut four = [0; 4];
        br.read_exact(&mut four).await.expect("read b");
        assert_eq!(&four, b"ping");
        ar.read_exact(&mut four).await.expect("read a");
        assert_eq!(&four, b"pong");
        // One side shuts its writing: the other reads the end, and can
        // still answer.
        aw.shutdown().await.expect("shutdown");
        assert_eq!(br.read(&mut four).await.expect("end of file"), 0);
        bw.write_all(b"last").await.expect("answer after the end");
        ar.read_exact(&mut four).await.expect("read the answer");
        assert_eq!(&four, b"last");
        // A reader that is gone fails the other side's writes.
        drop(ar);
        assert_eq!(
            bw.write_all(b"x").await.map_err(|e| e.kind()),
            Err(io::ErrorKind::BrokenPipe)
        );
    }

    #[tokio::test]
    async fn a_full_direction_waits_for_its_reader() {
        let (end, _r, mut w) = pair(LINK_CAP);
        assert_eq!(end.fd(), -1, "a node's own link shows no descriptor");
        let big = vec![7u8; LINK_CAP + 10];
        let writer = tokio::spawn(async move {
            w.write_all(&big).await.expect("write");
            w
        });
        tokio::task::yield_now().await;
        let mut got = BytesMut::new();
        while got.len() < LINK_CAP + 10 {
            std::future::poll_fn(|cx| end.poll_read_ready(cx))
                .await
                .expect("readable");
            end.try_read_buf(&mut got).expect("read");
        }
        assert!(got.iter().all(|&b| b == 7));
        let _w = writer.await.expect("the writer finished");
        // Emptied, the direction does not keep the burst's megabyte.
        assert_eq!(end.rx.lock().buf.capacity(), 0);
        // A session's direction holds less.
        let (end, _r, _w) = pair(SESSION_CAP);
        let n = end.try_write(&vec![0; SESSION_CAP + 5]).expect("write");
        assert_eq!(n, SESSION_CAP);
        assert_eq!(
            end.try_write(b"x").map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock)
        );
        // A write to a reader that is gone fails.
        let (end, r, _w) = pair(LINK_CAP);
        drop(r);
        assert_eq!(
            end.try_write(b"x").map_err(|e| e.kind()),
            Err(io::ErrorKind::BrokenPipe)
        );
    }
}
