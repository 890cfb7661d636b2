//! The few etcd calls the bridge makes: a paged range read at one
//! revision, a single get, and the fenced transaction (compare each key's
//! mod_revision, then delete and put) that every write of a job or worker
//! document is.

use etcd_client::{Client, Compare, CompareOp, GetOptions, KvClient, Txn, TxnOp};

use crate::keys::range_end;

/// Keys read per page of a range.
const PAGE: i64 = 256;

/// One key as read.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key (UTF-8, lossily).
    pub key: String,
    /// Its value.
    pub value: Vec<u8>,
    /// Its mod_revision (what a fenced write compares).
    pub mod_rev: i64,
}

/// A fenced write: every `expect` (key, mod_revision; 0 = absent) must
/// hold, then `delete` and `put` apply together.
#[derive(Debug, Default, Clone)]
pub struct Write {
    /// Keys and the mod_revision each must still have.
    pub expect: Vec<(String, i64)>,
    /// Keys deleted.
    pub delete: Vec<String>,
    /// Keys written.
    pub put: Vec<(String, Vec<u8>)>,
}

/// The etcd side.
#[derive(Clone)]
pub struct Etcd {
    client: Client,
    /// User and password, to sign in again when etcd forgot the token.
    user: Option<(String, String)>,
}

impl Etcd {
    /// Wraps a connected client.
    pub fn new(client: Client, user: Option<(String, String)>) -> Etcd {
        Etcd { client, user }
    }

    /// Passes an error on, first signing in again if it says the auth
    /// token is no longer valid (an etcd restart forgets simple tokens).
    async fn seen(&self, e: etcd_client::Error) -> etcd_client::Error {
        let expired = match &e {
            etcd_client::Error::GRpcStatus(s) => {
                // gRPC's UNAUTHENTICATED is 16.
                s.code() as i32 == 16 || s.message().contains("auth token")
            }
            _ => false,
        };
        if let (true, Some((u, p))) = (expired, &self.user) {
            // The stale token must not go with the sign-in itself.
            let mut client = self.client.clone();
            client.remove_client_auth();
            match client.set_client_auth(u.clone(), p.clone()).await {
                Ok(()) => tracing::info!("etcd: signed in again (the auth token had expired)"),
                Err(err) => tracing::warn!("etcd: cannot sign in again: {err}"),
            }
        }
        e
    }

    /// The client, for watches.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn kv(&self) -> KvClient {
        self.client.kv_client().max_decoding_message_size(256 << 20)
    }

    /// Every key under `prefix` at one revision, in key order, and that
    /// revision (a watch continues from the one after).
    pub async fn range(&self, prefix: &str) -> Result<(Vec<Entry>, i64), etcd_client::Error> {
        let mut kv = self.kv();
        let end = range_end(prefix);
        let mut from = prefix.as_bytes().to_vec();
        let mut revision = 0;
        let mut out = Vec::new();
        loop {
            let mut opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            if revision != 0 {
                opts = opts.with_revision(revision);
            }
            let resp = match kv.get(from.clone(), Some(opts)).await {
                Ok(r) => r,
                Err(e) => return Err(self.seen(e).await),
            };
            if revision == 0 {
                revision = resp.header().map_or(0, |h| h.revision());
            }
            let more = resp.more();
            for kv in resp.kvs() {
                out.push(Entry {
                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                    value: kv.value().to_vec(),
                    mod_rev: kv.mod_revision(),
                });
            }
            match resp.kvs().last() {
                Some(last) if more => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok((out, revision)),
            }
        }
    }

    /// One key, if present.
    pub async fn get(&self, key: &str) -> Result<Option<Entry>, etcd_client::Error> {
        let resp = match self.kv().get(key, None).await {
            Ok(r) => r,
            Err(e) => return Err(self.seen(e).await),
        };
        Ok(resp.kvs().first().map(|kv| Entry {
            key: key.to_owned(),
            value: kv.value().to_vec(),
            mod_rev: kv.mod_revision(),
        }))
    }

    /// Applies a fenced write; the revision it made (the new mod_revision
    /// of every key put), or `None` when a compare failed.
    pub async fn write(&self, w: &Write) -> Result<Option<i64>, etcd_client::Error> {
        let compares: Vec<Compare> = w
            .expect
            .iter()
            .map(|(k, rev)| Compare::mod_revision(k.as_str(), CompareOp::Equal, *rev))
            .collect();
        let mut ops: Vec<TxnOp> = w
            .delete
            .iter()
            .map(|k| TxnOp::delete(k.as_str(), None))
            .collect();
        ops.extend(
            w.put
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.clone(), None)),
        );
        let txn = Txn::new().when(compares).and_then(ops);
        let resp = match self.kv().txn(txn).await {
            Ok(r) => r,
            Err(e) => return Err(self.seen(e).await),
        };
        Ok(resp
            .succeeded()
            .then(|| resp.header().map_or(0, |h| h.revision())))
    }
}
