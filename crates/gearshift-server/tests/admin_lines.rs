//! Client-chosen bytes in admin listings: names, ids and uniques full of
//! control bytes must leave every listing parseable line by line, and the
//! server unharmed for everyone else.

mod common;

use std::time::Duration;

use common::bystander::{Fixture, Rng};
use common::listing::{listings_parse, workers_rows};
use common::{bare, req, submit_bg};
use gearshift_proto::PacketType;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_bytes_in_names_cannot_forge_admin_lines() {
    let mut fx = Fixture::new().await;
    let mut worker = fx.server.connect().await;
    worker.send(&common::can_do("good")).await;
    worker
        .send(&req(PacketType::SetClientId, &[b"worker-1"]))
        .await;
    // Accepted as gearmand accepts them (Perl's prefixed names carry a TAB).
    let names: [&[u8]; 5] = [
        b"evil\nkeep\t9\t9\t9",
        b"\0starts-like-a-packet",
        b"cr\r",
        b"tab\tx",
        b"del\x7f",
    ];
    for name in names {
        worker.send(&req(PacketType::CanDo, &[name])).await;
        let id = [b"id-", name].concat();
        worker.send(&req(PacketType::SetClientId, &[&id])).await;
        if name.contains(&0) {
            // A NUL ends the function name of these packets on the wire.
            continue;
        }
        worker
            .send(&req(PacketType::CanDoTimeout, &[name, b"5000"]))
            .await;
        for kind in [PacketType::SubmitJob, PacketType::SubmitJobBg] {
            worker.send(&req(kind, &[name, b"", b"data"])).await;
            worker.expect_created().await;
        }
    }
    worker.ping(b"still a worker").await;
    // Uniques stay accepted (as gearmand accepts them) and are listed escaped.
    fx.bystander
        .send(&submit_bg("uniq", "u\n.\nH:forged", b"x"))
        .await;
    fx.bystander.expect_created().await;

    let (status, workers) = listings_parse(&fx.server).await;
    assert_eq!(
        status,
        "keep\t1\t0\t0\ngood\t0\t0\t1\n\
         evil\\x0akeep\\x099\\x099\\x099\t2\t0\t1\n\
         \\x00starts-like-a-packet\t0\t0\t1\n\
         cr\\x0d\t2\t0\t1\n\
         tab\\x09x\t2\t0\t1\n\
         del\\x7f\t2\t0\t1\n\
         uniq\t1\t0\t0\n.\n"
    );
    let ids: Vec<(String, Vec<String>)> = workers_rows(&workers);
    assert_eq!(ids.len(), 3, "{workers}");
    assert_eq!(ids[1].0, "id-del\\x7f", "{workers}");
    assert_eq!(ids[1].1.len(), 6, "{workers}");
    let mut admin = fx.server.connect().await;
    assert_eq!(
        admin.admin_list("show unique jobs").await,
        // Nine jobs without a unique, then the forged one.
        format!("{}u\\x0a.\\x0aH:forged\n.\n", "\n".repeat(9))
    );
    fx.check_unharmed().await;
}

