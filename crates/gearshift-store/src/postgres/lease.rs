//! The cluster's lease, on its own connection: every node heartbeats its
//! row in `gearshift_nodes`; one node at a time holds `gearshift_leader`
//! (it runs the jobs) until `expires_at`, and renews it each beat. A node
//! takes an expired lease by raising its epoch; the epoch fences the
//! deposed leader's flushes ([`super::PgOptions::fence`]). All times are
//! the database's, so the nodes' clocks need not agree.

use std::time::Duration;

use postgres::{Client, GenericClient};

use super::session::Session;
use super::PgOptions;
use crate::StoreError;

/// A node's name and the addresses other nodes and clients reach it at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddrs {
    /// `--node-name`.
    pub name: String,
    /// Its Gearman listener, as other nodes dial it (`host:port`).
    pub gearman: String,
    /// Its HTTP listener, if on.
    pub http: Option<String>,
}

/// Who holds the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Raised by every takeover.
    pub epoch: i64,
    /// The leading node and its addresses.
    pub node: NodeAddrs,
}

/// A node as `gearshift_nodes` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// Name and addresses.
    pub node: NodeAddrs,
    /// Its Gearshift version.
    pub version: String,
    /// Milliseconds since its last heartbeat, by the database's clock.
    pub silent_ms: i64,
    /// Whether it holds the lease now.
    pub leader: bool,
}

/// One heartbeat's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The lease's holder, if it has not expired.
    pub leader: Option<Leader>,
    /// Whether the renewal this beat asked for was made.
    pub renewed: bool,
}

/// A node's session with the cluster's tables.
pub struct Lease {
    db: Session,
    me: NodeAddrs,
    timeout_ms: i64,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("server", &self.db.server())
            .field("node", &self.me.name)
            .finish()
    }
}

impl Lease {
    /// Connects, brings the schema up to date and registers this node.
    /// `timeout` is how long a lease lasts without renewal.
    pub fn open(
        url: &str,
        opts: &PgOptions,
        me: NodeAddrs,
        timeout: Duration,
    ) -> Result<Lease, StoreError> {
        let mut lease = Lease {
            db: Session::open(url, opts)?,
            me,
            timeout_ms: i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
        };
        lease.register()?;
        Ok(lease)
    }

    /// `postgres://user@host:port/db`, without the password.
    pub fn server(&self) -> &str {
        self.db.server()
    }

    /// This node.
    pub fn me(&self) -> &NodeAddrs {
        &self.me
    }

