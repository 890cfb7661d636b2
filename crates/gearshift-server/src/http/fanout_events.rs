//! On a partitioned node, an event stream carries every node's events: it
//! follows the other nodes that own partitions (their own streams, asked
//! with [`super::fanout::LOCAL`]) and passes their events on. `stats`
//! stays this node's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cluster::view::ClusterView;

/// How often the set of nodes followed is brought up to date, and how long
/// a node whose stream ended is left before it is asked again.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// Events from other nodes waiting for the subscriber, past which the
/// stream ends as a lagging one does.
pub const MAX_WAITING: usize = 4096;

/// Another node's event: its kind word and its JSON text.
pub type Remote = (String, String);

/// The other nodes' streams of one subscriber; they stop when it is dropped.
pub struct Follow {
    manager: JoinHandle<()>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.manager.abort();
    }
}

/// Follows every other partition owner's events for a subscriber whose
/// query (without `stats`) is `query`; `asker` gives the HTTP client (and
/// scheme) for each connection, so one made after a certificate reload
/// uses the new certificate.
pub fn follow(
    view: Arc<ClusterView>,
    query: String,
    auth: Option<axum::http::HeaderValue>,
    asker: impl Fn() -> (reqwest::Client, &'static str) + Send + 'static,
) -> (Follow, mpsc::Receiver<Remote>) {
    let (tx, rx) = mpsc::channel(MAX_WAITING);
    let manager = tokio::spawn(async move {
        let mut streams: HashMap<String, JoinHandle<()>> = HashMap::new();
        loop {
            let peers = view.partition_peers();
            streams.retain(|peer, task| {
                let keep = peers.contains(peer) && !task.is_finished();
                if !keep {
                    task.abort();
                }
                keep
            });
            for peer in peers {
                if let std::collections::hash_map::Entry::Vacant(e) = streams.entry(peer) {
                    let peer = e.key().clone();
                    e.insert(tokio::spawn(read_peer(
                        peer,
                        query.clone(),
                        auth.clone(),
                        asker(),
                        tx.clone(),
                    )));
                }
            }
            if tx.is_closed() {
                break;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        for (_, t) in streams {
            t.abort();
        }
    });
    (Follow { manager }, rx)
}

/// Reads one node's stream until it ends, passing each event on.
async fn read_peer(
    peer: String,
    query: String,
    auth: Option<axum::http::HeaderValue>,
    (client, scheme): (reqwest::Client, &'static str),
    tx: mpsc::Sender<Remote>,
) {
    let mut req = client
        .get(format!("{scheme}://{peer}/api/v1/events{query}"))
        .header(super::fanout::LOCAL, "1");
    if let Some(a) = auth {
        req = req.header(axum::http::header::AUTHORIZATION, a);
    }
    let mut resp = match req.send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            tracing::info!(%peer, status = %r.status(), "another node refused its events");
            return;
        }
        Err(e) => {
            tracing::info!(%peer, "another node's events: {e}");
            return;
        }
    };
    // A subscriber this far behind gets `dropped` from its own stream
    // soon; what does not fit is not kept.
    let read = each_event(&mut resp, |ev| {
        !(tx.try_send(ev).is_err() && tx.is_closed())
    })
    .await;
    if let Err(why) = read {
        tracing::warn!(%peer, "another node's event stream: {why}");
    }
}

/// Reads an event stream's events (but `stats`) as (kind, JSON text) into
/// `take` until it returns false (Ok) or the stream ends (Ok), or a block
/// runs past 1 MiB (Err).
pub async fn each_event(
    resp: &mut reqwest::Response,
    mut take: impl FnMut(Remote) -> bool,
) -> Result<(), &'static str> {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = find(&buf, b"\n\n") {
            let block: Vec<u8> = buf.drain(..end + 2).collect();
            if let Some(ev) = parse_block(&block) {
                if !take(ev) {
                    return Ok(());
                }
            }
        }
        if buf.len() > 1 << 20 {
            return Err("a block too long");
        }
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One Server-Sent Events block: its `event:` and `data:` lines (comments,
/// keep-alives and `stats` are left out).
fn parse_block(block: &[u8]) -> Option<Remote> {
    let text = std::str::from_utf8(block).ok()?;
    let (mut kind, mut data) = (None, None);
    for line in text.lines() {
        if let Some(k) = line.strip_prefix("event:") {
            kind = Some(k.trim().to_owned());
        } else if let Some(d) = line.strip_prefix("data:") {
            data = Some(d.strip_prefix(' ').unwrap_or(d).to_owned());
        }
    }
    let kind = kind?;
    (kind != "stats").then_some((kind, data?))
}

/// `query` (raw, percent-encoded) without `kinds=stats`, for other nodes.
pub fn peer_query(raw: Option<&str>) -> String {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return String::new();
    };
    let kept: Vec<String> = raw
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("kinds", v)) => {
                let words: Vec<&str> = v
                    .split(',')
                    .filter(|w| !w.eq_ignore_ascii_case("stats"))
                    .collect();
                format!("kinds={}", words.join(","))
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("?{}", kept.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_events_and_stats_stay_home() {
        assert_eq!(
            parse_block(b"event: created\ndata: {\"kind\":\"created\"}\n\n"),
            Some(("created".into(), "{\"kind\":\"created\"}".into()))
        );
        assert_eq!(parse_block(b": keep-alive\n\n"), None);
        assert_eq!(parse_block(b"event: stats\ndata: {}\n\n"), None);
        assert_eq!(
            peer_query(Some("kinds=stats,created&function=f")),
            "?kinds=created&function=f"
        );
        assert_eq!(peer_query(None), "");
    }
}
