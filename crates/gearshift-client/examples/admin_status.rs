//! Prints a server's functions, queues by priority, workers and jobs, as
//! parsed by [`gearshift_client::AdminClient`].
//!
//! ```sh
//! cargo run -p gearshift-client --example admin_status -- 127.0.0.1:4730
//! ```

use gearshift_client::AdminClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4730".into());
    let mut admin = AdminClient::connect(&addr).await?;
    println!("{addr}: version {}", admin.version().await?);

    println!(
        "\n{:<24} {:>8} {:>8} {:>8}",
        "FUNCTION", "TOTAL", "RUNNING", "WORKERS"
    );
    for s in admin.status().await? {
        println!(
            "{:<24} {:>8} {:>8} {:>8}",
            s.function, s.total, s.running, s.workers
        );
    }

    println!(
        "\n{:<24} {:>8} {:>8} {:>8}",
        "FUNCTION", "HIGH", "NORMAL", "LOW"
    );
    for p in admin.priority_status().await? {
        println!(
            "{:<24} {:>8} {:>8} {:>8}",
            p.function, p.high, p.normal, p.low
        );
    }

    println!("\nworkers:");
    for w in admin.workers().await? {
        if !w.functions.is_empty() {
            println!(
                "  fd {} {} {:?}: {}",
                w.fd,
                w.ip,
                w.client_id,
                w.functions.join(" ")
            );
        }
    }

    println!("\njobs:");
    for j in admin.show_jobs().await? {
        println!(
            "  {} retries={} ignored={} queued={}",
            j.handle, j.retries, j.ignored, j.queued
        );
    }
    Ok(())
}
