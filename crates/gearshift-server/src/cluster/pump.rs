//! A link's task: moves frames both ways between the clients it carries
//! and the node at the other end, and tells each client how its connection
//! ended: closed in order (the node said goodbye, or never took the link,
//! so nothing unanswered was taken) or lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use gearshift_proto::link::{decode_link, encode_data, LinkFrame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::link::{Clients, Limits, ToClient, ToLink, LINK_BATCH, MAX_FRAME};

/// The link is not up: every connection still asking for it is closed;
/// nothing it sent went anywhere.
pub(super) fn refuse_all(mut rx: mpsc::UnboundedReceiver<ToLink>) {
    rx.close();
    while let Ok(m) = rx.try_recv() {
        if let ToLink::Open { to_client, .. } = m {
            let _ = to_client.send(ToClient::Close);
        }
    }
}

/// Moves frames both ways until `ends` resolves, the link breaks or every
/// sender is gone.
#[allow(clippy::too_many_arguments)]
pub(super) async fn pump<R, W>(
    addr: &str,
    mut r: R,
    mut w: W,
    mut out: BytesMut,
    mut rx: mpsc::UnboundedReceiver<ToLink>,
    queued: &AtomicUsize,
    ends: impl std::future::Future<Output = ()>,
    limits: Limits,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    tokio::pin!(ends);
    let mut input = BytesMut::with_capacity(LINK_BATCH);
    let mut clients = Clients::default();
    let (mut bye, mut ready, mut write_failed) = (false, false, false);
    tracing::info!(node = %addr, "linked to a node");
    // Reading and writing go on together: the leader is never kept waiting
    // for this node to read while a large write is under way.
    let why: String = loop {
        if input.capacity() - input.len() < LINK_BATCH / 4 {
            input.reserve(LINK_BATCH);
        }
        tokio::select! {
            n = w.write(&out), if !out.is_empty() => match n {
                Ok(n) => out.advance(n),
                Err(e) => {
                    write_failed = true;
                    break format!("writing to the leader: {e}");
                }
            },
            m = rx.recv(), if out.len() < LINK_BATCH => {
                let Some(m) = m else { break "no connection needs it".into() };
                add(m, &mut out, &mut clients, queued);
                while out.len() < LINK_BATCH {
                    match rx.try_recv() {
                        Ok(m) => add(m, &mut out, &mut clients, queued),
                        Err(_) => break,
                    }
                }
            }
            n = r.read_buf(&mut input) => match n {
                Ok(0) => break "the leader closed it".into(),
                Err(e) => break format!("reading from the leader: {e}"),
                Ok(_) => match deliver(&mut input, &mut clients, &mut out, limits, &mut ready) {
                    Ok(false) => {}
                    Ok(true) => {
                        bye = true;
                        break "the node closed it in order".into();
                    }
                    Err(e) => break e,
                },
            },
            _ = &mut ends => break "the cluster has a new leader".into(),
        }
    };
    // A node that closes in order may break a write before its goodbye is
    // read: read what it sent before it went.
    if write_failed {
        let rest = async {
            while let Ok(n) = r.read_buf(&mut input).await {
                let said = deliver(&mut input, &mut clients, &mut out, limits, &mut ready);
                if n == 0 || !matches!(said, Ok(false)) {
                    bye = matches!(said, Ok(true));
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), rest).await;
    }
    tracing::info!(node = %addr, connections = clients.len(), "link closed: {why}");
    // Every connection it carried is gone: closed in order after a goodbye
    // (the node took nothing it did not answer) or when the job server
    // never took the link, else lost. One still asking for the link sent
    // nothing on it.
    let gone = if bye || !ready {
        ToClient::Close
    } else {
        ToClient::Lost
    };
    for (tx, _) in clients.into_values() {
        let _ = tx.send(gone.clone());
    }
    refuse_all(rx);
}

/// Puts a client's message on the link.
fn add(m: ToLink, out: &mut BytesMut, clients: &mut Clients, queued: &AtomicUsize) {
    match m {
        ToLink::Open {
            vid,
            peer,
            identity,
            to_client,
            owed,
        } => {
            clients.insert(vid, (to_client, owed));
            LinkFrame::Open {
                vid,
                peer: peer.to_string(),
                identity,
            }
            .encode(out);
        }
        ToLink::Data { vid, bytes } => {
            queued.fetch_sub(bytes.len(), Ordering::AcqRel);
            encode_data(out, vid, &bytes);
        }
        ToLink::Close { vid } => LinkFrame::Close { vid }.encode(out),
    }
}

/// Hands each client what the leader sent it; a client owed more than the
/// hard limit is dropped (its task closes it) and the leader told. True
/// once the node said goodbye; `ready` once it said it took the link.
fn deliver(
    input: &mut BytesMut,
    clients: &mut Clients,
    out: &mut BytesMut,
    limits: Limits,
    ready: &mut bool,
) -> Result<bool, String> {
    loop {
        let frame = match decode_link(input, MAX_FRAME) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(false),
            Err(e) => return Err(format!("the leader sent a bad frame: {e}")),
        };
        match frame {
            LinkFrame::Data { vid, bytes } => {
                let Some((tx, owed)) = clients.get(&vid) else {
                    continue;
                };
                let now = owed.fetch_add(bytes.len(), Ordering::AcqRel) + bytes.len();
                let cut = now > limits.hard_output;
                let sent = if cut {
                    tracing::warn!(
                        vid,
                        owed = now,
                        "closing connection: its peer does not read what it is sent"
                    );
                    tx.send(ToClient::Cut)
                } else {
                    tx.send(ToClient::Data(bytes))
                };
                if cut || sent.is_err() {
                    clients.remove(&vid);
                    LinkFrame::Close { vid }.encode(out);
                }
            }
            LinkFrame::Close { vid } => {
                if let Some((tx, _)) = clients.remove(&vid) {
                    let _ = tx.send(ToClient::Close);
                }
            }
            LinkFrame::Bye => return Ok(true),
            LinkFrame::Ready => *ready = true,
            LinkFrame::Open { .. } => return Err("the leader opened a connection".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::cluster::link::ClientTx;

    /// How a client's connection ends when the far node writes `said` and
    /// then closes the link.
    async fn ending_after(said: &[LinkFrame]) -> &'static str {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let (r, w) = tokio::io::split(near);
        let (tx, rx) = mpsc::unbounded_channel();
        let (to_client, mut from_link) = mpsc::unbounded_channel();
        tx.send(ToLink::Open {
            vid: 1,
            peer: "127.0.0.1:9".parse().expect("an address"),
            identity: None,
            to_client: ClientTx {
                tx: to_client,
                tag: 1,
            },
            owed: Arc::new(AtomicUsize::new(0)),
        })
        .expect("the link takes it");
        let limits = Limits {
            max_output: 1 << 20,
            hard_output: 1 << 22,
        };
        let queued = AtomicUsize::new(0);
        let link = pump(
            "far",
            r,
            w,
            BytesMut::new(),
            rx,
            &queued,
            std::future::pending(),
            limits,
        );
        let far_side = async move {
            // The Open frame arrives before the far node answers.
            let mut buf = [0u8; 64];
            let _ = far.read(&mut buf).await;
            let mut out = BytesMut::new();
            for f in said {
                f.encode(&mut out);
            }
            let _ = far.write_all(&out).await;
            drop(far);
        };
        tokio::join!(link, far_side);
        drop(tx);
        match from_link.recv().await {
            Some((1, ToClient::Close)) => "closed",
            Some((1, ToClient::Lost)) => "lost",
            _ => "other",
        }
    }

    #[tokio::test]
    async fn a_link_ends_closed_only_when_nothing_unanswered_was_taken() {
        // The job server took the link and said goodbye.
        assert_eq!(
            ending_after(&[LinkFrame::Ready, LinkFrame::Bye]).await,
            "closed"
        );
        // It never took the link: nothing reached it.
        assert_eq!(ending_after(&[]).await, "closed");
        // It took the link and went without a word: it may hold anything.
        assert_eq!(ending_after(&[LinkFrame::Ready]).await, "lost");
    }
}
