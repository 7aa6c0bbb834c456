//! [`SimServer`]: binds a loopback listener, serves the routes, and runs its own accept
//! loop (hyper directly, not `axum::serve`) so a fault can close a connection without
//! writing any response, the way a crashed inference server does.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::handler::{self, DropConnection, SimState, error_response};
use super::options::{FaultRates, SimOptions};
use super::stats::{SimStats, prometheus};

/// Largest request body accepted (prompts of several hundred KB are normal).
const MAX_BODY_BYTES: usize = 256 << 20;

/// A running simulator. Dropping it stops serving too; [`SimServer::shutdown`] also
/// waits for the accept loop to end.
pub struct SimServer {
    addr: SocketAddr,
    state: Arc<SimState>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Connections the kernel queues before the accept loop takes them (the kernel caps it at
/// `net.core.somaxconn`). At 10,000 calls in flight a client opens thousands of
/// connections at once; with tokio's default of 1,024 the queue overflowed and, with SYN
/// cookies, some connections were reset after the client had sent its request.
const LISTEN_BACKLOG: u32 = 16_384;

/// A listener on `addr` (address reuse on, so a restarted simulator takes its port back).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

impl SimServer {
    /// Validates `opts`, binds `addr` (use `127.0.0.1:0` for a free port) and starts
    /// serving. `dataset` gives reference answers by problem id; problems not in it get
    /// an answer derived from their id.
    pub async fn start(
        opts: SimOptions,
        addr: SocketAddr,
        dataset: Option<Vec<(String, String)>>,
    ) -> anyhow::Result<SimServer> {
        opts.validate()?;
        let listener =
            listen(addr).with_context(|| format!("simulator cannot listen on {addr}"))?;
        let addr = listener
            .local_addr()
            .context("simulator listener has no local address")?;
        let state = Arc::new(SimState::new(opts, dataset));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(accept_loop(listener, router(state.clone()), cancel.clone()));
        tracing::info!(%addr, "simulator listening");
        Ok(SimServer {
            addr,
            state,
            cancel,
            task: Some(task),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// e.g. `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn stats(&self) -> SimStats {
        self.state.snapshot()
    }

    /// Zeroes the counters (as `POST /sim/reset`).
    pub fn reset(&self) {
        reset_state(&self.state);
    }

    /// Replaces the fault settings (as `POST /sim/faults`).
    pub fn set_faults(&self, faults: FaultRates) -> anyhow::Result<()> {
        faults.validate()?;
        self.state.set_faults(faults);
        Ok(())
    }

    /// Stops accepting, closes every connection (hung requests included) and waits for
    /// the accept loop to finish.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn reset_state(state: &SimState) {
    state.counters.reset();
    if let Some(model) = &state.server_model {
        model.reset();
    }
    state
        .occurrences
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    state
        .api_requests
        .store(0, std::sync::atomic::Ordering::Relaxed);
}

fn router(state: Arc<SimState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(handler::chat))
        .route("/v1/embeddings", post(super::embeddings::embeddings))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/sim/stats", get(stats))
        .route("/sim/reset", post(reset))
        .route("/sim/faults", get(get_faults).post(set_faults))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn accept_loop(listener: TcpListener, router: Router, cancel: CancellationToken) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(serve_connection(stream, router.clone()));
                }
                Err(e) => {
                    // Usually EMFILE under a flood of connections: back off briefly.
                    tracing::warn!(error = %e, "simulator accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

/// The error a service returns to make hyper close the connection without a response.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

async fn serve_connection(stream: TcpStream, router: Router) {
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let router = router.clone();
        async move {
            let resp = match router.oneshot(req.map(axum::body::Body::new)).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if resp.extensions().get::<DropConnection>().is_some() {
                Err(Dropped)
            } else {
                Ok(resp)
            }
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "simulator connection ended");
    }
}

async fn models(State(st): State<Arc<SimState>>) -> Response {
    let rates = st.fault_rates();
    if rates.down {
        return error_response(
            &st.counters,
            StatusCode::SERVICE_UNAVAILABLE,
            "simulated outage",
            Some(st.opts.retry_after_secs),
        );
    }
    if let Some(error) = handler::first_requests_error(&st, &rates) {
        return error;
    }
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{ "id": st.opts.model, "object": "model", "created": 0, "owned_by": "tmas-sim" }]
    }))
    .into_response()
}

async fn health(State(st): State<Arc<SimState>>) -> Response {
    if st.fault_rates().down {
        return (StatusCode::SERVICE_UNAVAILABLE, "down\n").into_response();
    }
    (StatusCode::OK, "ok\n").into_response()
}

async fn metrics(State(st): State<Arc<SimState>>) -> Response {
    let text = prometheus(&st.counters.snapshot());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn stats(State(st): State<Arc<SimState>>) -> axum::Json<SimStats> {
    axum::Json(st.snapshot())
}

async fn reset(State(st): State<Arc<SimState>>) -> StatusCode {
    reset_state(&st);
    StatusCode::NO_CONTENT
}

async fn get_faults(State(st): State<Arc<SimState>>) -> axum::Json<FaultRates> {
    axum::Json((*st.fault_rates()).clone())
}

async fn set_faults(State(st): State<Arc<SimState>>, body: axum::body::Bytes) -> Response {
    let faults: FaultRates = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("fault settings: {e}\n")).into_response();
        }
    };
    if let Err(e) = faults.validate() {
        return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
    }
    st.set_faults(faults.clone());
    axum::Json(faults).into_response()
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found (the simulator serves /v1/chat/completions, /v1/models, /health, /metrics, /sim/*)\n")
        .into_response()
}
