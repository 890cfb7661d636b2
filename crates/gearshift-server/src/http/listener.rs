//! The HTTP side's listener: a task accepts connections and, on a cluster
//! leader, reads the relay preamble of connections other nodes pass on, so
//! that access checks see the real client's address; with `--http-tls` it
//! ends each connection's TLS session first.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::LazyConfigAcceptor;

use crate::cluster::node_tls::{starts_tls, LinkTls, NodeStream, NODE_ALPN};
use crate::cluster::relay::{Arrival, Origin, RelayGate};
use crate::counters::ConnCounters;
use crate::tls::{TlsServer, HANDSHAKE_TIMEOUT};

/// Accepted connections, as axum takes them.
pub struct Incoming {
    rx: mpsc::Receiver<(NodeStream, SocketAddr)>,
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The client's address a handler sees.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, Incoming>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Incoming>) -> Self {
        Peer(*stream.remote_addr())
    }
}

impl Incoming {
    /// Starts accepting on `listener`.
    pub fn new(
        listener: TcpListener,
        gate: Option<Arc<RelayGate>>,
        https: Option<(TlsServer, Arc<ConnCounters>)>,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(accept_loop(listener, gate, https, tx));
        Ok(Incoming { rx, local, task })
    }
}

async fn accept_loop(
    listener: TcpListener,
    gate: Option<Arc<RelayGate>>,
    https: Option<(TlsServer, Arc<ConnCounters>)>,
    tx: mpsc::Sender<(NodeStream, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "HTTP accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let tx = tx.clone();
        match (&gate, &https) {
            // HTTPS only; a failed handshake is logged and closed. A
            // cluster node also takes relayed connections, whose TLS the
            // relaying node ended, and other nodes' calls (below).
            (None, Some((https, counters))) => {
                let (https, counters) = (https.clone(), counters.clone());
                tokio::spawn(async move {
                    match https.handshake(stream, peer).await {
                        Some(s) => {
                            let _ = tx.send((NodeStream::Tls(Box::new(s)), peer)).await;
                        }
                        None => ConnCounters::bump(&counters.tls_failed),
                    }
                });
            }
            (None, None) => {
                if tx.send((NodeStream::Plain(stream), peer)).await.is_err() {
                    return;
                }
            }
            (Some(gate), https) => {
                let gate = gate.clone();
                let https = https.clone();
                tokio::spawn(async move {
                    // A TLS session: another node's HTTP call in node TLS
                    // (the JSON API's cluster view on partitioned nodes) or,
                    // with --http-tls, anyone's HTTPS.
                    if let Some(tls) = gate.tls() {
                        if starts_tls(&stream).await {
                            let public = https.as_ref().map(|(h, _)| h);
                            match accept_either(stream, tls, public).await {
                                Ok((s, from_node)) => {
                                    if from_node {
                                        tracing::info!(%peer, "HTTP from another node over node TLS");
                                    }
                                    let _ = tx.send((NodeStream::Tls(Box::new(s)), peer)).await;
                                }
                                Err(e) => {
                                    tracing::info!(%peer, "closing HTTP connection: its TLS handshake failed: {e}");
                                    if let Some((_, counters)) = &https {
                                        ConnCounters::bump(&counters.tls_failed);
                                    }
                                }
                            }
                            return;
                        }
                    }
                    let (stream, peer) = match gate.arrive(stream).await {
                        Ok(Arrival::Client(s)) => match &https {
                            None => (NodeStream::Plain(s), peer),
                            Some((https, counters)) => match https.handshake(s, peer).await {
                                Some(s) => (NodeStream::Tls(Box::new(s)), peer),
                                None => return ConnCounters::bump(&counters.tls_failed),
                            },
                        },
                        Ok(Arrival::Node(Origin::Relayed(r), s)) => (s, r.peer),
                        Ok(Arrival::Node(Origin::Link { node }, _)) => {
                            tracing::warn!(%peer, %node, "closing HTTP connection: a node linked to the HTTP port");
                            return;
                        }
                        Err(why) => {
                            tracing::warn!(%peer, "closing HTTP connection: {why}");
                            return;
                        }
                    };
                    let _ = tx.send((stream, peer)).await;
                });
            }
        }
    }
}

/// Ends a TLS session on the HTTP port: in node TLS when no HTTPS is
/// served to everyone here or the client offers the nodes' ALPN, else with
/// `--http-tls`'s certificate. Whether it came from another node.
async fn accept_either(
    stream: TcpStream,
    node: &LinkTls,
    public: Option<&TlsServer>,
) -> std::io::Result<(tokio_rustls::server::TlsStream<TcpStream>, bool)> {
    let Some(public) = public else {
        return node.accept(stream).await.map(|s| (s, true));
    };
    let timed_out =
        |_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake in time");
    let hello = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = tokio::time::timeout(HANDSHAKE_TIMEOUT, hello)
        .await
        .map_err(timed_out)??;
    let from_node = (start.client_hello().alpn()).is_some_and(|mut a| a.any(|p| p == NODE_ALPN));
    let config = match from_node {
        true => node.server_config(),
        false => public.server_config(),
    };
    let s = (tokio::time::timeout(HANDSHAKE_TIMEOUT, start.into_stream(config)).await)
        .map_err(timed_out)??;
    Ok((s, from_node))
}

impl axum::serve::Listener for Incoming {
    type Io = NodeStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (NodeStream, SocketAddr) {
        match self.rx.recv().await {
            Some(x) => x,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
