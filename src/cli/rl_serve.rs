//! `tmas rl-serve --addr 127.0.0.1:PORT`: the rollout scoring of `tmas rl-score` as an HTTP
//! service for training loops (verl's reward function in `integrations/verl/` calls it).
//!
//! - `POST /score` with `{"rollouts": [...], "mode": "hybrid"|"standard" (optional)}` →
//!   `{"mode", "params", "rollouts": [{…, "reward", "advantage"}], "counts"}`, rollouts in
//!   request order; `counts` says how many rewards rest on a fallback (see `rl-score`).
//!   A batch that cannot be scored gets 422 with `{"error": "…"}`.
//! - `GET /health` → `ok`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::rl_score::RewardArgs;
use crate::rl::batch::{RewardMode, Rollout};
use crate::rl::rewards::RewardParams;
use crate::rl::score::Judges;

/// A 16 × 128 batch of 80K-token responses is ~1 GB of text; allow that much.
const MAX_BODY_BYTES: usize = 2 << 30;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8799")]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub reward: RewardArgs,
}

/// One scoring request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreRequest {
    pub rollouts: Vec<Rollout>,
    /// Overrides the server's `--mode` for this batch.
    #[serde(default)]
    pub mode: Option<RewardMode>,
}

struct Service {
    judges: Judges,
    mode: RewardMode,
    params: RewardParams,
    batches: AtomicU64,
}

/// The service's routes (public for tests that serve it in-process).
pub fn router(judges: Judges, mode: RewardMode, params: RewardParams) -> Router {
    let service = Arc::new(Service {
        judges,
        mode,
        params,
        batches: AtomicU64::new(0),
    });
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/score", post(score))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(service)
}

async fn score(State(service): State<Arc<Service>>, Json(request): Json<ScoreRequest>) -> Response {
    let n = service.batches.fetch_add(1, Ordering::Relaxed);
    let mode = request.mode.unwrap_or(service.mode);
    let batch = format!("serve-{n}");
    match service
        .judges
        .score(&request.rollouts, mode, &service.params, &batch)
        .await
    {
        Ok(scored) => {
            if scored.counts.degraded() {
                tracing::warn!(%batch, counts = ?scored.counts, "some rewards rest on a fallback");
            }
            Json(scored).into_response()
        }
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(serde_json::json!({ "error": format!("{e:#}") })),
        )
            .into_response(),
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let params = args.reward.params()?;
    let (judges, session) = args.reward.judges().await?;
    let served = serve(args.addr, judges, args.reward.mode, params).await;
    if let Some(session) = session {
        session.shutdown().await;
    }
    served.map(|()| ExitCode::SUCCESS)
}

async fn serve(
    addr: SocketAddr,
    judges: Judges,
    mode: RewardMode,
    params: RewardParams,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    println!(
        "tmas rl-serve listening on http://{local} ({} rewards)",
        mode.as_str()
    );
    axum::serve(listener, router(judges, mode, params))
        .with_graceful_shutdown(super::shutdown_signal())
        .await
        .context("serving")
}
