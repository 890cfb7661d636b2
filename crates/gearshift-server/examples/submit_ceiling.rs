//! The least work any Gearman server must do for pipelined background
//! submissions, as a yardstick for `R_submit` (`perf/submit-bound.sh`).
//!
//! It answers `SUBMIT_JOB_BG` with `JOB_CREATED` and `ECHO_REQ` with
//! `ECHO_RES`, and ignores everything else. It keeps each job only as the
//! bytes it arrived in (every read buffer is kept, none is ever freed or
//! reused), so the queue costs its wire size in memory and nothing more: no
//! function registry, no per-job record, no index, no priorities, no
//! coalescing, no admin protocol. One thread, one `epoll` loop, one `recv`
//! per readable socket until it would block and one `send` per burst of
//! answers: the same system calls a real server needs at the least.
//! A real server that reads and writes its sockets this way cannot run
//! faster than this on the same machine; how close Gearshift comes is the
//! share of that ceiling it reaches. A benchmark tool, not a server: it
//! trusts its input (a packet that claims a huge size just waits for it).
//!
//!     cargo run --release -p gearshift-server --example submit_ceiling -- PORT

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use gearshift_proto::frame::decimal_u64;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);
/// Bytes of fresh room a read buffer must have before a `recv`.
const ROOM: usize = 16 * 1024;
/// Size of each new read buffer.
const CHUNK: usize = 64 * 1024;

const SUBMIT_JOB_BG: u32 = 18;
const JOB_CREATED: u32 = 8;
const ECHO_REQ: u32 = 16;
const ECHO_RES: u32 = 17;

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// The current read buffer (always its full size, zeroed once);
    /// `start..filled` is read but not parsed yet.
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    out: Vec<u8>,
    wants_write: bool,
}

/// Everything the server holds.
struct Server {
    /// Read buffers that are full: the queued jobs' bytes.
    kept: Vec<Vec<u8>>,
    next_handle: u64,
}

fn main() -> io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(4730);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut listener = TcpListener::bind(addr)?;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut server = Server {
        kept: Vec::new(),
        next_handle: 1,
    };
    let mut next_token = 0usize;
    loop {
        poll.poll(&mut events, None)?;
        for event in events.iter() {
            if event.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            stream.set_nodelay(true)?;
                            let token = Token(next_token);
                            next_token += 1;
                            poll.registry()
                                .register(&mut stream, token, Interest::READABLE)?;
                            conns.insert(
                                token.0,
                                Conn {
                                    stream,
                                    buf: vec![0; CHUNK],
                                    start: 0,
                                    filled: 0,
                                    out: Vec::new(),
                                    wants_write: false,
                                },
                            );
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            let key = event.token().0;
            let Some(conn) = conns.get_mut(&key) else {
                continue;
            };
            let alive = serve(conn, &mut server).unwrap_or(false);
            if !alive {
                if let Some(mut conn) = conns.remove(&key) {
                    poll.registry().deregister(&mut conn.stream)?;
                }
                continue;
            }
            let want = !conn.out.is_empty();
            if want != conn.wants_write {
                let interest = if want {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                poll.registry()
                    .reregister(&mut conn.stream, event.token(), interest)?;
                conn.wants_write = want;
            }
        }
    }
}

/// Reads until the socket would block, answers every whole packet, writes
/// the answers. Returns whether the connection is still open.
fn serve(conn: &mut Conn, server: &mut Server) -> io::Result<bool> {
    loop {
        if conn.buf.len() - conn.filled < ROOM {
            // Keep the full buffer (its jobs stay queued) and move the
            // unparsed tail into a new one.
            let tail = conn.filled - conn.start;
            let mut fresh = vec![0; CHUNK.max(tail + ROOM)];
            fresh[..tail].copy_from_slice(&conn.buf[conn.start..conn.filled]);
            let full = std::mem::replace(&mut conn.buf, fresh);
            conn.start = 0;
            conn.filled = tail;
            server.kept.push(full);
        }
        match conn.stream.read(&mut conn.buf[conn.filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                conn.filled += n;
                answer(conn, server);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(false),
        }
    }
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(n) => {
                conn.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// Answers every whole packet in the buffer.
fn answer(conn: &mut Conn, server: &mut Server) {
    loop {
        let rest = &conn.buf[conn.start..conn.filled];
        if rest.len() < 12 {
            return;
        }
        let kind = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let size = u32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
        if rest.len() < 12 + size {
            return;
        }
        match kind {
            SUBMIT_JOB_BG => {
                let mut handle = *b"H:ceiling:00000000000000000000";
                let mut digits = [0; 20];
                let digits = decimal_u64(server.next_handle, &mut digits);
                server.next_handle += 1;
                handle[10..10 + digits.len()].copy_from_slice(digits);
                put(&mut conn.out, JOB_CREATED, &handle[..10 + digits.len()]);
            }
            ECHO_REQ => {
                let body = &conn.buf[conn.start + 12..conn.start + 12 + size];
                put(&mut conn.out, ECHO_RES, body);
            }
            _ => {}
        }
        conn.start += 12 + size;
    }
}

/// Appends one response packet.
fn put(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    out.extend_from_slice(b"\0RES");
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
}
