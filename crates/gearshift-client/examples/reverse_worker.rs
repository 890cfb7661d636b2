//! A worker for the `reverse` function, serving every server given.
//!
//! ```sh
//! cargo run -p gearshift-client --example reverse_worker -- 127.0.0.1:4730 [HOST:PORT…]
//! ```
//!
//! It reports progress, streams the reversed text as WORK_DATA, returns it,
//! fails with an exception for an empty workload, and stops gracefully on
//! Ctrl-C (running jobs finish first).

use gearshift_client::{WorkError, Worker, WorkerJob};

async fn reverse(job: WorkerJob) -> Result<Vec<u8>, WorkError> {
    if job.data().is_empty() {
        return Err(WorkError::exception("nothing to reverse"));
    }
    job.send_status(0, 1).await?;
    let reversed: Vec<u8> = job.data().iter().rev().copied().collect();
    job.send_data(reversed.clone()).await?;
    job.send_status(1, 1).await?;
    Ok(reversed)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut servers: Vec<String> = std::env::args().skip(1).collect();
    if servers.is_empty() {
        servers.push("127.0.0.1:4730".to_owned());
    }
    let worker = Worker::builder()
        .servers(&servers)
        .client_id("reverse-example")
        .concurrency(4)
        .function("reverse", reverse)
        .build()?;
    println!("serving `reverse` on {servers:?}; Ctrl-C stops");
    worker
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}
