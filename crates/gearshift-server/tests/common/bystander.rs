//! A server with a bystander: bad input on one connection must leave a
//! client connected beforehand served and a job queued beforehand intact.
//! Shared by `bad_input.rs` and `admin_lines.rs`; and a seeded generator for
//! their random input.

use bytes::Bytes;

use super::{status_of, submit_bg, Conn, TestServer};

/// `max_packet_size` of the fixture's server.
pub const MAX_PACKET: usize = 1024;

/// A server with a connected bystander and one queued background job.
pub struct Fixture {
    /// The server.
    pub server: TestServer,
    /// A client connected before the bad input.
    pub bystander: Conn,
    /// The handle of its queued background job.
    pub job: Bytes,
}

impl Fixture {
    /// Starts the server, connects the bystander and queues its job.
    pub async fn new() -> Fixture {
        let mut cfg = super::config();
        cfg.max_packet_size = MAX_PACKET;
        let server = TestServer::start(cfg).await;
        let mut bystander = server.connect().await;
        bystander.send(&submit_bg("keep", "", b"payload")).await;
        let job = bystander.expect_created().await;
        Fixture {
            server,
            bystander,
            job,
        }
    }

    /// The bystander is served and the queued job is intact.
    pub async fn check_unharmed(&mut self) {
        self.bystander.ping(b"still here").await;
        let mut admin = self.server.connect().await;
        let status = admin.admin_list("status").await;
        assert_eq!(status_of(&status, "keep"), Some((1, 0, 0)), "{status}");
        let jobs = admin.admin_list("show jobs").await;
        let line = format!("{}\t0\t0\t1\n", String::from_utf8_lossy(&self.job));
        assert!(jobs.starts_with(&line), "job missing from:\n{jobs}");
    }

    /// Sends `bytes` on a fresh connection and expects it closed with no reply.
    pub async fn send_expect_close(&mut self, bytes: &[u8]) {
        let mut bad = self.server.connect().await;
        bad.send(bytes).await;
        bad.expect_closed().await;
        self.check_unharmed().await;
    }
}

/// A small seeded xorshift generator, so fuzz-like tests repeat exactly.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// One of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len() as u64) as usize]
    }
}
