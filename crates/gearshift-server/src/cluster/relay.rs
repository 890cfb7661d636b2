//! Relaying: a node that does not lead passes each HTTP connection it
//! accepts on to the leader, byte for byte, after one preamble line that
//! names the relaying node and the client's address and carries the
//! cluster's secret (from the database), so the leader sees the real client
//! and no one without the database's secret can pose as a relay. Gearman
//! connections travel over links instead ([`super::link`]), which open with
//! a preamble of their own; the leader still takes relayed Gearman
//! connections (from nodes of earlier versions).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::lease_thread::Status;
use super::node_tls::{read_line, Dialed, LinkTls, NodeStream, TLS_MARKER};
use gearshift_store::postgres::lease::NodeAddrs;

/// What a relayed connection starts with.
const MAGIC: &[u8] = b"gearshift-relay ";
/// What a link from another node starts with.
const LINK_MAGIC: &[u8] = b"gearshift-link ";
/// The longest preamble line accepted.
const MAX_LINE: usize = 512;
/// How long the rest of a begun preamble may take.
const PREAMBLE_WAIT: Duration = Duration::from_secs(10);

/// The preamble a relay sends: `gearshift-relay SECRET NODE PEER\n`.
pub fn preamble(secret: &str, node: &str, peer: SocketAddr) -> Vec<u8> {
    format!("gearshift-relay {secret} {node} {peer}\n").into_bytes()
}

/// The leader's side: who may relay, and how relayed sockets are watched.
#[derive(Debug)]
pub struct RelayGate {
    secret: String,
    /// A relaying node silent this long is gone: its connections close.
    pub node_timeout: Duration,
    /// Node TLS: links and relays are taken over TLS only.
    tls: Option<LinkTls>,
}

/// The preamble a link sends: `gearshift-link SECRET NODE\n`.
pub fn link_preamble(secret: &str, node: &str) -> Vec<u8> {
    format!("gearshift-link {secret} {node}\n").into_bytes()
}

/// Who opened a connection that began with a preamble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A node relaying one client's connection.
    Relayed(Relayed),
    /// A node's link, carrying many of its clients' connections.
    Link {
        /// The linking node.
        node: String,
    },
}

/// What a connection's first line said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preamble {
    /// A link or relay preamble, in the clear.
    Clear(Origin),
    /// `gearshift-tls`: a node's TLS session follows.
    Tls,
}

/// What a connection to a node's listener turned out to be.
pub enum Arrival {
    /// Not another node: a client, nothing of it read.
    Client(TcpStream),
    /// Another node's link or relay, its preamble read, and the stream the
    /// rest comes on.
    Node(Origin, NodeStream),
}

/// A relayed connection's origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// The relaying node.
    pub node: String,
    /// The client, as the relaying node saw it.
    pub peer: SocketAddr,
}

impl RelayGate {
    /// A gate for this cluster's secret.
    pub fn new(secret: String, node_timeout: Duration) -> Self {
        RelayGate {
            secret,
            node_timeout,
            tls: None,
        }
    }

