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
}

impl Etcd {
    /// Wraps a connected client.
    pub fn new(client: Client) -> Etcd {
        Etcd { client }
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
            let resp = kv.get(from.clone(), Some(opts)).await?;
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
        let resp = self.kv().get(key, None).await?;
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
        let resp = self.kv().txn(txn).await?;
        Ok(resp
            .succeeded()
            .then(|| resp.header().map_or(0, |h| h.revision())))
    }
}