/// A stream of well-framed packets and admin lines whose names, ids and
/// uniques are random bytes, heavy in controls, spaces and dots; it ends
/// with ECHO_REQ `sync`, so the sender knows the server read it all.
fn hostile_names(rng: &mut Rng, size: usize) -> Vec<u8> {
    let name = |rng: &mut Rng, max: u64| -> Vec<u8> {
        let len = rng.below(max + 1) as usize;
        (0..len)
            .map(|_| match rng.below(10) {
                0..=3 => rng.pick(&[b"\n", b"\r", b"\0", b"\t", b"\x1b", b"\x7f", b"\x01"])[0],
                4 => b' ',
                5 => b'.',
                _ => b'!' + rng.below(94) as u8,
            })
            .collect()
    };
    let pool: Vec<Vec<u8>> = (0..32).map(|_| name(rng, 24)).collect();
    let mut out = Vec::with_capacity(size + 64);
    while out.len() < size {
        let f = &pool[rng.below(pool.len() as u64) as usize];
        let unique = name(rng, 64);
        let packet = match rng.below(8) {
            0 => req(PacketType::CanDo, &[f]),
            1 => req(PacketType::CanDoTimeout, &[f, b"60000"]),
            2 => req(PacketType::SetClientId, &[f]),
            3 => req(PacketType::SubmitJobBg, &[f, &unique, b"w"]),
            4 => req(PacketType::SubmitJobHighBg, &[f, &unique, b"w"]),
            5 => req(PacketType::SubmitJob, &[f, &unique, b"w"]),
            6 => bare(PacketType::GrabJobUniq),
            _ => {
                // One admin word: no space, LF or leading NUL in it.
                let word: Vec<u8> = f
                    .iter()
                    .map(|&c| if c == b' ' || c == b'\n' { b'_' } else { c })
                    .collect();
                [b"create function x", &word[..], b"\n"].concat()
            }
        };
        out.extend(packet);
    }
    out.extend(req(PacketType::EchoReq, &[b"sync"]));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_names_never_break_admin_listings() {
    const CONNS: u64 = 20;
    const BYTES: usize = 256 * 1024;
    let mut fx = Fixture::new().await;
    let mut rng = Rng(0x0dd_ba11_5eed_cafe);
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        let conn = fx.server.connect().await;
        // Half send hostile names on connections they keep open; half send
        // random bytes (with some hostile packets in them) and hang up.
        let hangs_up = c % 2 == 1;
        let bytes = if hangs_up {
            let mut noise = rng.bytes(BYTES / 2);
            noise.extend(hostile_names(&mut rng, BYTES / 2));
            noise
        } else {
            hostile_names(&mut rng, BYTES)
        };
        tasks.push(tokio::spawn(async move {
            let (mut rd, mut wr) = conn.stream.into_split();
            // Read while writing: the server answers much of this stream.
            let reader = tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut tail = Tail::default();
                let mut chunk = vec![0; 64 * 1024];
                loop {
                    match rd.read(&mut chunk).await {
                        Ok(0) | Err(_) => return (false, rd),
                        Ok(n) => {
                            if tail.push_and_find(&chunk[..n], &SYNC_REPLY) {
                                return (true, rd);
                            }
                        }
                    }
                }
            });
            let wrote = tokio::time::timeout(common::TIMEOUT, wr.write_all(&bytes)).await;
            if hangs_up {
                let _ = wr.shutdown().await;
            }
            let (synced, rd) = tokio::time::timeout(common::TIMEOUT, reader)
                .await
                .expect("server neither answered the sync nor closed")
                .expect("reader task");
            if !hangs_up {
                assert!(matches!(wrote, Ok(Ok(()))), "write failed: {wrote:?}");
                assert!(synced, "connection {c} closed on well-framed input");
            }
            (rd, wr)
        }));
    }
    // Keep the connections that stayed open: their names are in `workers`.
    let mut open = Vec::new();
    for t in tasks {
        open.push(t.await.expect("connection task"));
    }
    let want_lines = 1 + CONNS as usize / 2 + 1; // bystander, kept ones, the probe
    let start = std::time::Instant::now();
    loop {
        let (_, workers) = listings_parse(&fx.server).await;
        let rows = workers_rows(&workers);
        if rows.len() == want_lines {
            break;
        }
        assert!(
            start.elapsed() < common::TIMEOUT,
            "hung-up connections linger:\n{workers}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fx.check_unharmed().await;
    drop(open);
}

/// The ECHO_RES that answers `hostile_names`' closing ECHO_REQ.
const SYNC_REPLY: [u8; 16] = *b"\0RES\0\0\0\x11\0\0\0\x04sync";

/// The last bytes a connection read, enough to spot a needle split across reads.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    /// Appends `more`; true when `needle` ends in it.
    fn push_and_find(&mut self, more: &[u8], needle: &[u8]) -> bool {
        self.0.extend_from_slice(more);
        let found = self.0.windows(needle.len()).any(|w| w == needle);
        let keep = self.0.len().min(needle.len() - 1);
        self.0.drain(..self.0.len() - keep);
        found
    }
}
