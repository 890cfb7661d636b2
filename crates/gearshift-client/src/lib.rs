//! Async Gearman client, worker and admin client for tokio, built on
//! `gearshift-proto`, tested against gearmand 1.1.20 and Gearshift.
//!
//! - [`Client`] ([`client`]): foreground jobs as a stream of [`JobEvent`]s
//!   or just their result, background jobs with priority, unique id and run
//!   time, GET_STATUS / GET_STATUS_UNIQUE, ECHO, the exceptions option;
//!   many jobs in flight per connection; several servers with unique-hash
//!   routing, round-robin and failover; per-call timeouts.
//! - [`Worker`] ([`worker`]): async handlers by function name, N jobs at
//!   once, the PRE_SLEEP/NOOP loop, progress helpers, graceful stop,
//!   reconnect with backoff, every server served at once.
//! - [`AdminClient`] ([`admin`]): the text protocol, parsed into types.
//! - [`error`]: the one [`Error`] type.
//! - [`addr`]: [`ServerAddr`], normalised `host:port`.
//! - [`tls`]: [`TlsConfig`], TLS to servers for all three (a CA bundle, an
//!   optional client certificate); `.tls(config)` on either builder,
//!   [`AdminClient::connect_with`].
//! - `wire` (private): framed, buffered I/O (TCP or TLS) shared by all three;
//!   `backoff` (private): reconnect delays.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = gearshift_server::Server::bind(gearshift_server::ServerConfig {
//! #     listen: vec!["127.0.0.1:0".parse()?], ..Default::default() }).await?;
//! # let addr = server.local_addrs()[0];
//! # tokio::spawn(server.run(std::future::pending()));
//! use gearshift_client::{Client, JobEvent, Worker, WorkError};
//!
//! // A worker that streams the workload back in two halves.
//! let worker = Worker::builder()
//!     .server(addr)
//!     .function("split", |job| async move {
//!         let (a, b) = job.data().split_at(job.data().len() / 2);
//!         job.send_data(a.to_vec()).await?;
//!         job.send_data(b.to_vec()).await?;
//!         Ok::<_, WorkError>("")
//!     })
//!     .build()?;
//! tokio::spawn(worker.run(std::future::pending()));
//!
//! let client = Client::builder().server(addr).build()?;
//! let mut job = client.submit("split", "abcd").await?;
//! assert_eq!(job.next_event().await?, Some(JobEvent::Data("ab".into())));
//! assert_eq!(job.next_event().await?, Some(JobEvent::Data("cd".into())));
//! assert_eq!(job.next_event().await?, Some(JobEvent::Complete("".into())));
//! assert_eq!(job.next_event().await?, None);
//! # Ok(()) }
//! ```

pub mod addr;
pub mod admin;
mod backoff;
pub mod client;
pub mod counters;
pub mod error;
pub mod tls;
mod wire;
pub mod worker;

pub use addr::ServerAddr;
pub use admin::{AdminClient, FunctionStatus, JobInfo, PriorityStatus, WorkerInfo};
pub use client::{
    Client, ClientBuilder, Job, JobBuilder, JobEvent, JobHandle, JobStatus, UniqueStatus,
};
pub use error::{AdminErrorKind, Error, Result};
pub use gearshift_proto::worker_stats::WorkerStats;
pub use gearshift_proto::Priority;
pub use tls::{TlsConfig, TlsConfigBuilder};
pub use worker::{WorkError, Worker, WorkerBuilder, WorkerJob};
