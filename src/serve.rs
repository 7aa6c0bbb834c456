//! `tmas serve`: the methods as an OpenAI-compatible model (`docs/serve.md`).
//!
//! One long-lived runtime ([`runtime`]) carries every request: each choice of a request is
//! one problem admitted into it, so concurrent requests share the in-flight caps, routing,
//! limits and fair call order of the served config. Each request owns its cancellation
//! value ([`calls`]): its client going away (the response future or stream dropped)
//! cancels that request's calls only.
//!
//! - [`params`]: the method and its keys from the model name and the `tmas` extension,
//!   checked by the config loader per request.
//! - [`calls`]: the runtime's call executor: cancellation, call budget, progress.
//! - [`runtime`]: the runtime and each request's admission.
//! - [`openai`]: the wire format, the answer (the method's final selection) and usage.
//! - [`http`]: routes, API keys, limits; [`stream`]: `stream: true` as server-sent events.
//! - [`store`]: every request kept in a run store (`--out`); [`pass_through`]: a
//!   plain-model choice as a problem of that store.

pub(crate) mod calls;
pub(crate) mod http;
pub(crate) mod openai;
pub(crate) mod params;
pub(crate) mod pass_through;
pub(crate) mod runtime;
pub(crate) mod store;
pub(crate) mod stream;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use crate::config::{BadInput, CliOverride, load_str_in};
use crate::role::Role;
use http::{ApiKeys, App};
use params::ServedConfig;
use runtime::ServeRuntime;

/// What `tmas serve` serves and where.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub config: PathBuf,
    pub overrides: Vec<CliOverride>,
    pub addr: SocketAddr,
    pub env: Vec<(String, String)>,
    /// Keep every request in a run store in this directory (new or empty).
    pub out: Option<PathBuf>,
}

/// A server started: its address, and the task serving until `stop` completes.
pub struct Started {
    pub addr: SocketAddr,
    /// The model names requests may use.
    pub models: Vec<String>,
    /// How many API keys are accepted (0: none asked for).
    pub api_keys: usize,
    pub served: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Loads the config, starts the runtime and binds `options.addr`; serves until `stop`
/// completes, then lets the requests in progress finish and stops the runtime.
pub async fn start(
    options: ServeOptions,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Started> {
    let served = load(&options)?;
    let keys = api_keys(&served)?;
    // The endpoints' key variables are read before anything is created, as `tmas run`
    // reads them: a missing one leaves no request store behind.
    served.config.client_config(&options.env)?;
    let (models, api_keys) = (http::model_ids(&served.model), keys.0.len());
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| BadInput(format!("cannot listen on {}: {e}", options.addr)))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    crate::engine::observe::start_export(&served.config)?;
    let prompts = Arc::new(
        crate::method::PromptSet::load(&served.config.prompt_overrides())
            .context("loading prompt templates")?,
    );
    let record = match &options.out {
        Some(out) => Some(Arc::new(
            store::ServeStore::create(out, &served.config, &served.label, &prompts).await?,
        )),
        None => None,
    };
    let mut config = served.config.clone();
    let runtime =
        match ServeRuntime::start(&mut config, &options.env, prompts, record.clone()).await {
            Ok(runtime) => runtime,
            Err(e) => return Err(not_started(e, record.as_deref()).await),
        };
    let metrics = match tmas_observability::prometheus::recorder() {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::warn!("no /metrics: {e}");
            None
        }
    };
    let app = Arc::new(App {
        served,
        runtime,
        keys,
        metrics,
    });
    let router = http::router(app.clone());
    let served = tokio::spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(stop)
            .await
            .context("serving");
        let stopped = match Arc::try_unwrap(app) {
            Ok(app) => app.runtime.shutdown().await,
            Err(_) => {
                tracing::warn!("requests still hold the runtime; not waiting for them");
                Ok(())
            }
        };
        crate::engine::observe::flush_export().await;
        result.and(stopped)
    });
    Ok(Started {
        addr,
        models,
        api_keys,
        served,
    })
}

/// The start-up failed with `error` after the request store was created: the store is
/// closed as stopped, naming the cause, so it never claims a server that did not run.
async fn not_started(error: anyhow::Error, record: Option<&store::ServeStore>) -> anyhow::Error {
    let Some(record) = record else {
        return error;
    };
    let cause = tmas_observability::error_text(error.as_ref());
    let dir = record.store().path().display().to_string();
    match record
        .close_not_started(format!("the server did not start: {cause}"))
        .await
    {
        Ok(()) => error.context(format!(
            "the server did not start; the request store {dir} is marked stopped"
        )),
        Err(closing) => error.context(format!(
            "the server did not start, and the request store {dir} could not be marked \
             stopped: {closing:#}"
        )),
    }
}

/// The served config: the file's text, loaded with the server's environment and flags.
fn load(options: &ServeOptions) -> anyhow::Result<ServedConfig> {
    let label = options.config.display().to_string();
    let text = std::fs::read_to_string(&options.config)
        .map_err(|e| BadInput(format!("{label}: cannot read the config file: {e}")))?;
    let base = options
        .config
        .parent()
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let config = load_str_in(&text, &label, &base, &options.env, &options.overrides)?;
    let model = config
        .role_endpoints(Role::Solution)
        .first()
        .and_then(|e| config.endpoints.get(e))
        .map(|e| e.model.clone())
        .ok_or_else(|| BadInput(format!("{label}: the solution role has no endpoint")))?;
    Ok(ServedConfig {
        text,
        label,
        base,
        env: options.env.clone(),
        overrides: options.overrides.clone(),
        config,
        model,
    })
}

/// The accepted API keys, read from the variables `serve.api_key_envs` names.
fn api_keys(served: &ServedConfig) -> anyhow::Result<ApiKeys> {
    let mut keys = Vec::new();
    for name in &served.config.serve.api_key_envs {
        match served.env.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) if !v.is_empty() => keys.push(v.clone()),
            _ => {
                return Err(BadInput(format!(
                    "{}: serve.api_key_envs names {name}, which is not set (or empty) in the \
                     environment",
                    served.label
                ))
                .into());
            }
        }
    }
    Ok(ApiKeys(keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::Config;
    use crate::method::PromptSet;

    #[tokio::test]
    async fn a_start_that_fails_after_the_store_exists_closes_it_as_stopped_naming_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("served");
        let config = Config::default();
        let prompts = PromptSet::load(&config.prompt_overrides()).unwrap();
        let record = store::ServeStore::create(&out, &config, "test.toml", &prompts)
            .await
            .unwrap();
        let error = not_started(anyhow::anyhow!("the runtime broke"), Some(&record)).await;
        let said = format!("{error:#}");
        assert!(
            said.contains("the server did not start")
                && said.contains("is marked stopped")
                && said.contains("the runtime broke"),
            "{said}"
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
        assert_eq!(summary["status"], "stopped", "{summary}");
        let why = summary["stopped_by"].as_str().unwrap_or_default();
        assert!(
            why.contains("did not start: the runtime broke"),
            "{summary}"
        );
        let conn = rusqlite::Connection::open(out.join(crate::store::DB_FILE)).unwrap();
        let status: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'status'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(status, "stopped", "never `running`");
    }
}
