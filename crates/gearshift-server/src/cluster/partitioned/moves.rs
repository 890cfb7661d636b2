//! Partitions moving in and out of a running owner server, without a
//! restart: the partitions leaving are handed over once their work is
//! done, those arriving are read from the store and taken on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_core::{HandOverPending, Placement, TakenOver};
use gearshift_store::postgres::pins::PinMove;
use gearshift_store::{Repartition, Replayed, StoreError};

use super::owner::STOP_WAIT;
use crate::clock::Clock;
use crate::Control;

/// The partitions an owner server serves, read by its hub at every
/// submission (a function of any other is refused, to be sent again).
pub(super) struct Served {
    placed: RwLock<Placed>,
    on: Vec<AtomicBool>,
}

/// The placement served by, and the function being handed over for a pin
/// (refused meanwhile), if any.
struct Placed {
    placement: Placement,
    leaving: Option<Bytes>,
}

impl Served {
    /// Serving `parts` under `placement`.
    pub(super) fn new(placement: Placement, parts: &[u32]) -> Arc<Served> {
        let on = (0..placement.count.max(1))
            .map(|p| AtomicBool::new(parts.contains(&p)))
            .collect();
        Arc::new(Served {
            placed: RwLock::new(Placed {
                placement,
                leaving: None,
            }),
            on,
        })
    }

    /// Whether `function`'s partition is served.
    pub(super) fn owns(&self, function: &[u8]) -> bool {
        let placed = self.read();
        if placed.leaving.as_deref() == Some(function) {
            return false;
        }
        self.serves(placed.placement.partition_of(function))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Placed> {
        self.placed.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Placed> {
        self.placed.write().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, parts: &[u32], on: bool) {
        for &p in parts {
            if let Some(b) = self.on.get(p as usize) {
                b.store(on, Ordering::Release);
            }
        }
    }

    fn serves(&self, p: u32) -> bool {
        self.on
            .get(p as usize)
            .is_some_and(|b| b.load(Ordering::Acquire))
    }

    /// The placement the server serves by.
    pub(super) fn placement(&self) -> Placement {
        self.read().placement.clone()
    }

    pub(super) fn place(&self, placement: Placement) {
        let mut placed = self.write();
        placed.placement = placement;
        placed.leaving = None;
    }
}

/// Functions a change of placement from `was` to `now` (pins) moves, with
/// the partitions they leave and join.
pub(super) fn pinned_moves(was: &Placement, now: &Placement) -> Vec<(Bytes, u32, u32)> {
    let names: std::collections::BTreeSet<&Bytes> =
        was.pins.keys().chain(now.pins.keys()).collect();
    names
        .into_iter()
        .map(|f| (f.clone(), was.partition_of(f), now.partition_of(f)))
        .filter(|(_, a, b)| a != b)
        .collect()
}

/// Puts `placement` in force in the store and the hub (a pin that moves
/// nothing this server holds).
pub(super) async fn re_place(
    control: &Control,
    served: &Arc<Served>,
    placement: Placement,
) -> Result<(), MoveError> {
    let p = placement.clone();
    on_set(control, None, move |r| r.place(p)).await?;
    served.place(placement);
    Ok(())
}

/// Runs `f` on the store's partition set, between commits, once the ops a
/// failed flush left to write again that name a function `forget` says are
/// dropped (their partition's new owner writes them).
async fn on_set<R: Send + 'static>(
    control: &Control,
    forget: Option<Gone>,
    f: impl FnOnce(&mut dyn Repartition) -> Result<R, StoreError> + Send + 'static,
) -> Result<R, MoveError> {
    control
        .store(move |committer| {
            if let Some(gone) = forget {
                committer.forget_unwritten(&*gone);
            }
            match committer.repartition() {
                Some(r) => f(r).map_err(|e| e.to_string()),
                None => Err("not a partition set".to_owned()),
            }
        })
        .await?
        .map_err(MoveError::Store)
}

/// This process's moves, for `/metrics`.
pub(super) struct MoveCounts {
    handed_over: AtomicU64,
    taken_on: AtomicU64,
    starts: AtomicU64,
}

/// The node's moves (one node per process; a test process shares them).
pub(super) static MOVES: MoveCounts = MoveCounts {
    handed_over: AtomicU64::new(0),
    taken_on: AtomicU64::new(0),
    starts: AtomicU64::new(0),
};

impl MoveCounts {
    /// The owner server was started (at the node's start, or because a
    /// move could not be made in place).
    pub(super) fn started(&self) {
        self.starts.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds this process's section to `/metrics`, once.
    pub(super) fn register(&'static self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            crate::http::extra_metrics::register(Box::new(move |out| self.write(out)));
        });
    }

    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        out.push_str(
            "# HELP gearshift_cluster_partitions_moved_total Partitions this node handed over or \
             took on while its job server ran.\n\
             # TYPE gearshift_cluster_partitions_moved_total counter\n",
        );
        for (way, c) in [
            ("handed_over", &self.handed_over),
            ("taken_on", &self.taken_on),
        ] {
            let _ = writeln!(
                out,
                "gearshift_cluster_partitions_moved_total{{way=\"{way}\"}} {}",
                get(c)
            );
        }
        out.push_str(
            "# HELP gearshift_cluster_owner_starts_total Starts of this node's job server over \
             its partitions: its first, and each move that could not be made in place.\n\
             # TYPE gearshift_cluster_owner_starts_total counter\n",
        );
        let _ = writeln!(
            out,
            "gearshift_cluster_owner_starts_total {}",
            get(&self.starts)
        );
    }
}

