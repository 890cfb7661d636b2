//! A connection of its own to the cluster's tables, for the leader lease
//! and the partition leases: opened with the schema brought up to date,
//! re-opened at the next call after it was lost.

use postgres::{Client, Config};

use super::connect::{self, unreachable_or_refused};
use super::{base_config, schema, PgOptions};
use crate::StoreError;

/// The connection and how to re-open it.
pub(super) struct Session {
    config: Config,
    tls: connect::Tls,
    server: String,
    client: Option<Client>,
}

impl Session {
    /// Connects and brings the schema up to date.
    pub(super) fn open(url: &str, opts: &PgOptions) -> Result<Session, StoreError> {
        let (config, tls, server) = base_config(url, opts)?;
        let mut client = connect::connect(&config, &tls, &server)?;
        schema::migrate(&mut client, &server)?;
        Ok(Session {
            config,
            tls,
            server,
            client: Some(client),
        })
    }

    /// `postgres://user@host:port/db`, without the password.
    pub(super) fn server(&self) -> &str {
        &self.server
    }

    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            self.client = Some(connect::connect(&self.config, &self.tls, &self.server)?);
        }
        let server = self.server.clone();
        self.client.as_mut().ok_or(StoreError::Unreachable {
            server,
            why: "no connection".into(),
        })
    }

    /// Runs `f` on the connection; a lost connection is dropped so the
    /// next call reconnects.
    pub(super) fn with<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let server = self.server.clone();
        let result = f(self.client()?);
        result.map_err(|e| {
            let e = unreachable_or_refused(&e, &server, what);
            if matches!(e, StoreError::Unreachable { .. }) {
                self.client = None;
            }
            e
        })
    }
}
