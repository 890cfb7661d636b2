//! The HTTP listener (docs/http.md): Prometheus metrics, the JSON API, live
//! events, the dashboard, and gearmand's HTTP submission protocol. Reads and
//! actions are [`Control`] calls on the core; submissions go through the
//! Gearman protocol, as a client of this same server over loopback.

pub mod api;
pub mod assets;
pub mod auth;
pub mod events;
pub mod extra_metrics;
pub mod fanout;
pub mod fanout_events;
mod fanout_merge;
mod fanout_metrics;
pub mod gearmand;
pub mod listener;
pub mod metrics;
pub mod series;
pub mod submit;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use gearshift_core::view::Totals;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::control::{Control, Stopped};
use crate::events::EventBus;

/// What the HTTP listener needs from the server.
pub struct Context {
    /// Calls on the core.
    pub control: Control,
    /// Live events.
    pub bus: Arc<EventBus>,
    /// Who may do what.
    pub auth: auth::Auth,
    /// The store's group commit latencies and failures.
    pub store_stats: Arc<crate::store_task::StoreStats>,
    /// Networks besides loopback trusted like loopback (`--admin-allow`).
    pub access: Arc<crate::access::AccessCell>,
    /// Connections closed for sending nothing (`--idle-timeout`).
    pub counters: Arc<crate::counters::ConnCounters>,
    /// This server's Gearman address, as a loopback client reaches it.
    pub gearman: Option<SocketAddr>,
    /// Largest request body (the server's packet limit).
    pub max_body: usize,
    /// A cluster leader's check of connections relayed by other nodes.
    pub relays: Option<Arc<crate::cluster::relay::RelayGate>>,
    /// The cluster's members (a node on PostgreSQL).
    pub cluster: Option<Arc<crate::cluster::view::ClusterView>>,
    /// HTTPS only, with this certificate (`--http-tls`).
    pub https: Option<crate::tls::TlsServer>,
}

impl Context {
    /// The core's totals as this node shows them ([`node_totals`]).
    pub fn node_totals(&self, t: Totals) -> Totals {
        node_totals(self.cluster.as_deref(), t)
    }
}

/// The core's totals as a node shows them: a partitioned node's
/// connections are those it accepted, by role (its job server sees each
/// once per owner the connection talks to).
pub fn node_totals(cluster: Option<&crate::cluster::view::ClusterView>, mut t: Totals) -> Totals {
    if let Some((clients, workers, admin)) = cluster.and_then(|c| c.entry_counts()) {
        (t.client_conns, t.worker_conns, t.admin_conns) = (clients, workers, admin);
    }
    t
}

/// Shared state of every handler.
pub struct App {
    /// The server's parts.
    pub ctx: Context,
    /// Once-a-second samples for the overview.
    pub series: Arc<series::Series>,
    /// Submissions (a Gearman client of this server).
    pub submitter: submit::Submitter,
    /// When the listener started, Unix ms.
    pub started_ms: u64,
    /// Flips to true when the server stops (event streams end).
    pub stop: watch::Receiver<bool>,
}

/// Shared state, as handlers take it.
pub type State = Arc<App>;

/// An error reply: `{"error": "..."}` with a status code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// What is wrong.
    pub message: String,
}

impl ApiError {
    /// An error with `status`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 400.
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }
}

impl From<Stopped> for ApiError {
    fn from(e: Stopped) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_reply(self.status, &serde_json::json!({ "error": self.message }))
    }
}

/// A JSON reply with `status`.
pub fn json_reply(status: StatusCode, v: &serde_json::Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// The address a loopback client reaches a listener on: an unspecified
/// address becomes the loopback of its family.
pub fn loopback_of(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// Every route, with the access rules in front.
pub fn router(app: State) -> Router {
    let max_body = app.ctx.max_body;
    let api = Router::new()
        .route("/api/v1/overview", get(api::overview))
        .route("/api/v1/functions", get(api::functions))
        .route(
            "/api/v1/functions/{name}",
            post(api::create_function).delete(api::drop_function),
        )
        .route("/api/v1/functions/{name}/pause", post(api::pause))
        .route("/api/v1/functions/{name}/resume", post(api::resume))
        .route("/api/v1/functions/{name}/maxqueue", post(api::max_queue))
        .route("/api/v1/jobs", get(api::jobs).post(api::submit))
        .route("/api/v1/jobs/{handle}", get(api::job))
        .route("/api/v1/jobs/{handle}/cancel", post(api::cancel))
        .route("/api/v1/workers", get(api::workers))
        .route("/api/v1/cluster", get(api::cluster))
        .route("/api/v1/dead", get(api::dead).delete(api::drop_dead))
        .route("/api/v1/dead/retry", post(api::retry_dead))
        .route("/api/v1/dead/{handle}", delete(api::drop_one))
        .route("/api/v1/dead/{handle}/retry", post(api::retry_one))
        .route("/api/v1/schedules", get(api::schedules))
        .route("/api/v1/schedules/{handle}", delete(api::drop_schedule))
        .route("/api/v1/events", get(events::stream))
        .route("/metrics", get(metrics::scrape))
        .route("/", get(assets::index))
        .route("/assets/app.js", get(assets::app_js))
        .route("/assets/app.css", get(assets::app_css));
    api.fallback(gearmand::fallback)
        .method_not_allowed_fallback(not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            fanout::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::middleware,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(app)
}

async fn not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this route does not take that method",
    )
}

/// Serves HTTP on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, ctx: Context, mut stop: watch::Receiver<bool>) {
    let series = Arc::new(series::Series::default());
    let node = ctx.cluster.clone();
    let sampler = tokio::spawn(series::sample_loop(
        ctx.control.clone(),
        series.clone(),
        node,
    ));
    let app = Arc::new(App {
        submitter: submit::Submitter::new(ctx.gearman),
        ctx,
        series,
        started_ms: crate::clock::unix_ms(),
        stop: stop.clone(),
    });
    let incoming = match listener::Incoming::new(
        listener,
        app.ctx.relays.clone(),
        (app.ctx.https.clone()).map(|t| (t, app.ctx.counters.clone())),
    ) {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(error = %e, "the HTTP listener failed");
            sampler.abort();
            return;
        }
    };
    let service = router(app).into_make_service_with_connect_info::<listener::Peer>();
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(incoming, service)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the HTTP listener failed");
    }
    sampler.abort();
}

/// How long a foreground submission waits by default, in seconds.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
