//! The least work any Gearman server must do to acknowledge background
//! submissions only once they are on disk: a yardstick for `fsync`
//! A_submit (`perf/fsync-bound.sh`).
//!
//! One `epoll` loop. Each turn it reads every readable socket until it
//! would block and appends every `SUBMIT_JOB_BG` packet, as it arrived, to
//! one buffer. It then writes that buffer into a file that was filled with
//! zeros first (so a write changes no file metadata) and makes it durable
//! with one `fdatasync`, or writes it with `O_DIRECT|O_DSYNC` (`--direct`).
//! Only then does it send the JOB_CREATEDs. That is group commit with
//! nothing else: no record encoding, no job table, no index, no replay,
//! only the system calls and the flush a durable server cannot avoid.
//! Everything that arrived while a flush ran joins the next one.
//!
//! Three variants of the schedule can be chosen:
//! - `--hold-us N`: a flush waits up to N µs for as many clients as the
//!   previous flush answered, so that all of them can share it.
//! - `--threaded`: a second thread runs the flushes; the loop goes on
//!   reading and answering meanwhile.
//! - `--pipelined`: one thread writes each batch with `O_DIRECT` (into the
//!   device's cache) and another runs the `fdatasync`s, so the next batch's
//!   write overlaps the current flush (on this machine's disk a write and a
//!   flush cost ~60 and ~52 µs, both ~127 µs).
//!
//! The file is reused from its start when full (a yardstick keeps no
//! queue). It trusts its input; a text command gets an empty listing and
//! is closed. A benchmark tool, not a server.
//!
//!     cargo run --release -p gearshift-server --example fsync_ceiling -- PORT DIR [--direct] [--hold-us N | --threaded | --pipelined]

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gearshift_proto::frame::{decimal_u64, encode_one, Magic};
use gearshift_proto::PacketType;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

const LISTENER: Token = Token(usize::MAX);
const FLUSHED: Token = Token(usize::MAX - 1);
const SUBMIT_JOB_BG: u32 = 18;
const ECHO_REQ: u32 = 16;
/// Size of the zero-filled log file.
const FILE_BYTES: u64 = 64 << 20;
/// `O_DIRECT` writes go in whole blocks of this size.
const BLOCK: usize = 4096;

/// Submitters waiting for a flush: (connection, handle number).
type Waiting = Vec<(usize, u64)>;

/// The log file and where the next write goes.
struct Log {
    file: File,
    direct: Direct,
    pos: u64,
    /// Room for an aligned copy of a batch (`O_DIRECT`).
    scratch: Vec<u8>,
}

impl Log {
    fn open(dir: &str, direct: Direct) -> io::Result<Log> {
        let path = format!("{dir}/fsync-ceiling.log");
        let mut file = File::create(&path)?;
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..FILE_BYTES >> 20 {
            file.write_all(&zeros)?;
        }
        file.sync_all()?;
        let mut options = OpenOptions::new();
        options.write(true);
        match direct {
            Direct::No => {}
            Direct::Dsync => {
                options.custom_flags(libc::O_DIRECT | libc::O_DSYNC);
            }
            Direct::WriteOnly => {
                options.custom_flags(libc::O_DIRECT);
            }
        }
        Ok(Log {
            file: options.open(&path)?,
            direct,
            pos: 0,
            scratch: Vec::new(),
        })
    }

    /// Makes `bytes` durable after what was written before.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.direct == Direct::No {
            let at = self.next(bytes.len());
            self.file.write_all_at(bytes, at)?;
            return self.file.sync_data();
        }
        let len = bytes.len().div_ceil(BLOCK) * BLOCK;
        if self.scratch.len() < len + BLOCK {
            self.scratch = vec![0u8; len + BLOCK];
        }
        let at = self.next(len);
        let skip = self.scratch.as_ptr().align_offset(BLOCK);
        let window = &mut self.scratch[skip..skip + len];
        window[..bytes.len()].copy_from_slice(bytes);
        window[bytes.len()..].fill(0);
        self.file.write_all_at(window, at)
    }

    /// Where `len` bytes go (the file's start once they no longer fit).
    fn next(&mut self, len: usize) -> u64 {
        if self.pos + len as u64 > FILE_BYTES {
            self.pos = 0;
        }
        let at = self.pos;
        self.pos += len as u64;
        at
    }
}

