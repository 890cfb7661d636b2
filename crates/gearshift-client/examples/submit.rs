//! Submits one job and prints what comes back.
//!
//! ```sh
//! cargo run -p gearshift-client --example submit -- reverse "hello gearman"
//! cargo run -p gearshift-client --example submit -- --background reverse "later"
//! GEARMAN_SERVERS=10.0.0.1,10.0.0.2:4731 cargo run -p gearshift-client --example submit -- f data
//! ```
//!
//! A foreground job prints every event (data, warnings, progress) and then
//! the result; a background job prints its handle and its status.

use gearshift_client::{Client, JobEvent};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let background = args.first().is_some_and(|a| a == "--background");
    if background {
        args.remove(0);
    }
    let [function, data] =
        <[String; 2]>::try_from(args).map_err(|_| "usage: submit [--background] FUNCTION DATA")?;
    let servers = std::env::var("GEARMAN_SERVERS").unwrap_or_else(|_| "127.0.0.1:4730".into());
    let client = Client::builder().servers(servers.split(',')).build()?;

    if background {
        let handle = client.submit_background(function, data).await?;
        let status = client.status(&handle).await?;
        println!(
            "queued as {handle} on {}: known={} running={}",
            client
                .servers()
                .nth(handle.server())
                .map_or("?".into(), |s| s.to_string()),
            status.known,
            status.running
        );
        return Ok(());
    }

    let mut job = client.submit(function, data).await?;
    println!("submitted as {}", job.handle());
    while let Some(event) = job.next_event().await? {
        match event {
            JobEvent::Data(d) => println!("data: {}", String::from_utf8_lossy(&d)),
            JobEvent::Warning(w) => println!("warning: {}", String::from_utf8_lossy(&w)),
            JobEvent::Status {
                numerator,
                denominator,
            } => println!("progress: {numerator}/{denominator}"),
            JobEvent::Complete(r) => println!("result: {}", String::from_utf8_lossy(&r)),
            JobEvent::Fail => println!("failed"),
            JobEvent::Exception(e) => println!("exception: {}", String::from_utf8_lossy(&e)),
        }
    }
    Ok(())
}
