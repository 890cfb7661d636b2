//! The GearMonkey bridge (issue 34): GearMonkey's clients and workers, which
//! share jobs through a plain Redis (seed 003's key layout), share them with
//! Gearman ones through Gearshift. It runs inside `gearshift serve` and
//! speaks Gearman to the server over loopback, so Gearshift's policies,
//! metrics, events and dashboard apply to bridged jobs as to any other.
//!
//! - [`keys`]: the key layout, read and written, and Gearshift's own keys.
//! - [`glob`]: which functions are bridged (`match` globs).
//! - `scripts`: the Lua scripts (take a job, put one back, the roll call).
//! - `roll`: the roll call, one share per Gearshift instance with a heartbeat.
//! - `take`: GearMonkey clients -> Gearman workers.
//! - `give`: Gearman clients -> GearMonkey workers.
//! - `admin`: a job's priority, over the shared admin connection.
//! - `watch`: the supervisor that decides which of the two runs.
//! - `push`: Gearshift's event stream, which wakes the supervisor.
//! - [`stats`]: counters of bad input and failed calls (logged, and in
//!   `/metrics` through the caller).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gearshift_client::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

mod admin;
mod give;
pub mod glob;
pub mod keys;
mod push;
mod roll;
mod scripts;
pub mod stats;
mod take;
mod wake;
mod watch;

pub use give::BRIDGE_ID;

/// What `--gearmonkey` and `--gearmonkey-match` say.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// `redis://[user:pass@]host:port[/db]` or `rediss://...`.
    pub url: String,
    /// The functions bridged and those routed to GearMonkey workers (never
    /// taken from Redis), at start; [`run`] is given its replacements.
    pub routing: glob::Routing,
    /// The Gearshift server to speak Gearman to (its own loopback address).
    pub gearman: SocketAddr,
    /// CA bundle (PEM) a `rediss://` server's certificate must chain to,
    /// instead of the public roots.
    pub ca: Option<Vec<u8>>,
    /// This Gearshift's name in the roll call's shares: the same across
    /// restarts of one server (its host and data directory), so a restart
    /// takes its previous run's share out at once.
    pub instance: String,
    /// Gearshift's HTTP listener, whose event stream wakes the bridge
    /// (`None`: the bridge polls every quarter second).
    pub http: Option<SocketAddr>,
}

/// A bad `--gearmonkey` value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The URL is not one the Redis client accepts.
    #[error("--gearmonkey {url}: {source}")]
    Url {
        /// The URL given (password hidden).
        url: String,
        /// Why.
        source: redis::RedisError,
    },
    /// The Gearman client could not be built.
    #[error("gearmonkey bridge: {0}")]
    Client(#[from] gearshift_client::Error),
}

/// What the bridge's tasks share.
pub struct Shared {
    redis: ConnectionManager,
    client: Client,
    admin: gearshift_client::admin::SharedAdmin,
    gearman: SocketAddr,
    routing: tokio::sync::watch::Receiver<glob::Routing>,
    instance: String,
    push: Arc<push::Push>,
    wakes: Arc<wake::Wakes>,
    stats: Arc<stats::Stats>,
}

/// The URL with any password replaced, for log lines and errors.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// The Redis client for the URL (and CA, for `rediss://`).
fn redis_client(config: &BridgeConfig) -> Result<redis::Client, ConfigError> {
    let built = match &config.ca {
        Some(pem) => redis::Client::build_with_tls(
            config.url.as_str(),
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            },
        ),
        None => redis::Client::open(config.url.as_str()),
    };
    built.map_err(|source| ConfigError::Url {
        url: redacted(&config.url),
        source,
    })
}

/// Checks the configuration without connecting (for `serve` to refuse a
/// bad URL at start).
pub fn check(config: &BridgeConfig) -> Result<(), ConfigError> {
    redis_client(config).map(drop)
}

/// Runs the bridge until `shutdown` turns true. Redis not being there yet
/// is not an error: the bridge waits for it (logging) while Gearshift runs.
/// `routing` starts as the config's and may change while the bridge runs.
pub async fn run(
    config: BridgeConfig,
    stats: Arc<stats::Stats>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    routing: tokio::sync::watch::Receiver<glob::Routing>,
) -> Result<(), ConfigError> {
    let redis_client = redis_client(&config)?;
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Duration::from_secs(2))
        .set_response_timeout(Duration::from_secs(10))
        .set_number_of_retries(2)
        .set_max_delay(1000);
    let redis = loop {
        match ConnectionManager::new_with_config(redis_client.clone(), manager_config.clone()).await
        {
            Ok(m) => break m,
            Err(e) => {
                tracing::warn!(
                    "gearmonkey: cannot reach Redis at {} yet: {e}",
                    redacted(&config.url)
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                if *shutdown.borrow() {
                    return Ok(());
                }
            }
        }
    };
    let client = Client::builder()
        .server(config.gearman)
        .exceptions(true)
        // A bridged job that fails for good under a policy goes to the dead set.
        .dead_set(true)
        .no_timeout()
        .build()?;
    let (wakes, asks) = wake::Wakes::new();
    let shared = Arc::new(Shared {
        redis,
        client,
        admin: gearshift_client::admin::SharedAdmin::new(config.gearman),
        gearman: config.gearman,
        routing,
        instance: config.instance,
        push: Arc::default(),
        wakes,
        stats,
    });
    let wakes = tokio::spawn(wake::run(
        redis_client,
        shared.wakes.clone(),
        asks,
        shared.stats.clone(),
    ));
    let push = config.http.map(|http| {
        tokio::spawn(push::run(
            http,
            shared.routing.clone(),
            shared.push.clone(),
            shared.stats.clone(),
        ))
    });
    tracing::info!(
        "gearmonkey bridge: Redis at {}, functions {:?}",
        redacted(&config.url),
        glob::shown(&shared.routing.borrow().matches)
    );
    recover(&shared).await;
    // This instance's shares from a run that did not stop cleanly, and any
    // other instance's that stopped being alive, leave the roll call.
    roll::clear_legacy(&shared).await;
    let cleared = roll::heartbeat(&shared, true).await;
    watch::run(shared, shutdown, cleared).await;
    if let Some(push) = push {
        push.abort();
    }
    wakes.abort();
    Ok(())
}

/// Puts back every job a previous run took and did not finish.
async fn recover(shared: &Shared) {
    for function in watch::scan(shared, keys::PROCESSING_PREFIX).await {
        let mut redis = shared.redis.clone();
        let entries: Vec<Vec<u8>> = match redis::cmd("LRANGE")
            .arg(keys::processing(&function))
            .arg(0)
            .arg(-1)
            .query_async(&mut redis)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                stats::Stats::bump(&shared.stats.redis_errors);
                tracing::warn!(function, "gearmonkey: cannot read the processing list: {e}");
                continue;
            }
        };
        if !entries.is_empty() {
            tracing::info!(
                function,
                jobs = entries.len(),
                "gearmonkey: putting back jobs a previous run had taken"
            );
        }
        for entry in entries {
            take::put_back(shared, &function, &entry).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redacted("redis://u:secret@h:6379/2"),
            "redis://***@h:6379/2"
        );
        assert_eq!(redacted("redis://h:6379"), "redis://h:6379");
    }
}
