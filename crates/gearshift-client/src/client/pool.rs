//! The client's servers: one lazily opened connection per server, the
//! choice of server for each request, failover, and reconnect backoff.
//!
//! A job with a non-empty unique id goes to the server picked by a stable
//! hash of the unique (so duplicates meet on one server and coalesce, as
//! with libgearman); other requests go round-robin. A server that cannot be
//! reached is skipped and not tried again before its backoff delay has
//! passed, unless every server is in that state.
//!
//! A request that was never written is sent to the next server. One lost
//! with its connection before its reply is resent too, except a background
//! submission: the server may have queued it, and only the caller can decide
//! whether running it twice is acceptable ([`Error::ConnectionLost`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gearshift_proto::{Request, Response};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::addr::ServerAddr;
use crate::backoff::Backoff;
use crate::client::conn::{ConnHandle, EventSender, Expect};
use crate::error::{Error, Result};
use crate::tls::TlsConfig;
use crate::wire::Wire;

/// Connection settings shared by every server of a pool.
#[derive(Debug, Clone)]
pub(crate) struct PoolConfig {
    /// Limit on opening one TCP connection.
    pub connect_timeout: Duration,
    /// Send OPTION_REQ "exceptions" on every new connection.
    pub exceptions: bool,
    /// Send OPTION_REQ "dead-set" on every new connection (Gearshift only).
    pub dead_set: bool,
    /// First reconnect delay after a failure.
    pub backoff_min: Duration,
    /// Longest reconnect delay.
    pub backoff_max: Duration,
    /// TLS for every connection, or plain TCP.
    pub tls: Option<TlsConfig>,
}

/// Which servers a request may use.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    /// Only this server (a job handle lives on one server).
    Only(usize),
    /// Start at this server, then fail over to the next ones.
    From(usize),
}

struct SlotState {
    conn: Option<ConnHandle>,
    backoff: Backoff,
    retry_at: Option<Instant>,
}

struct Slot {
    addr: ServerAddr,
    state: Mutex<SlotState>,
}

/// The servers of one client.
pub(crate) struct Pool {
    slots: Vec<Slot>,
    next: AtomicUsize,
    cfg: PoolConfig,
}

/// After a failure on one server, may the request go to the next one? Not
/// when a submission may have reached the server (its outcome is unknown).
fn may_try_next(e: &Error, idempotent: bool) -> bool {
    match e {
        Error::ConnectionLost => idempotent,
        // The server read the request as a broken TLS handshake: not taken.
        Error::TlsPort { .. } => true,
        e => e.is_transient(),
    }
}