    /// Takes links and relays over TLS only (`--link-tls-ca`).
    pub fn with_tls(mut self, tls: Option<LinkTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Node TLS, if nodes talk over it.
    pub fn tls(&self) -> Option<&LinkTls> {
        self.tls.as_ref()
    }

    /// Reads another node's preamble, in the clear or (after its TLS
    /// handshake) in a session, and watches that node's socket closely; a
    /// client's connection comes back untouched. An error closes it.
    pub async fn arrive(&self, stream: TcpStream) -> Result<Arrival, String> {
        let origin = match self.check(&stream).await? {
            None => return Ok(Arrival::Client(stream)),
            Some(Preamble::Clear(_)) if self.tls.as_ref().is_some_and(|t| !t.allows_clear()) => return Err(
                "a node linked in the clear; this node takes nodes over TLS only (--link-tls-ca)"
                    .into(),
            ),
            Some(Preamble::Clear(o)) => o,
            Some(Preamble::Tls) => {
                let Some(tls) = &self.tls else {
                    return Err("a node opened TLS; this node has no --link-tls-ca".into());
                };
                watch_closely(&stream, self.node_timeout);
                let mut s = (tls.accept(stream).await)
                    .map_err(|e| format!("a node's TLS handshake failed: {e}"))?;
                let line = tokio::time::timeout(PREAMBLE_WAIT, read_line(&mut s, MAX_LINE))
                    .await
                    .map_err(|_| "no preamble in a node's TLS session".to_string())??;
                let origin = self.parse(&line)?;
                return Ok(Arrival::Node(origin, NodeStream::Tls(Box::new(s))));
            }
        };
        watch_closely(&stream, self.node_timeout);
        Ok(Arrival::Node(origin, NodeStream::Plain(stream)))
    }

    /// Reads a relay or link preamble if the connection starts with one:
    /// `Ok(None)` when it does not (nothing is consumed), an error when it
    /// starts like one but is not valid (the connection is to be closed).
    pub async fn check(&self, stream: &TcpStream) -> Result<Option<Preamble>, String> {
        let mut head = [0u8; MAX_LINE];
        let mut deadline = None;
        // Peek until the bytes cannot be a preamble or hold a whole line.
        let line_len = loop {
            stream
                .readable()
                .await
                .map_err(|e| format!("reading the first bytes: {e}"))?;
            let n = match stream.peek(&mut head).await {
                Ok(0) => return Ok(None),
                Ok(n) => n,
                Err(e) => return Err(format!("reading the first bytes: {e}")),
            };
            let seen = &head[..n];
            let starts = |magic: &[u8]| {
                let m = n.min(magic.len());
                seen[..m] == magic[..m]
            };
            if !starts(MAGIC) && !starts(LINK_MAGIC) && !starts(TLS_MARKER) {
                return Ok(None);
            }
            if let Some(end) = seen.iter().position(|&b| b == b'\n') {
                break end + 1;
            }
            if n == MAX_LINE {
                return Err("relay preamble too long".into());
            }
            // Part of a line: wait for the rest (peek does not consume).
            let until =
                *deadline.get_or_insert_with(|| tokio::time::Instant::now() + PREAMBLE_WAIT);
            if tokio::time::Instant::now() >= until {
                return Err("relay preamble unfinished".into());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let mut line = vec![0u8; line_len];
        let mut got = 0;
        // The peeked bytes are there: these reads do not wait.
        while got < line_len {
            stream
                .readable()
                .await
                .map_err(|e| format!("reading the relay preamble: {e}"))?;
            match stream.try_read(&mut line[got..]) {
                Ok(0) => return Err("closed in the relay preamble".into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(format!("reading the relay preamble: {e}")),
            }
        }
        let line = &line[..line_len - 1];
        if line == &TLS_MARKER[..TLS_MARKER.len() - 1] {
            return Ok(Some(Preamble::Tls));
        }
        self.parse(line).map(|o| Some(Preamble::Clear(o)))
    }

    /// Parses and checks `gearshift-relay SECRET NODE PEER` or
    /// `gearshift-link SECRET NODE`.
    fn parse(&self, line: &[u8]) -> Result<Origin, String> {
        let text = std::str::from_utf8(line).map_err(|_| "relay preamble is not text")?;
        if line.starts_with(LINK_MAGIC) {
            let mut words = text.split(' ').skip(1);
            let (Some(secret), Some(node), None) = (words.next(), words.next(), words.next())
            else {
                return Err("link preamble is malformed".into());
            };
            if !constant_time_eq(secret.as_bytes(), self.secret.as_bytes()) {
                return Err("link preamble has the wrong cluster secret".into());
            }
            return Ok(Origin::Link {
                node: node.to_owned(),
            });
        }
        let mut words = text.split(' ').skip(1);
        let (Some(secret), Some(node), Some(peer), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err("relay preamble is malformed".into());
        };
        if !constant_time_eq(secret.as_bytes(), self.secret.as_bytes()) {
            return Err("relay preamble has the wrong cluster secret".into());
        }
        let peer = peer
            .parse()
            .map_err(|_| "relay preamble has no client address")?;
        Ok(Origin::Relayed(Relayed {
            node: node.to_owned(),
            peer,
        }))
    }
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Watches a socket between nodes closely: a node gone silent (a cut
/// cable sends no FIN) is noticed within about `timeout`, not TCP's hours.
pub fn watch_closely(stream: &TcpStream, timeout: Duration) {
    let secs = timeout.as_secs().max(1);
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(1))
        .with_interval(Duration::from_secs(1))
        .with_retries(u32::try_from(secs).unwrap_or(u32::MAX));
    let sock = socket2::SockRef::from(stream);
    let _ = sock.set_tcp_keepalive(&ka);
    let _ = sock.set_tcp_user_timeout(Some(timeout));
    let _ = stream.set_nodelay(true);
}

/// Where a relay sends its connections: the leader's address and the
/// preamble's secret and node name. None while no node leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The leader's Gearman (or HTTP) address.
    pub addr: String,
    /// The cluster's secret.
    pub secret: Arc<str>,
    /// This node's name.
    pub node: Arc<str>,
    /// Node TLS, when the nodes talk over it.
    pub tls: Option<LinkTls>,
}

/// Publishes the upstreams (`template` at the leader's address) as the lease moves, logging the changes, until
/// the status ends.
pub(super) async fn publish_upstreams(
    mut status: watch::Receiver<Status>,
    me: NodeAddrs,
    template: Upstream,
    gearman: watch::Sender<Option<Upstream>>,
    http: watch::Sender<Option<Upstream>>,
) {
    let upstream_of = |s: &Status, http_side: bool| -> Option<Upstream> {
        let target = match (&s.leading, &s.leader) {
            (Some(_), _) => &me,
            (None, Some(l)) => &l.node,
            (None, None) => return None,
        };
        let addr = if http_side {
            target.http.clone()?
        } else {
            target.gearman.clone()
        };
        Some(Upstream {
            addr,
            ..template.clone()
        })
    };
    let mut announced = None;
    loop {
        {
            let s = status.borrow_and_update();
            let leader = s.leader.as_ref().map(|l| l.node.name.clone());
            if s.leading.is_none() && leader != announced {
                match &leader {
                    Some(name) => {
                        tracing::info!(leader = %name, "relaying connections to the leader")
                    }
                    None => tracing::info!("no node leads the cluster: connections wait"),
                }
            }
            announced = leader;
            gearman.send_if_modified(|u| replace(u, upstream_of(&s, false)));
            http.send_if_modified(|u| replace(u, upstream_of(&s, true)));
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

/// Puts `new` in `slot`; whether that changed it.
fn replace<T: PartialEq>(slot: &mut T, new: T) -> bool {
    let changed = *slot != new;
    *slot = new;
    changed
}

/// Accepts connections and relays each to the current leader, until
/// `stop` turns true. A connection waits up to `wait` for a leader to be
/// known (a takeover in progress) and is closed if none is: the client
/// reconnects, as Gearman clients do.
pub async fn relay_loop(
    listener: Arc<TcpListener>,
    upstream: watch::Receiver<Option<Upstream>>,
    mut stop: watch::Receiver<bool>,
    limit: Arc<Semaphore>,
    (wait, timeout): (Duration, Duration),
    https: Option<crate::tls::TlsServer>,
) {
    while let Some((client, peer, permit)) = accept_capped(&listener, &limit, &mut stop).await {
        let upstream = upstream.clone();
        let stop = stop.clone();
        let https = https.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // With --http-tls this node ends the client's TLS session and
            // relays what it carries, as its Gearman TLS listeners do.
            let client = match https {
                None => NodeStream::Plain(client),
                Some(t) => match t.handshake(client, peer).await {
                    Some(s) => NodeStream::Tls(Box::new(s)),
                    None => return,
                },
            };
            if let Err(e) = relay_one(client, peer, upstream, stop, wait, timeout).await {
                tracing::info!(%peer, "relay closed: {e}");
            }
        });
    }
}

/// The next connection, taken under the connection cap `limit`; `None`
/// once `stop` turns true.
pub async fn accept_capped(
    listener: &TcpListener,
    limit: &Arc<Semaphore>,
    stop: &mut watch::Receiver<bool>,
) -> Option<(TcpStream, SocketAddr, tokio::sync::OwnedSemaphorePermit)> {
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => p.ok()?,
            _ = stop.wait_for(|s| *s) => return None,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => return None,
        };
        match accepted {
            Ok((client, peer)) => return Some((client, peer, permit)),
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Relays one client connection to the leader until either side closes.
async fn relay_one(
    client: NodeStream,
    peer: SocketAddr,
    mut upstream: watch::Receiver<Option<Upstream>>,
    stop: watch::Receiver<bool>,
    wait: Duration,
    timeout: Duration,
) -> Result<(), String> {
    if let NodeStream::Plain(c) = &client {
        let _ = c.set_nodelay(true);
    }
    let deadline = tokio::time::Instant::now() + wait;
    // The leader as this node knows it; a dead one (not yet replaced in
    // this node's view) is retried until the view changes or time is up.
    let (up, leader) = loop {
        let up = tokio::time::timeout_at(deadline, upstream.wait_for(|u| u.is_some()))
            .await
            .map_err(|_| format!("no node has led the cluster for {wait:?}"))?
            .map_err(|_| "the node is stopping".to_string())?
            .clone()
            .ok_or("no leader")?;
        let tried = tokio::time::timeout_at(deadline, TcpStream::connect(&up.addr)).await;
        match tried {
            Ok(Ok(s)) => break (up, s),
            Ok(Err(e)) => {
                tracing::debug!("cannot reach the leader at {}: {e}", up.addr);
                let changed = upstream.wait_for(|u| u.as_ref() != Some(&up));
                let pause = tokio::time::sleep(Duration::from_millis(50));
                tokio::select! {
                    _ = tokio::time::timeout_at(deadline, changed) => {}
                    _ = pause => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("cannot reach the leader at {}: {e}", up.addr));
                }
            }
            Err(_) => return Err(format!("connecting to the leader at {} timed out", up.addr)),
        }
    };
    watch_closely(&leader, timeout);
    let dialed = match &up.tls {
        None => Dialed::Clear(leader),
        Some(tls) => (tls.dial_or_clear(leader, &up.addr).await)
            .map_err(|e| format!("TLS to the leader at {}: {e}", up.addr))?,
    };
    match dialed {
        Dialed::Clear(leader) => {
            watch_closely(&leader, timeout);
            relay_through(client, leader, peer, &up, upstream, stop).await
        }
        Dialed::Tls(leader) => relay_through(client, *leader, peer, &up, upstream, stop).await,
    }
}

/// Sends the preamble on the way to the leader, then copies both ways.
async fn relay_through<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: NodeStream,
    mut leader: S,
    peer: SocketAddr,
    up: &Upstream,
    mut upstream: watch::Receiver<Option<Upstream>>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    leader
        .write_all(&preamble(&up.secret, &up.node, peer))
        .await
        .map_err(|e| format!("writing to the leader at {}: {e}", up.addr))?;
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut client, &mut leader) => {
            r.map(|_| ()).map_err(|e| format!("relaying to {}: {e}", up.addr))
        }
        // A new leader: this connection's jobs and registrations were the
        // old one's, so the client starts over with the new one.
        _ = upstream.wait_for(|u| u.as_ref().map(|u| &u.addr) != Some(&up.addr)) => {
            Err("the cluster has a new leader".into())
        }
        _ = stop.wait_for(|s| *s) => Err("the node stops relaying".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn gate() -> RelayGate {
        RelayGate::new("s3cret".into(), Duration::from_secs(3))
    }

    #[test]
    fn a_preamble_round_trips() {
        let peer: SocketAddr = "10.1.2.3:4567".parse().unwrap_or_else(|_| unreachable!());
        let line = preamble("s3cret", "node-b", peer);
        let got = gate().parse(&line[..line.len() - 1]);
        assert_eq!(
            got,
            Ok(Origin::Relayed(Relayed {
                node: "node-b".into(),
                peer
            }))
        );
        let line = link_preamble("s3cret", "node-c");
        assert_eq!(
            gate().parse(&line[..line.len() - 1]),
            Ok(Origin::Link {
                node: "node-c".into()
            })
        );
    }

    #[test]
    fn a_wrong_secret_or_shape_is_refused() {
        let g = gate();
        assert!(g.parse(b"gearshift-relay nope n 1.2.3.4:5").is_err());
        assert!(g.parse(b"gearshift-relay s3cret n").is_err());
        assert!(g
            .parse(b"gearshift-relay s3cret n 1.2.3.4:5 extra")
            .is_err());
        assert!(g.parse(b"gearshift-relay s3cret n not-an-address").is_err());
        assert!(g.parse(b"gearshift-relay \xff\xfe n 1.2.3.4:5").is_err());
        assert!(g.parse(b"gearshift-link nope n").is_err());
        assert!(g.parse(b"gearshift-link s3cret n extra").is_err());
    }

    #[tokio::test]
    async fn plain_connections_pass_untouched_and_relays_are_read() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let g = gate();
        // A Gearman admin command: not a preamble, nothing consumed.
        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.write_all(b"getpid\n").await.expect("write");
        let (s, _) = l.accept().await.expect("accept");
        assert_eq!(g.check(&s).await, Ok(None));
        let mut buf = [0u8; 7];
        let mut s2 = s;
        s2.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"getpid\n");
        // A preamble sent in two pieces, then a packet.
        let mut c = TcpStream::connect(addr).await.expect("connect");
        let (s, _) = l.accept().await.expect("accept");
        c.write_all(b"gearshift-re").await.expect("write");
        let peer: SocketAddr = "192.0.2.7:999".parse().expect("addr");
        let rest = &preamble("s3cret", "b", peer)[12..];
        let writer = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            c.write_all(rest).await.expect("write");
            c.write_all(b"\0REQ").await.expect("write");
        };
        let (got, ()) = tokio::join!(g.check(&s), writer);
        assert_eq!(
            got,
            Ok(Some(Preamble::Clear(Origin::Relayed(Relayed {
                node: "b".into(),
                peer
            }))))
        );
        let mut buf = [0u8; 4];
        let mut s2 = s;
        s2.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"\0REQ");
    }

    #[tokio::test]
    async fn a_tls_marker_is_a_preamble_of_its_own() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.write_all(TLS_MARKER).await.expect("write");
        let (s, _) = l.accept().await.expect("accept");
        assert_eq!(gate().check(&s).await, Ok(Some(Preamble::Tls)));
        // A node without node TLS refuses it.
        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.write_all(TLS_MARKER).await.expect("write");
        let (s, _) = l.accept().await.expect("accept");
        match gate().arrive(s).await {
            Err(why) => assert!(why.contains("--link-tls-ca"), "{why}"),
            Ok(_) => panic!("a TLS node taken without node TLS"),
        }
    }
}