/// Why a move could not be made in place (the server is started again).
#[derive(Debug, thiserror::Error)]
pub(super) enum MoveError {
    #[error("the owner server stopped")]
    Stopped,
    #[error("the store cannot change its partitions: {0}")]
    Store(String),
}

impl From<crate::control::Stopped> for MoveError {
    fn from(_: crate::control::Stopped) -> Self {
        MoveError::Stopped
    }
}

/// Hands `leaving` over: no new submission for their functions is taken
/// and no job of theirs handed out, their running jobs may finish (up to
/// [`STOP_WAIT`]; one still running then is cut off, and its new owner
/// counts it so), then the core forgets them (a foreground job that waits
/// goes back to its client's node, which submits it again to the new
/// owner) and the store lets them go.
pub(super) async fn hand_over(
    control: &Control,
    served: &Arc<Served>,
    leaving: &[u32],
) -> Result<(), MoveError> {
    if leaving.is_empty() {
        return Ok(());
    }
    served.set(leaving, false);
    let gone = gone_fn(served, leaving);
    let forgotten = let_go(control, &gone).await?;
    let parts = leaving.to_vec();
    on_set(control, Some(gone), move |r| r.release(&parts)).await?;
    MOVES
        .handed_over
        .fetch_add(leaving.len() as u64, Ordering::Relaxed);
    tracing::info!(partitions = ?leaving, jobs = forgotten, "partitions handed over in place");
    Ok(())
}

