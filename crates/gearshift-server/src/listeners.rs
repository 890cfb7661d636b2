//! Binding the Gearman, TLS and HTTP listen addresses before a server runs
//! (a cluster node keeps them across roles).

use tokio::net::TcpListener;

use crate::{ServerConfig, ServerError};

/// Binds every listen address, and the HTTP address if configured (the
/// Gearman server starts without HTTP if that fails: the log says why).
pub async fn bind_listeners(
    cfg: &ServerConfig,
) -> Result<(Vec<TcpListener>, Option<TcpListener>), ServerError> {
    let mut listeners = Vec::new();
    for &addr in &cfg.listen {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        listeners.push(l);
    }
    let http = match &cfg.http {
        Some(h) => match TcpListener::bind(h.addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!(
                    "cannot listen for HTTP on {}: {e}; serving without HTTP",
                    h.addr
                );
                None
            }
        },
        None => None,
    };
    Ok((listeners, http))
}

/// Binds the `--ssl` listen addresses.
pub(crate) async fn bind_tls_listeners(
    cfg: &ServerConfig,
) -> Result<Vec<TcpListener>, ServerError> {
    if cfg.tls.is_none() && !cfg.tls_listen.is_empty() {
        return Err(ServerError::Config(
            "TLS listen addresses need a certificate and key".into(),
        ));
    }
    let mut listeners = Vec::new();
    for &addr in &cfg.tls_listen {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        listeners.push(l);
    }
    Ok(listeners)
}
