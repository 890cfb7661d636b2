//! The job server for the partitions this node owns: one core and one
//! store over the set, which take partitions on and hand them over in
//! place ([`super::moves`]); started again only when that cannot be done
//! (its connections are all carried over links, so only they see a
//! restart).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use gearshift_store::postgres::partitions::PartitionSet;
use gearshift_store::{PgOptions, PgStore, Store};
use tokio::sync::{oneshot, watch};

use super::beat::{Cmd, Mine};
use super::moves::{self, Served};
use crate::accept::LinkDoor;
use crate::cluster::reloads::{follow, Following, Reloads};
use crate::cluster::trust::LeaseTrust;
use crate::cluster::view::ClusterView;
use crate::{Control, Server, ServerConfig};
use bytes::Bytes;
use gearshift_core::Placement;
use gearshift_store::postgres::pins::{PinMove, Pins};

/// How long a stopping owner server may take to finish.
pub(super) const STOP_WAIT: Duration = Duration::from_secs(10);

/// What the owner server needs.
pub(super) struct OwnerCtx {
    pub cfg: ServerConfig,
    pub url: String,
    pub http: Option<std::net::TcpListener>,
    pub trust: Arc<LeaseTrust>,
    pub view: Arc<ClusterView>,
    /// This node's Gearman listener, for the HTTP API's submissions.
    pub entry: Option<std::net::SocketAddr>,
    pub door: Arc<watch::Sender<Option<LinkDoor>>>,
    pub cmds: mpsc::Sender<Cmd>,
    /// Config reloads, put in force in the running server.
    pub reloads: Reloads,
    /// Where the job server's only I/O thread runs, if not on its own.
    pub local_io: Option<crate::LocalIo>,
    /// With node TLS, the HTTP listener takes other nodes' calls over it.
    pub gate: Option<Arc<crate::cluster::relay::RelayGate>>,
    /// The node's connection events, for every job server it runs.
    pub counters: Arc<crate::counters::ConnCounters>,
}

/// Job ids a core takes at a time: a new block per start of the owner
/// server, so two nodes never hand out the same one.
const ID_BLOCK: u64 = 1 << 32;

/// A running owner server.
struct Running {
    serving: Vec<(u32, i64)>,
    served: Arc<Served>,
    /// The pins this server moved, until a beat no longer lists them as
    /// asked for (one that does read the pins before the move).
    given: Vec<PinMove>,
    control: Control,
    _reloads: Following,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Moves the partitions in place to serve `want`; false when the
    /// server must be started again instead.
    async fn repartition(&mut self, want: &[(u32, i64)], placement: &Placement) -> bool {
        let was = self.served.placement();
        if was != *placement && !self.follow_pins(&was, placement).await {
            return false;
        }
        // A partition kept at another epoch was another node's meanwhile.
        let moved = want
            .iter()
            .any(|&(p, e)| self.serving.iter().any(|&(q, f)| q == p && f != e));
        if moved {
            return false;
        }
        let leaving: Vec<u32> = self
            .serving
            .iter()
            .map(|&(p, _)| p)
            .filter(|p| !want.iter().any(|&(q, _)| q == *p))
            .collect();
        let arriving: Vec<(u32, i64)> = want
            .iter()
            .copied()
            .filter(|&(p, _)| !self.serving.iter().any(|&(q, _)| q == p))
            .collect();
        let done = async {
            moves::hand_over(&self.control, &self.served, &leaving).await?;
            moves::take_over(&self.control, &self.served, &arriving).await
        };
        match done.await {
            Ok(()) => {
                self.serving = want.to_vec();
                true
            }
            Err(e) => {
                tracing::warn!(
                    "partitions cannot move in place ({e}): the owner server starts again"
                );
                false
            }
        }
    }

    /// Puts a new placement (pins) in force in place, before partitions
    /// arrive: a function it moves into a partition served here is taken
    /// on. False when it moves one out of a partition served here that this
    /// server did not hand over (the server starts again).
    async fn follow_pins(&mut self, was: &Placement, now: &Placement) -> bool {
        let moved = moves::pinned_moves(was, now);
        let serves = |p: &u32| self.serving.iter().any(|&(q, _)| q == *p);
        if moved.iter().any(|(_, from, _)| serves(from)) {
            tracing::info!("a pin moved a function served here: the owner server starts again");
            return false;
        }
        let incoming: Vec<Bytes> = moved
            .into_iter()
            .filter(|(_, _, to)| serves(to))
            .map(|(f, _, _)| f)
            .collect();
        let done = async {
            if incoming.is_empty() {
                return moves::re_place(&self.control, &self.served, now.clone()).await;
            }
            for f in incoming {
                moves::take_function(&self.control, f, now.clone()).await?;
            }
            self.served.place(now.clone());
            Ok(())
        };
        match done.await {
            Ok(()) => {
                tracing::info!("functions were pinned: placement taken in place");
                true
            }
            Err(e) => {
                tracing::warn!(
                    "cannot take the new pins in place ({e}): the owner server starts again"
                );
                false
            }
        }
    }

