//! What a connection's peer may do ([`Rights`]): decided by the server when
//! it connects, enforced by [`crate::access`].

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
