//! A connection's socket: TCP, or the end of an in-process pipe
//! ([`crate::pipe`]) whose other end a TLS session pumps ([`crate::tls`]) or
//! a partitioned node's link to itself writes. The I/O threads treat them
//! alike.

use std::future::poll_fn;
use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;

use bytes::BufMut;
use tokio::io::Interest;

/// A socket handed to an I/O thread (still blocking).
pub enum StdSock {
    /// A plaintext TCP connection.
    Tcp(std::net::TcpStream),
    /// In process: a TLS connection's plaintext side, or this node's own link.
    Mem(crate::pipe::End),
}

/// A registered, non-blocking socket.
pub enum Sock {
    /// A plaintext TCP connection.
    Tcp(tokio::net::TcpStream),
    /// In process: a TLS connection's plaintext side, or this node's own link.
    Mem(crate::pipe::End),
}

impl Sock {
    /// Registers `s` with this thread's runtime.
    pub fn from_std(s: StdSock) -> io::Result<Sock> {
        Ok(match s {
            StdSock::Tcp(s) => {
                s.set_nonblocking(true)?;
                Sock::Tcp(tokio::net::TcpStream::from_std(s)?)
            }
            StdSock::Mem(e) => Sock::Mem(e),
        })
    }

    /// Waits until a read may succeed. Only one task may wait to read a
    /// socket (the socket keeps one waker per direction, so no waiter list
    /// is locked to join and leave on every read).
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| match self {
            Sock::Tcp(s) => s.poll_read_ready(cx),
            Sock::Mem(e) => e.poll_read_ready(cx),
        })
        .await
    }

    /// Waits until a write may succeed; only one task may wait to write.
    pub async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| match self {
            Sock::Tcp(s) => s.poll_write_ready(cx),
            Sock::Mem(e) => e.poll_write_ready(cx),
        })
        .await
    }

    /// Runs `f`, clearing the readiness it reports `WouldBlock` for.
    pub fn try_io<R>(&self, i: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Sock::Tcp(s) => s.try_io(i, f),
            // No readiness to clear: a read finds out anew each time.
            Sock::Mem(_) => f(),
        }
    }

    /// Reads what is there into `buf` without waiting.
    pub fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.try_read_buf(buf),
            Sock::Mem(e) => e.try_read_buf(buf),
        }
    }

    /// Writes what fits without waiting.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.try_write(buf),
            Sock::Mem(e) => e.try_write(buf),
        }
    }

    /// Shuts one or both directions down; errors (a peer already gone) are moot.
    pub fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Sock::Tcp(s) => socket2::SockRef::from(s).shutdown(how),
            Sock::Mem(e) => {
                e.shutdown(how);
                Ok(())
            }
        };
    }

    /// The descriptor number, as `workers` shows it (a TLS session's
    /// socket; -1 for a node's own link).
    pub fn raw_fd(&self) -> i32 {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Mem(e) => e.fd(),
        }
    }
}
