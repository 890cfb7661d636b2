//! What wakes the supervisor: Gearshift's live event stream (`GET
//! /api/v1/events` on its own HTTP listener, as Server-Sent Events) says
//! when a worker comes or goes and when a job is created or ends; each
//! event of a bridged function wakes the supervisor for a fresh look. While
//! the stream is down (no HTTP listener, a refused request) the supervisor
//! polls as before.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::glob::Routing;
use crate::stats::Stats;

/// The event kinds asked for: worker arrivals and departures, and the job
/// transitions that change how many Gearman workers are free.
const KINDS: &str = "worker_joined,worker_left,created,completed,failed";

/// What the stream tells the supervisor.
#[derive(Debug, Default)]
pub struct Push {
    /// Signalled on each relevant event, and when the stream (re)starts.
    pub wake: Notify,
    /// The stream is up: the supervisor may poll slowly.
    pub live: AtomicBool,
}

/// Follows the event stream at `http` until the process ends, reconnecting
/// after a failure (after 1 s, up to 30 s when refused).
pub async fn run(
    http: SocketAddr,
    routing: watch::Receiver<Routing>,
    push: Arc<Push>,
    stats: Arc<Stats>,
) {
    let mut pause = Duration::from_secs(1);
    loop {
        match follow(http, &routing, &push, &stats).await {
            Ok(()) => pause = Duration::from_secs(1),
            Err(e) => {
                tracing::info!(
                    "gearmonkey: Gearshift's event stream at {http}: {e}; polling instead"
                );
                pause = (pause * 2).min(Duration::from_secs(30));
            }
        }
        push.live.store(false, Ordering::Release);
        push.wake.notify_one();
        tokio::time::sleep(pause).await;
    }
}

/// One connection to the stream, until it ends.
async fn follow(
    http: SocketAddr,
    routing: &watch::Receiver<Routing>,
    push: &Push,
    stats: &Stats,
) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(http).await?;
    let request = format!(
        "GET /api/v1/events?kinds={KINDS} HTTP/1.1\r\nHost: {http}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    if line.split_whitespace().nth(1) != Some("200") {
        return Err(std::io::Error::other(format!(
            "answered {:?}",
            line.trim_end()
        )));
    }
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let header = line.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        chunked |= header.starts_with("transfer-encoding:") && header.contains("chunked");
    }
    push.live.store(true, Ordering::Release);
    // Events before the subscription were missed: look now.
    push.wake.notify_one();
    let mut events = Events::default();
    let mut body = Vec::new();
    loop {
        body.clear();
        if chunked {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| std::io::Error::other("bad chunk size"))?;
            if size == 0 {
                return Ok(());
            }
            body.resize(size + 2, 0);
            reader.read_exact(&mut body).await?;
            body.truncate(size);
        } else {
            let got = reader.read_until(b'\n', &mut body).await?;
            if got == 0 {
                return Ok(());
            }
        }
        for function_event in events.feed(&body) {
            let bridged = {
                let routing = routing.borrow();
                function_event.iter().any(|f| routing.bridged(f))
            };
            if bridged {
                Stats::bump(&stats.events);
                push.wake.notify_one();
            }
        }
    }
}

/// Server-Sent Events split into events; each yields the functions it names.
#[derive(Debug, Default)]
struct Events {
    /// The part of a line not ended yet.
    partial: Vec<u8>,
    /// The `data:` of the event being read.
    data: String,
}

impl Events {
    /// Feeds bytes of the stream; returns each finished event's functions.
    fn feed(&mut self, bytes: &[u8]) -> Vec<Vec<String>> {
        let mut done = Vec::new();
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    done.push(functions_of(&self.data));
                    self.data.clear();
                }
            } else if let Some(data) = line.strip_prefix("data:") {
                self.data.push_str(data.trim_start());
            }
        }
        done
    }
}

/// The functions an event's JSON names (`function`, or a worker's
/// `functions`).
fn functions_of(data: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
        return Vec::new();
    };
    if let Some(f) = v.get("function").and_then(|f| f.as_str()) {
        return vec![f.to_owned()];
    }
    v.get("functions")
        .and_then(|f| f.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_name_their_functions() {
        let mut e = Events::default();
        assert!(e
            .feed(b"event: created\ndata: {\"kind\":\"created\",\"fun")
            .is_empty());
        let got = e.feed(b"ction\":\"resize\"}\n\n: keep-alive\n\nevent: worker_joined\r\n");
        assert_eq!(got, vec![vec!["resize".to_owned()]]);
        let got = e.feed(b"data: {\"functions\":[\"a\",\"b\"]}\r\n\r\n");
        assert_eq!(got, vec![vec!["a".to_owned(), "b".to_owned()]]);
        assert_eq!(e.feed(b"data: not json\n\n"), vec![Vec::<String>::new()]);
    }
}