/// FNV-1a: stable across processes and Rust versions, unlike `DefaultHasher`.
pub(crate) fn stable_hash(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Pool {
    pub(crate) fn new(addrs: Vec<ServerAddr>, cfg: PoolConfig) -> Pool {
        let slots = addrs
            .into_iter()
            .map(|addr| Slot {
                addr,
                state: Mutex::new(SlotState {
                    conn: None,
                    backoff: Backoff::new(cfg.backoff_min, cfg.backoff_max),
                    retry_at: None,
                }),
            })
            .collect();
        Pool {
            slots,
            next: AtomicUsize::new(0),
            cfg,
        }
    }

    /// The configured servers, in order.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = &ServerAddr> {
        self.slots.iter().map(|s| &s.addr)
    }

    /// Where a request for `unique` starts: hashed, or round-robin when empty.
    pub(crate) fn route_for(&self, unique: &[u8]) -> Route {
        let n = self.slots.len().max(1);
        if unique.is_empty() {
            Route::From(self.next.fetch_add(1, Ordering::Relaxed) % n)
        } else {
            Route::From((stable_hash(unique) % n as u64) as usize)
        }
    }

    /// Sends `request` to the first usable server of `route` and waits for
    /// its reply. Returns the index of the server that answered.
    pub(crate) async fn call(
        &self,
        route: Route,
        request: Request,
        expect: Expect,
        events: Option<&EventSender>,
    ) -> Result<(usize, Response)> {
        let n = self.slots.len();
        let order: Vec<usize> = match route {
            Route::Only(i) if i < n => vec![i],
            Route::Only(i) => {
                return Err(Error::InvalidArgument(format!(
                    "server index {i} out of range (have {n})"
                )))
            }
            Route::From(start) => (0..n).map(|k| (start + k) % n).collect(),
        };
        let mut last: Option<Error> = None;
        for force in [false, true] {
            let mut skipped = false;
            for &i in &order {
                let conn = match self.conn(i, force).await {
                    Ok(Some(c)) => c,
                    Ok(None) => {
                        skipped = true;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(server = %self.slots[i].addr, error = %e, "server unavailable");
                        last = Some(e);
                        continue;
                    }
                };
                // A background submission lost in flight may have been queued:
                // sending it again could run it twice. Anything else may be
                // repeated (a foreground job whose JOB_CREATED never came can
                // never report to the lost connection anyway).
                let idempotent = expect != Expect::Created || events.is_some();
                match conn.call(request.clone(), expect, events.cloned()).await {
                    Err(Error::NotConnected) | Err(Error::ConnectionLost) if idempotent => {}
                    Err(Error::NotConnected) => {}
                    Err(e @ Error::TlsPort { .. }) => {
                        // A TLS port: retrying there cannot help; back off, try the next.
                        tracing::warn!(server = %self.slots[i].addr, error = %e, "server unavailable");
                        self.forget(i, &conn, true).await;
                        last = Some(e);
                        continue;
                    }
                    other => return other.map(|r| (i, r)),
                }
                // Not written (or harmless to repeat): the connection was
                // gone. Retry this server once on a fresh connection.
                self.forget(i, &conn, false).await;
                let retried = match self.conn(i, true).await {
                    Ok(Some(c)) => c.call(request.clone(), expect, events.cloned()).await,
                    Ok(None) => Err(Error::NotConnected),
                    Err(e) => Err(e),
                };
                match retried {
                    Err(e) if may_try_next(&e, idempotent) => last = Some(e),
                    other => return other.map(|r| (i, r)),
                }
            }
            if !skipped {
                break;
            }
        }
        Err(Error::NoServerAvailable {
            last: last.map_or_else(
                || "every server is backing off".to_owned(),
                |e| e.to_string(),
            ),
        })
    }

    /// The live connection of server `i`, opening one if needed. `Ok(None)`:
    /// the server is backing off after a failure and `force` is false.
    async fn conn(&self, i: usize, force: bool) -> Result<Option<ConnHandle>> {
        let slot = &self.slots[i];
        let mut st = slot.state.lock().await;
        if let Some(c) = &st.conn {
            if !c.is_closed() {
                return Ok(Some(c.clone()));
            }
            st.conn = None;
        }
        if !force && st.retry_at.is_some_and(|t| Instant::now() < t) {
            return Ok(None);
        }
        match self.open(&slot.addr).await {
            Ok(c) => {
                st.backoff.reset();
                st.retry_at = None;
                st.conn = Some(c.clone());
                Ok(Some(c))
            }
            Err(e) => {
                let delay = st.backoff.next_delay();
                st.retry_at = Some(Instant::now() + delay);
                tracing::debug!(server = %slot.addr, ?delay, "backing off");
                Err(e)
            }
        }
    }

    /// Drops server `i`'s connection if it is still `dead`; with `backoff`,
    /// the server is also left alone for its next backoff delay.
    async fn forget(&self, i: usize, dead: &ConnHandle, backoff: bool) {
        let mut st = self.slots[i].state.lock().await;
        if st.conn.as_ref().is_some_and(|c| c.same(dead)) {
            st.conn = None;
        }
        if backoff {
            let delay = st.backoff.next_delay();
            st.retry_at = Some(Instant::now() + delay);
        }
    }

    async fn open(&self, addr: &ServerAddr) -> Result<ConnHandle> {
        let tls = self.cfg.tls.as_ref();
        let wire = Wire::connect(addr, self.cfg.connect_timeout, tls).await?;
        let conn = ConnHandle::spawn(wire, addr.clone());
        let options = [
            ("exceptions", self.cfg.exceptions),
            ("dead-set", self.cfg.dead_set),
        ];
        for (name, _) in options.into_iter().filter(|(_, on)| *on) {
            let option = Request::Option(name.into());
            let asked = conn.call(option, Expect::Option, None);
            match tokio::time::timeout(self.cfg.connect_timeout, asked).await {
                Ok(Ok(_)) => {}
                Ok(Err(Error::Server { code, text })) => {
                    tracing::warn!(server = %addr, %code, %text, "server refused the {name} option");
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(Error::Timeout),
            }
        }
        tracing::debug!(server = %addr, "client connected");
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_stable() {
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