/// How the log file is opened.
#[derive(Clone, Copy, PartialEq)]
enum Direct {
    /// Through the page cache: `pwrite` + `fdatasync`.
    No,
    /// `O_DIRECT|O_DSYNC`: each write is durable when it returns.
    Dsync,
    /// `O_DIRECT` alone: a write reaches the device's cache; a separate
    /// `fdatasync` (another thread's) makes it durable.
    WriteOnly,
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// The next flush's batch: the packets' bytes and who waits for them.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    waiting: Waiting,
}

/// A flush thread's inbox (`--threaded`).
type Inbox = Arc<(Mutex<Batch>, Condvar)>;

/// Waits until the inbox holds a batch and takes it: its bytes are swapped
/// into `bytes`, its submitters returned.
fn take(inbox: &Inbox, bytes: &mut Vec<u8>) -> Waiting {
    let (lock, ready) = &**inbox;
    let mut batch = lock.lock().unwrap_or_else(|p| p.into_inner());
    while batch.waiting.is_empty() {
        batch = ready.wait(batch).unwrap_or_else(|p| p.into_inner());
    }
    std::mem::swap(bytes, &mut batch.bytes);
    std::mem::take(&mut batch.waiting)
}

/// Runs flushes off the loop: takes every batch queued meanwhile, flushes
/// it, and hands its submitters back through `done` and `waker`.
fn flusher(mut log: Log, inbox: Inbox, done: mpsc::Sender<Waiting>, waker: Arc<Waker>) {
    let mut bytes = Vec::new();
    loop {
        let waiting = take(&inbox, &mut bytes);
        if let Err(e) = log.append(&bytes) {
            eprintln!("flush failed: {e}");
            std::process::exit(1);
        }
        bytes.clear();
        if done.send(waiting).is_err() || waker.wake().is_err() {
            return;
        }
    }
}

/// Written batches' submitters, waiting for the next `fdatasync`.
type Flushing = Arc<(Mutex<Waiting>, Condvar)>;

/// `--pipelined`, first stage: writes each batch (`O_DIRECT`, into the
/// device's cache) and queues its submitters for the syncer, so the next
/// batch's write overlaps the current flush.
fn writer(mut log: Log, inbox: Inbox, written: Flushing) {
    let mut bytes = Vec::new();
    loop {
        let mut waiting = take(&inbox, &mut bytes);
        if let Err(e) = log.append(&bytes) {
            eprintln!("write failed: {e}");
            std::process::exit(1);
        }
        bytes.clear();
        let (lock, ready) = &*written;
        lock.lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&mut waiting);
        ready.notify_one();
    }
}

