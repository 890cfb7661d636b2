//! What the tests of partition sets share: a node's leases, a partition's
//! epoch in a beat, a function of a given partition, a set's store, and
//! the stored jobs' partitions.
//! Each test crate uses some of them.
#![allow(dead_code)]

use std::time::Duration;

use gearshift_core::Placement;
use gearshift_store::postgres::lease::NodeAddrs;
use gearshift_store::postgres::partitions::{Owned, PartitionLeases, PartitionSet};
use gearshift_store::{PgOptions, PgStore};

/// Node `name`'s partition leases over `count` partitions.
pub fn leases(url: &str, name: &str, timeout: Duration, count: u32) -> PartitionLeases {
    let me = NodeAddrs {
        name: name.into(),
        gearman: format!("{name}.test:4730"),
        http: None,
    };
    PartitionLeases::open(url, &PgOptions::default(), me, timeout, count)
        .expect("open the partition leases")
}

/// The epoch `owned` lists for `partition`.
pub fn epoch_of(owned: &Owned, partition: u32) -> i64 {
    owned
        .owned
        .iter()
        .find(|(p, _)| *p == partition)
        .map(|(_, e)| *e)
        .unwrap_or_else(|| panic!("partition {partition} is not owned: {owned:?}"))
}

/// A function name that `placement` puts in `partition`.
pub fn function_in(placement: &Placement, partition: u32) -> String {
    (0..)
        .map(|i| format!("fn{i}"))
        .find(|f| placement.partition_of(f.as_bytes()) == partition)
        .unwrap_or_default()
}

/// A store over `owned` (partition, epoch), handing out `ids`.
pub fn set_store(
    url: &str,
    owned: &[(u32, i64)],
    ids: std::ops::Range<u64>,
    placement: Placement,
) -> PgStore {
    let opts = PgOptions {
        partitions: Some(PartitionSet {
            owned: owned.to_vec(),
            placement,
            ids,
        }),
        ..PgOptions::default()
    };
    PgStore::open(url, opts).expect("open a set's store")
}

/// Every stored job's id and partition, by id.
pub fn job_partitions(url: &str) -> Vec<(i64, Option<i32>)> {
    let mut db = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    db.query("SELECT id, partition FROM gearshift_jobs ORDER BY id", &[])
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}
