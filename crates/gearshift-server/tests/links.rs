//! A cluster link as the leader sees it: one socket from another node that
//! carries many client connections, each served as a connection of its own.
//! A node with the wrong secret is refused; a broken client stream closes
//! only that client; a broken link closes all it carried and nothing else.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{config, raw_packet, req, TestServer, TIMEOUT};
use gearshift_proto::frame::MAGIC_REQ;
use gearshift_proto::link::{decode_link, encode_data, LinkFrame};
use gearshift_proto::{PacketType, Response};
use gearshift_server::cluster::relay::{link_preamble, RelayGate};
use gearshift_server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "the-cluster-secret";

async fn leader() -> TestServer {
    leader_with(config()).await
}

async fn leader_with(cfg: gearshift_server::ServerConfig) -> TestServer {
    let mut server = Server::bind(cfg).await.expect("bind");
    server.accept_relays(Arc::new(RelayGate::new(
        SECRET.into(),
        Duration::from_secs(5),
    )));
    TestServer::run(server)
}

/// A node's end of a link.
struct Link {
    sock: tokio::net::TcpStream,
    buf: BytesMut,
}

impl Link {
    async fn open(s: &TestServer, secret: &str) -> Link {
        // A small receive buffer: what this end does not read backs up at
        // the leader soon, not after megabytes of kernel buffers.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(16 * 1024).expect("SO_RCVBUF");
        let mut sock = socket.connect(s.addr).await.expect("connect");
        sock.write_all(&link_preamble(secret, "node-b"))
            .await
            .expect("preamble");
        Link {
            sock,
            buf: BytesMut::new(),
        }
    }

    async fn send(&mut self, frames: &[LinkFrame]) {
        let mut out = BytesMut::new();
        for f in frames {
            f.encode(&mut out);
        }
        self.sock.write_all(&out).await.expect("write the link");
    }

