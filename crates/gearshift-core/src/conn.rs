//! Per-connection state: what a worker can do and holds, what a client
//! waits on, its options, its sleep state and its registry figures.

use bytes::Bytes;

use crate::effect::Effect;
use crate::ids::{FuncId, IdSet, JobId};
use crate::Millis;

/// A function a worker registered, with its per-job time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ability {
    /// The function.
    pub func: FuncId,
    /// CAN_DO_TIMEOUT in milliseconds, if any.
    pub timeout_ms: Option<u64>,
}

/// Facts about a connection the server supplies when it opens.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// File descriptor number, shown by `workers`.
    pub fd: i64,
    /// Peer address as text, shown by `workers`.
    pub ip: String,
    /// Peer is on a loopback address.
    pub loopback: bool,
    /// What the peer may do (the config file's `[access]`, `--admin-allow`).
    pub rights: Rights,
    /// The cluster node that relayed the connection; None when the peer
    /// connected to this server directly.
    pub node: Option<String>,
    /// The subject of the TLS client certificate the peer presented.
    pub identity: Option<String>,
}

/// What a connection's peer may do; the server decides when it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights {
    /// Submit jobs and ask for their status.
    pub submit: bool,
    /// Register functions and take jobs.
    pub work: bool,
    /// Admin commands that only read (`status`, `workers`, `show jobs` ...).
    pub read: bool,
    /// Admin commands that change jobs, functions or the server
    /// ([`gearshift_proto::AdminCommand::changes`]).
    pub change: bool,
}

impl Rights {
    /// Everything.
    pub const ALL: Rights = Rights {
        submit: true,
        work: true,
        read: true,
        change: true,
    };

    /// Everything but admin changes: a peer neither on loopback nor allowed
    /// by `--admin-allow`, when no `[access]` rules say otherwise.
    pub const NO_CHANGES: Rights = Rights {
        change: false,
        ..Rights::ALL
    };
}

/// One connection's state in the core.
#[derive(Debug)]
pub struct Conn {
    /// What the server told us at connect.
    pub info: ConnInfo,
    /// SET_CLIENT_ID, default `-`.
    pub client_id: Bytes,
    /// Registered functions, newest first.
    pub abilities: Vec<Ability>,
    /// Round-robin cursor into `abilities`.
    pub cursor: usize,
    /// Jobs this connection holds as a worker.
    pub held: Vec<JobId>,
    /// Foreground jobs this connection waits on as a client.
    pub waiting: IdSet<JobId>,
    /// OPTION_REQ exceptions.
    pub exceptions: bool,
    /// OPTION_REQ dead-set: its foreground jobs that fail for good under a
    /// policy go to the dead set, as background ones do (the GearMonkey bridge).
    pub dead_set: bool,
    /// Sent PRE_SLEEP and has not grabbed since.
    pub sleeping: bool,
    /// Was sent a NOOP and has sent nothing since.
    pub noop_sent: bool,
    /// Output held behind answers that wait for the store (see [`crate::order`]).
    pub outbox: std::collections::VecDeque<Held>,
    /// The function this connection last submitted to: a hint, checked by name.
    pub last_func: FuncId,
    /// When it connected (Unix ms).
    pub connected: Millis,
    /// When it last sent a packet or line.
    pub last_seen: Millis,
    /// Runs it finished with WORK_COMPLETE.
    pub jobs_done: u64,
    /// Runs that ended otherwise while it held them (fail, exception, timeout).
    pub jobs_failed: u64,
    /// The job whose WORK_EXCEPTION this worker sent last, until its next
    /// packet: a WORK_FAIL for it then is the second half of one failure.
    pub after_exception: Option<JobId>,
    /// Sent an admin text line.
    pub admin: bool,
    /// Sent a binary packet (so not an admin-only connection).
    pub binary: bool,
}

impl Conn {
    /// A fresh connection.
    pub fn new(info: ConnInfo, now: Millis) -> Self {
        Conn {
            info,
            client_id: Bytes::from_static(b"-"),
            abilities: Vec::new(),
            cursor: 0,
            held: Vec::new(),
            waiting: IdSet::default(),
            exceptions: false,
            dead_set: false,
            sleeping: false,
            noop_sent: false,
            outbox: std::collections::VecDeque::new(),
            last_func: FuncId::MAX,
            connected: now,
            last_seen: now,
            jobs_done: 0,
            jobs_failed: 0,
            after_exception: None,
            admin: false,
            binary: false,
        }
    }

    /// `CLIENT_ID@ADDRESS`, how history and `show job` name a worker.
    pub fn label(&self) -> Bytes {
        let mut w = self.client_id.to_vec();
        w.push(b'@');
        w.extend_from_slice(self.info.ip.as_bytes());
        Bytes::from(w)
    }

    /// Registered a function or holds a job (`show workers` lists it).
    pub fn is_worker(&self) -> bool {
        !self.abilities.is_empty() || !self.held.is_empty()
    }

    /// How live events name it: its client id, else `fd@address`.
    pub fn event_label(&self) -> Bytes {
        if !self.client_id.is_empty() && self.client_id[..] != b"-"[..] {
            return self.client_id.clone();
        }
        Bytes::from(format!("{}@{}", self.info.fd, self.info.ip))
    }

    /// The ability for `func`, if registered.
    pub fn ability(&self, func: FuncId) -> Option<&Ability> {
        self.abilities.iter().find(|a| a.func == func)
    }

    /// May be woken for `func`: asleep, not yet NOOPed, and still able to do it.
    pub fn wakeable_for(&self, func: FuncId) -> bool {
        self.sleeping && !self.noop_sent && self.ability(func).is_some()
    }
}

/// One place in a connection's held output.
#[derive(Debug)]
pub enum Held {
    /// The answer to a submission of this job, still waiting for the store.
    Ack(JobId),
    /// A packet ready to go once everything before it has gone.
    Ready(Effect),
}