/// `--pipelined`, second stage: one `fdatasync` for every batch written
/// before it started, then their submitters go back to the loop.
fn syncer(file: File, written: Flushing, done: mpsc::Sender<Waiting>, waker: Arc<Waker>) {
    let (lock, ready) = &*written;
    loop {
        let waiting = {
            let mut queued = lock.lock().unwrap_or_else(|p| p.into_inner());
            while queued.is_empty() {
                queued = ready.wait(queued).unwrap_or_else(|p| p.into_inner());
            }
            std::mem::take(&mut *queued)
        };
        if let Err(e) = file.sync_data() {
            eprintln!("fdatasync failed: {e}");
            std::process::exit(1);
        }
        if done.send(waiting).is_err() || waker.wake().is_err() {
            return;
        }
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(4730);
    let dir = args.get(2).cloned().unwrap_or_else(|| "/tmp".into());
    let flag = |name: &str| args.iter().any(|a| a == name);
    let hold = args
        .iter()
        .position(|a| a == "--hold-us")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .map_or(Duration::ZERO, Duration::from_micros);
    let direct = if flag("--pipelined") {
        Direct::WriteOnly
    } else if flag("--direct") {
        Direct::Dsync
    } else {
        Direct::No
    };
    let log = Log::open(&dir, direct)?;

    let mut listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), FLUSHED)?);
    let (done_tx, done_rx) = mpsc::channel();
    let inbox: Inbox = Arc::default();
    // The log stays on this thread unless a flusher thread takes it.
    let mut log = if flag("--pipelined") {
        let synced = log.file.try_clone()?;
        let written: Flushing = Arc::default();
        let (inbox, w, waker) = (inbox.clone(), written.clone(), waker.clone());
        std::thread::spawn(move || writer(log, inbox, w));
        std::thread::spawn(move || syncer(synced, written, done_tx, waker));
        None
    } else if flag("--threaded") {
        let (inbox, waker) = (inbox.clone(), waker.clone());
        std::thread::spawn(move || flusher(log, inbox, done_tx, waker));
        None
    } else {
        Some(log)
    };

    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut next_token = 0usize;
    let mut next_handle = 1u64;
    let mut batch = Batch::default();
    // How many the last flush answered, and until when a flush may wait.
    let mut answered = 0usize;
    let mut hold_until: Option<Instant> = None;
    loop {
        let timeout = hold_until.map(|t| t.saturating_duration_since(Instant::now()));
        poll.poll(&mut events, timeout)?;
        for event in events.iter() {
            match event.token() {
                FLUSHED => {
                    while let Ok(waiting) = done_rx.try_recv() {
                        answer(&mut conns, waiting);
                    }
                }
                LISTENER => {
                    while let Ok((mut stream, _)) = listener.accept() {
                        stream.set_nodelay(true)?;
                        let token = Token(next_token);
                        next_token += 1;
                        poll.registry()
                            .register(&mut stream, token, Interest::READABLE)?;
                        let buf = Vec::new();
                        conns.insert(token.0, Conn { stream, buf });
                    }
                }
                Token(key) => {
                    let Some(conn) = conns.get_mut(&key) else {
                        continue;
                    };
                    if !read(conn, key, &mut batch, &mut next_handle) {
                        if let Some(mut conn) = conns.remove(&key) {
                            poll.registry().deregister(&mut conn.stream)?;
                        }
                    }
                }
            }
        }
        if batch.waiting.is_empty() {
            continue;
        }
        let Some(log) = log.as_mut() else {
            let (lock, ready) = &*inbox;
            let mut queued = lock.lock().unwrap_or_else(|p| p.into_inner());
            queued.bytes.append(&mut batch.bytes);
            queued.waiting.append(&mut batch.waiting);
            ready.notify_one();
            continue;
        };
        if !hold.is_zero() && batch.waiting.len() < answered {
            let until = *hold_until.get_or_insert_with(|| Instant::now() + hold);
            if Instant::now() < until {
                continue;
            }
        }
        hold_until = None;
        log.append(&batch.bytes)?;
        batch.bytes.clear();
        answered = batch.waiting.len();
        answer(&mut conns, std::mem::take(&mut batch.waiting));
    }
}

/// Sends each waiting submitter its JOB_CREATED.
fn answer(conns: &mut HashMap<usize, Conn>, waiting: Waiting) {
    for (key, handle) in waiting {
        let Some(conn) = conns.get_mut(&key) else {
            continue;
        };
        let mut text = *b"H:ceiling:00000000000000000000";
        let mut digits = [0; 20];
        let digits = decimal_u64(handle, &mut digits);
        text[10..10 + digits.len()].copy_from_slice(digits);
        // A synchronous client's answer always fits its socket's buffer.
        let _ = conn
            .stream
            .write_all(&packet(PacketType::JobCreated, &text[..10 + digits.len()]));
    }
}

/// Reads until the socket would block and takes every whole packet.
/// Returns whether the connection is still open.
fn read(conn: &mut Conn, key: usize, batch: &mut Batch, next_handle: &mut u64) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match conn.stream.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => conn.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    if conn.buf.first().is_some_and(|&b| b != 0) {
        // A text command (the load tool's `status`): an empty listing.
        let _ = conn.stream.write_all(b".\n");
        return false;
    }
    let mut start = 0;
    while conn.buf.len() - start >= 12 {
        let p = &conn.buf[start..];
        let kind = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        let size = u32::from_be_bytes([p[8], p[9], p[10], p[11]]) as usize;
        if p.len() < 12 + size {
            break;
        }
        match kind {
            SUBMIT_JOB_BG => {
                batch.bytes.extend_from_slice(&p[..12 + size]);
                batch.waiting.push((key, *next_handle));
                *next_handle += 1;
            }
            ECHO_REQ => {
                let _ = conn
                    .stream
                    .write_all(&packet(PacketType::EchoRes, &p[12..12 + size]));
            }
            _ => {}
        }
        start += 12 + size;
    }
    conn.buf.drain(..start);
    true
}

/// One response packet.
fn packet(kind: PacketType, body: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(12 + body.len());
    encode_one(Magic::Res, kind, body, &mut out);
    out
}
