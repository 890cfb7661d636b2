//! The dashboard: three files embedded in the binary.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../../assets/dashboard/index.html");
const APP_JS: &str = include_str!("../../assets/dashboard/app.js");
const APP_CSS: &str = include_str!("../../assets/dashboard/app.css");

/// The files change only with the binary; an hour keeps reloads cheap
/// without pinning an old dashboard for long after an upgrade.
const CACHE: &str = "public, max-age=3600";

fn asset(body: &'static str, kind: &'static str, cache: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, cache)],
        body,
    )
        .into_response()
}

/// `GET /`.
pub async fn index() -> Response {
    // The page names the assets; it is revalidated so an upgrade shows at once.
    asset(INDEX, "text/html; charset=utf-8", "no-cache")
}

/// `GET /assets/app.js`.
pub async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8", CACHE)
}

/// `GET /assets/app.css`.
pub async fn app_css() -> Response {
    asset(APP_CSS, "text/css; charset=utf-8", CACHE)
}