    /// Moves the functions whose pins were asked for and that live in a
    /// partition served here ([`moves::give_function`]); on error, the
    /// pin whose move failed.
    async fn move_pins(
        &mut self,
        asked: &[PinMove],
        held_off: Option<&PinMove>,
    ) -> Result<(), (PinMove, moves::MoveError)> {
        for m in asked {
            let from = self.served.placement().partition_of(&m.function);
            let skip = self.given.contains(m) || held_off == Some(m);
            if skip || !self.serving.iter().any(|&(p, _)| p == from) {
                continue;
            }
            if let Err(e) = moves::give_function(&self.control, &self.served, m).await {
                return Err((m.clone(), e));
            }
            self.given.push(m.clone());
        }
        Ok(())
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
            tracing::warn!("the owner server did not stop in time: stopped at once");
            task.abort();
            let _ = task.await;
        }
    }
}

/// Serves what the beats say this node owns until `stopping`.
pub(super) async fn manage(
    ctx: OwnerCtx,
    mut mine: watch::Receiver<Option<Mine>>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut current: Option<Running> = None;
    let mut retry = PinRetry::default();
    loop {
        let want = mine.borrow_and_update().clone();
        let ended = current.as_ref().is_some_and(|r| r.task.is_finished());
        if let Some(mut m) = want {
            let mut given = Vec::new();
            if let Some(f) = &retry.failed {
                match read_placement(&ctx.url, f.function.clone()).await {
                    Ok(p) => {
                        if p.partition_of(&f.function) != m.placement.partition_of(&f.function) {
                            given.push(f.clone());
                        }
                        m.placement = p;
                    }
                    Err(e) => {
                        tracing::warn!("cannot read the pins: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            // A beat that read the pins before this server's own move
            // committed would undo it.
            if let Some(r) = current.as_mut() {
                r.given.retain(|g| m.moves.contains(g));
                if !r.given.is_empty() {
                    m.placement = r.served.placement();
                }
            }
            let differs = current
                .as_ref()
                .is_none_or(|r| r.serving != m.serve || r.served.placement() != m.placement);
            let in_place = match current.as_mut() {
                Some(r) if differs && !ended => r.repartition(&m.serve, &m.placement).await,
                _ => false,
            };
            let restart = !in_place && (differs || ended);
            if restart {
                if let Some(r) = current.take() {
                    r.stop().await;
                }
            }
            // Once not served here, the partitions given up are let go.
            if (in_place || restart) && !m.give_up.is_empty() {
                let _ = ctx.cmds.send(Cmd::Release(m.give_up.clone()));
            }
            if restart {
                match start(&ctx, &m.serve, &m.placement).await {
                    Ok(mut r) => {
                        r.given = given;
                        retry.failed = None;
                        current = Some(r);
                    }
                    Err(e) => {
                        tracing::error!("cannot serve this node's partitions: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            let moved = match current.as_mut() {
                Some(r) => r.move_pins(&m.moves, retry.held_off()).await,
                None => Ok(()),
            };
            if let Err((pin, e)) = moved {
                tracing::warn!(
                    "cannot move a pinned function in place ({e}): the owner server starts again"
                );
                if let Some(r) = current.take() {
                    r.stop().await;
                }
                retry.failed(pin);
                continue;
            }
        }
        let task_done = async {
            match current.as_mut() {
                Some(r) => {
                    while !r.task.is_finished() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let again = retry.at();
        tokio::select! {
            c = mine.changed() => if c.is_err() { break },
            _ = super::route::wake_at(again), if again.is_some() => retry.now(),
            _ = stopping.wait_for(|s| *s) => break,
            () = task_done => tracing::warn!("the owner server ended: starting it again"),
        }
    }
    if let Some(r) = current.take() {
        r.stop().await;
    }
}

/// How long a pin whose move failed first waits before it is tried again
/// (doubled at each failure of the same pin, up to 32 times).
const PIN_RETRY: Duration = Duration::from_secs(10);

/// A pin whose move failed. It may have committed all the same (the answer
/// lost with the connection), or still be running in the database, so the
/// server starts again by the pins as the database has them once that move
/// has ended, not as the last beat read them; and it is tried
/// again later, longer after each failure, the function served where it
/// is meanwhile.
#[derive(Default)]
struct PinRetry {
    /// Until the server has started again.
    failed: Option<PinMove>,
    held_off: Option<(PinMove, tokio::time::Instant)>,
    strikes: Option<(PinMove, u32)>,
}

impl PinRetry {
    fn failed(&mut self, pin: PinMove) {
        let n = match &self.strikes {
            Some((p, n)) if *p == pin => n + 1,
            _ => 1,
        };
        self.strikes = Some((pin.clone(), n));
        let wait = PIN_RETRY * 2u32.pow(n.min(6) - 1);
        tracing::warn!(
            seconds = wait.as_secs(),
            "the pin's move is tried again later"
        );
        self.held_off = Some((pin.clone(), tokio::time::Instant::now() + wait));
        self.failed = Some(pin);
    }

    /// The pin not to try now.
    fn held_off(&self) -> Option<&PinMove> {
        self.held_off.as_ref().map(|(p, _)| p)
    }

    /// When to try it again.
    fn at(&self) -> Option<tokio::time::Instant> {
        self.held_off.as_ref().map(|(_, at)| *at)
    }

    fn now(&mut self) {
        self.held_off = None;
    }
}

/// The placement in force in the database once the failed move of
/// `function` can no longer commit.
async fn read_placement(url: &str, function: Bytes) -> Result<Placement, String> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut pins = Pins::open(&url, &PgOptions::default())?;
        pins.placement_settled(&function)
    })
    .await
    .map_err(|e| format!("reading the pins panicked: {e}"))?
    .map_err(|e| e.to_string())
}

/// Opens the store over `serve` and starts a server on it.
async fn start(
    ctx: &OwnerCtx,
    serve: &[(u32, i64)],
    placement: &Placement,
) -> Result<Running, String> {
    let placement = placement.clone();
    let (tx, rx) = oneshot::channel();
    let _ = ctx.cmds.send(Cmd::Reserve(ID_BLOCK, tx));
    let ids = rx.await.ok().flatten().ok_or("cannot reserve job ids")?;
    let url = ctx.url.clone();
    let parts: Vec<u32> = serve.iter().map(|&(p, _)| p).collect();
    let served = Served::new(placement.clone(), &parts);
    let owns = {
        let served = served.clone();
        Arc::new(move |f: &[u8]| served.owns(f))
    };
    let opts = PgOptions {
        partitions: Some(PartitionSet {
            owned: serve.to_vec(),
            placement,
            ids,
        }),
        ..PgOptions::default()
    };
    let store = tokio::task::spawn_blocking(move || PgStore::open(&url, opts))
        .await
        .map_err(|e| format!("opening the store panicked: {e}"))?
        .map_err(|e| format!("cannot open the partitions' store: {e}"))?;
    let store: Box<dyn Store> = Box::new(store);
    let http = ctx.http.as_ref().and_then(super::super::tokio_listener);
    // The config's schedules of the functions served here (the hub keeps
    // to those at reloads too); another node's store holds the others.
    let mut cfg = ctx.cfg.clone();
    cfg.schedules.retain(|s| served.owns(&s.function));
    let mut server = Server::bind_on(cfg, Some(store), Vec::new(), Vec::new(), http)
        .await
        .map_err(|e| e.to_string())?;
    server.obey_lease(ctx.trust.clone());
    server.only_functions(owns);
    server.show_cluster(ctx.view.clone());
    if let Some(gate) = &ctx.gate {
        server.accept_relays(gate.clone());
    }
    if let Some(addr) = ctx.entry {
        server.submit_through(addr);
    }
    server.open_door(ctx.door.clone());
    server.count_in(ctx.counters.clone());
    if let Some(here) = &ctx.local_io {
        server.run_io_here(here.clone());
    }
    let control = server.control();
    let reloads = follow(server.reloader(), &ctx.reloads);
    moves::MOVES.started();
    tracing::info!(partitions = ?parts, "serving this node's partitions");
    let (stop, stop_rx) = oneshot::channel();
    let task = tokio::spawn(server.run(async move {
        let _ = stop_rx.await;
    }));
    Ok(Running {
        serving: serve.to_vec(),
        served,
        given: Vec::new(),
        control,
        _reloads: reloads,
        stop,
        task,
    })
}