    /// The next frame, or None when the leader closed the link.
    async fn next(&mut self) -> Option<LinkFrame> {
        loop {
            if let Some(f) = decode_link(&mut self.buf, 1 << 24).expect("a valid frame") {
                return Some(f);
            }
            let n = tokio::time::timeout(TIMEOUT, self.sock.read_buf(&mut self.buf))
                .await
                .expect("the leader answers in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// Every byte the leader sends `vid` until `want` bytes came, skipping
    /// other connections' frames into `others`.
    async fn bytes_for(&mut self, vid: u32, want: usize, others: &mut Vec<LinkFrame>) -> Vec<u8> {
        let mut got = Vec::new();
        while got.len() < want {
            match self.next().await.expect("link open") {
                LinkFrame::Data { vid: v, bytes } if v == vid => got.extend_from_slice(&bytes),
                f => others.push(f),
            }
        }
        got
    }
}

fn open(vid: u32) -> LinkFrame {
    LinkFrame::Open {
        vid,
        peer: format!("192.0.2.{vid}:4{vid:04}"),
        identity: None,
    }
}

fn data(vid: u32, bytes: Vec<u8>) -> LinkFrame {
    LinkFrame::Data {
        vid,
        bytes: Bytes::from(bytes),
    }
}

fn echo_res(text: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    Response::EchoRes(Bytes::copy_from_slice(text)).encode(&mut out);
    out.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_carries_many_connections() {
    let s = leader().await;
    let mut link = Link::open(&s, SECRET).await;
    // Three clients open and each sends a packet split across two frames.
    let mut frames = Vec::new();
    for vid in 1..=3u32 {
        frames.push(open(vid));
    }
    for vid in 1..=3u32 {
        let pkt = req(PacketType::EchoReq, &[format!("hello {vid}").as_bytes()]);
        frames.push(data(vid, pkt[..5].to_vec()));
        frames.push(data(vid, pkt[5..].to_vec()));
    }
    link.send(&frames).await;
    let mut others = Vec::new();
    for vid in 1..=3u32 {
        let want = echo_res(format!("hello {vid}").as_bytes());
        let got = link.bytes_for(vid, want.len(), &mut others).await;
        assert_eq!(got, want, "echo of connection {vid}");
    }
    // Each is its own connection of the leader, with its client's address.
    link.send(&[data(2, b"workers\n".to_vec())]).await;
    let mut text = Vec::new();
    while !text.ends_with(b".\n") {
        let more = link.bytes_for(2, 1, &mut others).await;
        text.extend(more);
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    for vid in 1..=3u32 {
        assert!(text.contains(&format!("192.0.2.{vid} ")), "workers: {text}");
    }
    // A client that closes is closed by the leader in turn; the others stay.
    link.send(&[LinkFrame::Close { vid: 1 }]).await;
    let mut closed = false;
    for _ in 0..10 {
        if others.contains(&LinkFrame::Close { vid: 1 }) {
            closed = true;
            break;
        }
        others.push(link.next().await.expect("link open"));
    }
    assert!(closed, "the leader closed connection 1: {others:?}");
    link.send(&[data(3, req(PacketType::EchoReq, &[b"still"]))])
        .await;
    let want = echo_res(b"still");
    assert_eq!(link.bytes_for(3, want.len(), &mut others).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_client_bytes_close_only_that_client() {
    let s = leader().await;
    let mut link = Link::open(&s, SECRET).await;
    link.send(&[open(1), open(2)]).await;
    // Connection 1 sends a packet of an unknown type: closed alone.
    link.send(&[data(1, raw_packet(&MAGIC_REQ, 43, b"x"))])
        .await;
    let mut others = Vec::new();
    loop {
        match link.next().await.expect("link open") {
            LinkFrame::Close { vid: 1 } => break,
            f => others.push(f),
        }
    }
    link.send(&[data(2, req(PacketType::EchoReq, &[b"fine"]))])
        .await;
    let want = echo_res(b"fine");
    assert_eq!(link.bytes_for(2, want.len(), &mut others).await, want);
    // A direct client was never affected either.
    let mut direct = s.connect().await;
    direct.send(&req(PacketType::EchoReq, &[b"direct"])).await;
    direct
        .expect(Response::EchoRes(Bytes::from_static(b"direct")))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_link_closes_what_it_carried_and_nothing_else() {
    let s = leader().await;
    // A worker on the link holds a job a direct client submitted.
    let mut link = Link::open(&s, SECRET).await;
    let mut w = Vec::new();
    w.extend(req(PacketType::CanDo, &[b"f"]));
    link.send(&[open(5), data(5, w)]).await;
    let mut client = s.connect().await;
    client
        .send(&req(PacketType::SubmitJobBg, &[b"f", b"", b"payload"]))
        .await;
    let created = client.recv().await;
    assert!(matches!(created, Response::JobCreated(_)), "{created:?}");
    link.send(&[data(5, req(PacketType::GrabJob, &[]))]).await;
    let mut others = Vec::new();
    let assigned = link.bytes_for(5, 12, &mut others).await;
    assert_eq!(&assigned[..4], b"\0RES", "the linked worker got an answer");
    // A frame of an unknown kind breaks the link.
    link.sock
        .write_all(&[9, 0, 0, 0, 5, 0, 0, 0, 0])
        .await
        .expect("write");
    while link.next().await.is_some() {}
    // The job its worker held is back in the queue, and the server serves on.
    let mut admin = s.connect().await;
    let mut queued = false;
    for _ in 0..50 {
        let text = admin.admin_list("status").await;
        if text.lines().any(|l| l.starts_with("f\t1\t0\t0")) {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(queued, "the lost worker's job is queued again");
    let mut direct = s.connect().await;
    direct.send(&req(PacketType::EchoReq, &[b"on"])).await;
    direct
        .expect(Response::EchoRes(Bytes::from_static(b"on")))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_for_one_carried_client_closes_that_client_not_the_link() {
    let s = leader_with(gearshift_server::ServerConfig {
        max_output: 64 * 1024,
        max_packet_size: 256 * 1024,
        ..config()
    })
    .await;
    let mut link = Link::open(&s, SECRET).await;
    // Client 1 submits a foreground job; client 2 only waits.
    link.send(&[
        open(1),
        open(2),
        data(1, req(PacketType::SubmitJob, &[b"flood", b"", b"x"])),
    ])
    .await;
    let mut worker = s.connect().await;
    worker.send(&req(PacketType::CanDo, &[b"flood"])).await;
    let mut handle = None;
    for _ in 0..100 {
        worker.send(&req(PacketType::GrabJob, &[])).await;
        if let Response::JobAssign { handle: h, .. } = worker.recv().await {
            handle = Some(h);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let handle = handle.expect("the worker got the job");
    // 8 MiB of WORK_DATA for client 1 while this node reads nothing of
    // the link: past the hard limit, the leader closes client 1 alone.
    let chunk = vec![b'z'; 200 * 1024];
    for _ in 0..40 {
        worker
            .send(&req(PacketType::WorkData, &[&handle, &chunk]))
            .await;
    }
    worker.send(&req(PacketType::EchoReq, &[b"done"])).await;
    worker
        .expect(Response::EchoRes(Bytes::from_static(b"done")))
        .await;
    link.send(&[data(2, req(PacketType::EchoReq, &[b"two"]))])
        .await;
    let want = echo_res(b"two");
    let mut others = Vec::new();
    let mut got_one = 0usize;
    let got = link.bytes_for(2, want.len(), &mut others).await;
    assert_eq!(got, want, "client 2 is served on the same link");
    let mut closed = others.contains(&LinkFrame::Close { vid: 1 });
    for f in &others {
        if let LinkFrame::Data { vid: 1, bytes } = f {
            got_one += bytes.len();
        }
    }
    while !closed {
        match link.next().await.expect("the link stays open") {
            LinkFrame::Close { vid: 1 } => closed = true,
            LinkFrame::Data { vid: 1, bytes } => got_one += bytes.len(),
            f => panic!("unexpected {f:?}"),
        }
    }
    assert!(
        got_one < 40 * 200 * 1024,
        "client 1 was cut before the whole flood ({got_one} bytes)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_with_the_wrong_secret_is_refused() {
    let s = leader().await;
    let mut link = Link::open(&s, "not-the-secret").await;
    let mut out = BytesMut::new();
    open(1).encode(&mut out);
    encode_data(&mut out, 1, &req(PacketType::EchoReq, &[b"x"]));
    // Writing may fail once the leader has closed it.
    let _ = link.sock.write_all(&out).await;
    assert_eq!(
        link.next().await,
        None,
        "the leader closes the link unanswered"
    );
}