    /// Runs `f` on the connection; a lost connection is dropped so the
    /// next call reconnects.
    fn with<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Client, &NodeAddrs, i64) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let me = &self.me;
        let timeout = self.timeout_ms;
        self.db.with(what, |c| f(c, me, timeout))
    }

    /// Adds or refreshes this node's row.
    fn register(&mut self) -> Result<(), StoreError> {
        self.with("registering the node", |c, me, _| register(c, me))?;
        Ok(())
    }

    /// The secret a relaying node presents to the leader (made once, by
    /// the migration that created the cluster tables).
    pub fn secret(&mut self) -> Result<String, StoreError> {
        self.with("reading the cluster secret", |c, _, _| {
            c.query_one("SELECT secret FROM gearshift_cluster", &[])?
                .try_get(0)
        })
    }

    /// Heartbeats this node's row and, with `leading`, renews the lease
    /// if it is still at that epoch; returns the lease as it now stands.
    pub fn beat(&mut self, leading: Option<i64>) -> Result<Beat, StoreError> {
        self.with("the heartbeat", |c, me, timeout| {
            let mut tx = c.transaction()?;
            heartbeat(&mut tx, me)?;
            let renewed = match leading {
                Some(epoch) => {
                    tx.execute(
                        "UPDATE gearshift_leader
                         SET expires_at = now() + $2::bigint * interval '1 millisecond'
                         WHERE epoch = $1 AND expires_at >= now()",
                        &[&epoch, &timeout],
                    )? == 1
                }
                None => false,
            };
            let row = tx.query_one(
                "SELECT epoch, node, gearman_addr, http_addr, expires_at >= now()
                 FROM gearshift_leader",
                &[],
            )?;
            tx.commit()?;
            Ok(Beat {
                leader: leader_of(&row)?,
                renewed,
            })
        })
    }

    /// Takes the lease if it has expired (or was released); returns the
    /// new epoch, or None while another node holds it.
    pub fn try_take(&mut self) -> Result<Option<i64>, StoreError> {
        self.with("taking the lease", |c, me, timeout| {
            let row = c.query_opt(
                "UPDATE gearshift_leader
                 SET epoch = epoch + 1, node = $1, gearman_addr = $2, http_addr = $3,
                     expires_at = now() + $4::bigint * interval '1 millisecond'
                 WHERE expires_at < now()
                 RETURNING epoch",
                &[&me.name, &me.gearman, &me.http, &timeout],
            )?;
            row.map(|r| r.try_get(0)).transpose()
        })
    }

    /// Gives the lease up at a graceful stop, so another node takes over
    /// at once instead of after the timeout.
    pub fn release(&mut self, epoch: i64) -> Result<(), StoreError> {
        self.with("releasing the lease", |c, _, _| {
            c.execute(
                "UPDATE gearshift_leader SET expires_at = '-infinity' WHERE epoch = $1",
                &[&epoch],
            )
        })?;
        Ok(())
    }

    /// Removes this node's row (a graceful stop).
    pub fn leave(&mut self) -> Result<(), StoreError> {
        self.with("leaving the cluster", |c, me, _| {
            c.execute("DELETE FROM gearshift_nodes WHERE name = $1", &[&me.name])
        })?;
        Ok(())
    }

    /// The live nodes that own partitions (partitioned nodes: a leader
    /// must not run beside them).
    pub fn partition_owners(&mut self) -> Result<Vec<String>, StoreError> {
        self.with("listing the partitions' owners", |c, _, _| {
            c.query(
                "SELECT DISTINCT node FROM gearshift_partitions
                 WHERE node IS NOT NULL AND expires_at >= now() ORDER BY node",
                &[],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })
    }

    /// Every registered node, by name.
    pub fn nodes(&mut self) -> Result<Vec<NodeRow>, StoreError> {
        self.with("listing the nodes", |c, _, _| {
            let rows = c.query(
                "SELECT n.name, n.gearman_addr, n.http_addr, n.version,
                   (extract(epoch FROM now() - n.heartbeat_at) * 1000)::bigint,
                   (l.node = n.name AND l.expires_at >= now()) IS TRUE
                 FROM gearshift_nodes n CROSS JOIN gearshift_leader l
                 ORDER BY n.name",
                &[],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(NodeRow {
                        node: NodeAddrs {
                            name: r.try_get(0)?,
                            gearman: r.try_get(1)?,
                            http: r.try_get(2)?,
                        },
                        version: r.try_get(3)?,
                        silent_ms: r.try_get(4)?,
                        leader: r.try_get(5)?,
                    })
                })
                .collect()
        })
    }
}

/// Adds or refreshes `me`'s row in `gearshift_nodes`.
pub(super) fn register(c: &mut impl GenericClient, me: &NodeAddrs) -> Result<(), postgres::Error> {
    c.execute(
        "INSERT INTO gearshift_nodes (name, gearman_addr, http_addr, version)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET gearman_addr = EXCLUDED.gearman_addr,
           http_addr = EXCLUDED.http_addr, version = EXCLUDED.version,
           started_at = now(), heartbeat_at = now()",
        &[&me.name, &me.gearman, &me.http, &env!("CARGO_PKG_VERSION")],
    )?;
    Ok(())
}

/// Heartbeats `me`'s row, putting it back if it was removed.
pub(super) fn heartbeat(c: &mut impl GenericClient, me: &NodeAddrs) -> Result<(), postgres::Error> {
    let n = c.execute(
        "UPDATE gearshift_nodes SET heartbeat_at = now() WHERE name = $1",
        &[&me.name],
    )?;
    if n == 0 {
        // Removed by hand (or by a graceful stop): back in.
        c.execute(
            "INSERT INTO gearshift_nodes (name, gearman_addr, http_addr, version)
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
            &[&me.name, &me.gearman, &me.http, &env!("CARGO_PKG_VERSION")],
        )?;
    }
    Ok(())
}

/// The lease row as a [`Leader`], None once expired or never taken.
fn leader_of(row: &postgres::Row) -> Result<Option<Leader>, postgres::Error> {
    let live: bool = row.try_get(4)?;
    let node: Option<String> = row.try_get(1)?;
    let gearman: Option<String> = row.try_get(2)?;
    Ok(match (live, node, gearman) {
        (true, Some(name), Some(gearman)) => Some(Leader {
            epoch: row.try_get(0)?,
            node: NodeAddrs {
                name,
                gearman,
                http: row.try_get(3)?,
            },
        }),
        _ => None,
    })
}