/// Lets the functions `gone` names go from the core: no job of theirs is
/// handed out, their running jobs may finish and their submissions be
/// stored (up to [`STOP_WAIT`]), then the core forgets them. Returns the
/// jobs forgotten.
async fn let_go(control: &Control, gone: &Gone) -> Result<usize, MoveError> {
    let g = gone.clone();
    control
        .call(move |core| core.hold_for_hand_over(&*g))
        .await?;
    let until = Instant::now() + STOP_WAIT;
    loop {
        // Counts first: the pass over every job runs once none is running.
        let g = gone.clone();
        let pending = control
            .call(move |core| match core.running_in(&*g) {
                0 => core.hand_over_pending(&*g),
                running => HandOverPending {
                    running,
                    ..HandOverPending::default()
                },
            })
            .await?;
        if pending.running == 0 && pending.unacked == 0 {
            break;
        }
        if Instant::now() >= until {
            tracing::warn!(
                running = pending.running,
                "jobs still run in what is handed over: their new owner counts them as cut off"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let g = gone.clone();
    Ok(control
        .call(move |core| core.hand_over(&*g, Clock::new().now()))
        .await?)
}

/// Moves a function where the pin asked for it (`asked`) names, this
/// server holding the partition it lives in. Into a partition served here
/// too, only its rows move ([`re_pin_here`]). Otherwise its submissions are
/// refused meanwhile (sent again by their nodes), its running jobs may
/// finish (up to [`STOP_WAIT`]), then the core forgets it and the store
/// moves its rows and puts the pin in force (a pin asked again meanwhile
/// moves nothing: the function is taken on again). Returns the placement
/// now in force.
pub(super) async fn give_function(
    control: &Control,
    served: &Arc<Served>,
    asked: &PinMove,
) -> Result<Placement, MoveError> {
    let function = asked.function.clone();
    let mut target = served.placement();
    target.set_pin(&function, asked.partition);
    if served.serves(target.partition_of(&function)) {
        return re_pin_here(control, served, asked).await;
    }
    served.write().leaving = Some(function.clone());
    let f = function.clone();
    let gone: Gone = Arc::new(move |name: &[u8]| name == &f[..]);
    let_go(control, &gone).await?;
    let (f, to) = (function.clone(), asked.partition);
    let placement = on_set(control, Some(gone), move |r| r.give_function(&f, to)).await?;
    let to = placement.partition_of(&function);
    if served.serves(to) {
        take_function(control, function.clone(), placement.clone()).await?;
    }
    served.place(placement.clone());
    tracing::info!(function = %String::from_utf8_lossy(&function), partition = to, "a pinned function moved");
    Ok(placement)
}

/// A pin between two partitions served here: the store moves the
/// function's rows and reads them back into its memory, while the core
/// keeps the function as it is (its jobs, runs and workers).
async fn re_pin_here(
    control: &Control,
    served: &Arc<Served>,
    asked: &PinMove,
) -> Result<Placement, MoveError> {
    let (f, to) = (asked.function.clone(), asked.partition);
    let placement = on_set(control, None, move |r| {
        let placement = r.give_function(&f, to)?;
        r.adopt_function(&f, placement.clone())?;
        Ok(placement)
    })
    .await?;
    served.place(placement.clone());
    tracing::info!(
        function = %String::from_utf8_lossy(&asked.function),
        partition = placement.partition_of(&asked.function),
        "a pinned function moved between partitions served here"
    );
    Ok(placement)
}

/// Takes on `function`, which `placement` moves into a partition served
/// here: the store writes by `placement` and reads the function's rows,
/// and the core takes them on. The caller serves by `placement` after.
pub(super) async fn take_function(
    control: &Control,
    function: Bytes,
    placement: Placement,
) -> Result<(), MoveError> {
    let f = function.clone();
    let replayed = on_set(control, None, move |r| r.adopt_function(&f, placement)).await?;
    let jobs = replayed.jobs.len();
    take_on(control, replayed).await?;
    tracing::info!(function = %String::from_utf8_lossy(&function), jobs, "a pinned function taken on in place");
    Ok(())
}

/// Takes `arriving` on (each at its epoch): their rows are read into the
/// store and the core, then their submissions are taken.
pub(super) async fn take_over(
    control: &Control,
    served: &Arc<Served>,
    arriving: &[(u32, i64)],
) -> Result<(), MoveError> {
    if arriving.is_empty() {
        return Ok(());
    }
    let parts = arriving.to_vec();
    let replayed = on_set(control, None, move |r| r.adopt(&parts)).await?;
    let (jobs, cut_off) = (replayed.jobs.len(), replayed.running.len());
    take_on(control, replayed).await?;
    let numbers: Vec<u32> = arriving.iter().map(|&(p, _)| p).collect();
    served.set(&numbers, true);
    MOVES
        .taken_on
        .fetch_add(numbers.len() as u64, Ordering::Relaxed);
    tracing::info!(partitions = ?numbers, jobs, cut_off, "partitions taken on in place");
    Ok(())
}

type Gone = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Whether a function lives in one of `parts`.
fn gone_fn(served: &Arc<Served>, parts: &[u32]) -> Gone {
    let placement = served.placement();
    let parts = parts.to_vec();
    Arc::new(move |f: &[u8]| parts.contains(&placement.partition_of(f)))
}

/// The core takes on what the store read, as a restart would restore it.
async fn take_on(control: &Control, r: Replayed) -> Result<(), MoveError> {
    let taken = TakenOver {
        jobs: r.jobs,
        dead: r.dead,
        schedules: r.schedules,
        kept: r.kept,
        functions: r.functions,
        running: r.running,
    };
    Ok(control
        .call(move |core| core.take_over(taken, Clock::new().now()))
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_pin_moves_only_the_functions_it_places_elsewhere() {
        let was = Placement::new(8);
        let hashed = was.partition_of(b"hot");
        let to = (hashed + 3) % 8;
        let mut now = was.clone();
        now.pins.insert(Bytes::from_static(b"hot"), to);
        // Pinned where its name hashes: nothing moves.
        now.pins
            .insert(Bytes::from_static(b"cold"), was.partition_of(b"cold"));
        let hot = Bytes::from_static(b"hot");
        assert_eq!(pinned_moves(&was, &now), [(hot.clone(), hashed, to)]);
        assert_eq!(pinned_moves(&now, &was), [(hot, to, hashed)], "unpinned");
        assert!(pinned_moves(&now, &now).is_empty());
    }
}
