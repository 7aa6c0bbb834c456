//! The HTTP surface of `tmas serve` (axum): routes, API keys, the body limit, request
//! checks, and each request's problems admitted into the one runtime.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::future::join_all;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use tmas_actors::strategy::{CallFailure, CallOutcome};
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest};

use super::calls::{Budget, CancelOnDrop, RequestCalls};
use super::openai::{self, ApiError, ChatCompletionRequest, Usage};
use super::params::{ServedConfig, Target, model_name, target};
use super::pass_through::{self, PassThroughChoice};
use super::runtime::{ServeRuntime, Ticket};
use super::stream;
use crate::config::{Config, MethodName};
use crate::role::Role;

/// What the handlers share.
pub struct App {
    pub served: ServedConfig,
    pub runtime: ServeRuntime,
    /// Accepted API keys (empty: none asked for). Never logged.
    pub keys: ApiKeys,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// The accepted keys, printed as `[redacted]`.
#[derive(Default)]
pub struct ApiKeys(pub Vec<String>);

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} redacted]", self.0.len())
    }
}

impl ApiKeys {
    /// Whether `headers` carry an accepted key (always, when none is configured).
    fn admit(&self, headers: &HeaderMap) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Compared in full whatever the first difference, so timing tells nothing.
        self.0.iter().fold(false, |found, key| {
            let same = key.len() == given.len()
                && key
                    .bytes()
                    .zip(given.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0;
            found | same
        })
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat_completions))
        .with_state(app)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

fn unauthorized() -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        message: "a valid API key is needed: send `Authorization: Bearer KEY`".into(),
        kind: "authentication_error",
        param: None,
        code: Some("invalid_api_key"),
    }
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let stats = app.runtime.stats().snapshot();
    let (status, body) = health_reply(
        app.runtime.store_failure().as_deref(),
        json!({
            "problems_open": app.runtime.problems_open(),
            "problems_started": stats.problems_started,
            "calls_outstanding": app.runtime.stats().outstanding_calls(),
        }),
    );
    (status, axum::Json(body)).into_response()
}

/// `/health`'s status and body: `ok`, or `degraded` with HTTP 503 once the request store
/// (`--out`) failed a write. Requests are still answered then, but no longer recorded, and
/// a monitor must be able to see that without reading the log.
fn health_reply(store_failure: Option<&str>, mut counts: Value) -> (StatusCode, Value) {
    let (status, word) = match store_failure {
        None => (StatusCode::OK, "ok"),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "degraded"),
    };
    if let Some(fields) = counts.as_object_mut() {
        fields.insert("status".into(), word.into());
        if let Some(failure) = store_failure {
            fields.insert(
                "store_error".into(),
                format!("the request store cannot be written: {failure}").into(),
            );
        }
    }
    (status, counts)
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    match &app.metrics {
        Some(handle) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => ApiError {
            status: StatusCode::NOT_FOUND,
            message: "metrics are not served by this process".into(),
            kind: "not_found_error",
            param: None,
            code: None,
        }
        .into_response(),
    }
}

/// The model names a request may use: each method over the served model, then the model.
pub fn model_ids(model: &str) -> Vec<String> {
    MethodName::ALL
        .into_iter()
        .map(|m| model_name(m, model))
        .chain(std::iter::once(model.to_string()))
        .collect()
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !app.keys.admit(&headers) {
        return unauthorized().into_response();
    }
    let data: Vec<Value> = model_ids(&app.served.model)
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "tmas"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn chat_completions(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    match answer(app, headers, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// Reads and checks a request, then answers it (all at once, or as a stream).
async fn answer(app: Arc<App>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    if !app.keys.admit(&headers) {
        return Err(unauthorized());
    }
    let limits = &app.served.config.serve;
    let bytes = axum::body::to_bytes(body, limits.max_body_bytes)
        .await
        .map_err(|_| ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "the request body is over serve.max_body_bytes ({} bytes) or could not be read",
                limits.max_body_bytes
            ),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_too_large"),
        })?;
    let request: ChatCompletionRequest = {
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let param = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ApiError::invalid("", format!("invalid request body: not JSON: {inner}"))
            } else if param == "." || param == "?" {
                // A missing field: serde names it in the message.
                ApiError::invalid("", format!("invalid request body: {inner}"))
            } else {
                ApiError::invalid(
                    param.clone(),
                    format!("invalid request body at `{param}`: {inner}"),
                )
            }
        })?
    };
    let question = openai::question(&request.messages).ok_or_else(|| {
        ApiError::invalid(
            "messages",
            "messages: no user message with text (the last user message is the question)",
        )
    })?;
    let choices = request.n.unwrap_or(1);
    if choices == 0 || choices > limits.max_choices {
        return Err(ApiError::invalid(
            "n",
            format!(
                "n: must be within 1..={} (serve.max_choices), got {choices}",
                limits.max_choices
            ),
        ));
    }
    let method = match target(&request.model, &app.served.model) {
        Some(Target::Method(m)) => m,
        Some(Target::Upstream) => {
            return upstream(&app, &request, choices).await;
        }
        None => {
            return Err(ApiError {
                status: StatusCode::NOT_FOUND,
                message: format!(
                    "model `{}` is not served here; GET /v1/models lists {}",
                    request.model,
                    model_ids(&app.served.model).join(", ")
                ),
                kind: "invalid_request_error",
                param: Some("model".into()),
                code: Some("model_not_found"),
            });
        }
    };
    let asked = app
        .served
        .asked(method, request.tmas.as_ref())
        .map_err(|e| ApiError::invalid(e.param, e.message))?;
    let calls = asked.calls_per_choice * u64::from(choices);
    let cap = u64::from(limits.max_calls_per_request);
    if calls > cap {
        return Err(ApiError::invalid(
            "tmas",
            format!(
                "this request would make {calls} model calls ({} per choice × {choices}), over \
                 serve.max_calls_per_request ({cap}): ask for fewer (tmas.n, tmas.m, \
                 tmas.iterations, n)",
                asked.calls_per_choice
            ),
        ));
    }
    let model = model_name(asked.config.method.name, &app.served.model);
    let id = app.runtime.request_id();
    // One trace per request, continuing the caller's when it sends a `traceparent`; each
    // choice's problem span (iterations, agent calls, attempts) is a child of it.
    let span = tracing::info_span!(parent: None, "chat_completion", request = %id, model = %model);
    if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        tmas_observability::span_ext::continue_trace(&span, parent);
    }
    tmas_observability::span_ext::set_attribute(&span, "gen_ai.request.model", model.clone());
    tmas_observability::span_ext::set_attribute(
        &span,
        "tmas.method",
        asked.config.method.name.as_str(),
    );
    let cancel = CancellationToken::new();
    let guard = CancelOnDrop(cancel.clone());
    let budget = Budget::new(cap);
    let (progress_tx, progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tickets = Vec::with_capacity(choices as usize);
    for index in 0..choices {
        let progress = request.stream.then(|| (index, progress_tx.clone()));
        let calls = RequestCalls::new(cancel.clone(), budget.clone(), progress);
        let problem = format!("{id}-c{index}");
        let ticket = app
            .runtime
            .submit(&problem, &question, &asked.config, calls, &span)
            .map_err(|e| ApiError::internal(format!("{e:#}")))?;
        tickets.push(ticket);
    }
    drop(progress_tx);
    tracing::info!(request = %id, %model, choices, "request admitted");
    let meta = stream::Meta {
        id: format!("chatcmpl-{id}"),
        model,
        created: openai::now(),
        config: asked.config,
    };
    if request.stream {
        let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
        return Ok(stream::respond(
            meta,
            tickets,
            progress_rx,
            guard,
            include_usage,
        ));
    }
    let outcomes = whole(tickets).await?;
    drop(guard);
    let mut usage = Usage::default();
    let mut out = Vec::with_capacity(outcomes.len());
    for (index, outcome) in outcomes.iter().enumerate() {
        usage.add(outcome);
        let selected = openai::select(outcome).ok_or_else(|| ApiError::upstream(outcome))?;
        out.push(json!({
            "index": index,
            "message": {"role": "assistant", "content": &*selected.text},
            "finish_reason": openai::finish_reason(&selected),
            "tmas": {"iteration": selected.iteration, "candidate": selected.candidate},
        }));
    }
    Ok(axum::Json(json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": out,
        "usage": usage,
    }))
    .into_response())
}

/// Every choice's outcome, in choice order.
async fn whole(tickets: Vec<Ticket>) -> Result<Vec<crate::method::TmasOutcome>, ApiError> {
    let results = join_all(tickets.into_iter().map(|t| t.result)).await;
    results
        .into_iter()
        .map(|r| match r {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(ApiError::internal(format!("the method failed: {e}"))),
            Err(_) => Err(ApiError::internal(
                "the runtime stopped before answering".into(),
            )),
        })
        .collect()
}

/// The served model itself: the conversation goes to the solution role's endpoints as it
/// is (every message, the system message included), one call per choice.
async fn upstream(
    app: &App,
    request: &ChatCompletionRequest,
    choices: u32,
) -> Result<Response, ApiError> {
    if request.tmas.is_some() {
        return Err(ApiError::invalid(
            "tmas",
            "tmas: the plain model runs no method; ask for METHOD/MODEL (GET /v1/models)",
        ));
    }
    let config: &Config = &app.served.config;
    let messages: Vec<ChatMessage> = request
        .messages
        .iter()
        .map(|m| ChatMessage {
            role: m.role.as_str().into(),
            content: m
                .content
                .as_ref()
                .map(|c| c.text())
                .unwrap_or_default()
                .into(),
        })
        .collect();
    let id = app.runtime.request_id();
    // Each choice is one problem, as a method request's choices are (named alike).
    let keys: Vec<_> = (0..choices)
        .map(|index| pass_through::call_key(&format!("{id}-c{index}")))
        .collect();
    let chat = |index: u32| ChatRequest {
        messages: messages.clone(),
        sampling: config.role(Role::Solution).sampling(),
        tags: CallTags {
            role: Role::Solution.as_str().into(),
            problem: keys[index as usize].problem.clone(),
            iteration: 0,
            call: Some(keys[index as usize].to_string().into()),
            affinity: None,
        },
        // A streamed request streams from the endpoint, so its pieces pass through as
        // they come.
        stream: request.stream,
    };
    // With `--out`, each choice is recorded before its call goes out.
    let question = openai::question(&request.messages).unwrap_or_default();
    let mut records: Vec<Option<PassThroughChoice>> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| {
            app.runtime.record().map(|store| {
                PassThroughChoice::admit(
                    store.clone(),
                    key.clone(),
                    &question,
                    &app.served.model,
                    &chat(index as u32),
                )
            })
        })
        .collect();
    let id_text = format!("chatcmpl-{id}");
    if request.stream {
        let include_usage = request
            .stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage);
        return Ok(stream::pass_through(
            id_text,
            request.model.clone(),
            app.runtime.client().clone(),
            (0..choices).map(chat).collect(),
            records,
            include_usage,
        ));
    }
    let calls = (0..choices).map(|index| {
        app.runtime
            .client()
            .chat(Config::client_group(Role::Solution), chat(index))
    });
    let results: Vec<CallOutcome> = join_all(calls)
        .await
        .into_iter()
        .map(|r| r.map_err(CallFailure::from))
        .collect();
    for (record, result) in records.iter_mut().zip(&results) {
        if let Some(record) = record.take() {
            record.ended(result.clone(), None);
        }
    }
    let mut out = Vec::new();
    let (mut prompt, mut completion) = (0u64, 0u64);
    for (index, result) in results.into_iter().enumerate() {
        let response = result.map_err(openai::upstream_call_failure)?;
        prompt += response.usage.prompt_tokens;
        completion += response.usage.completion_tokens;
        out.push(json!({
            "index": index,
            "message": {"role": "assistant", "content": &*response.content},
            "finish_reason": response.finish_reason.as_deref().unwrap_or("stop"),
        }));
    }
    let usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    let id = id_text;
    Ok(axum::Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": openai::now(),
        "model": request.model,
        "choices": out,
        "usage": usage,
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_ok_until_the_store_fails_then_degraded_with_its_error() {
        let (status, body) = health_reply(None, json!({"problems_open": 2}));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"], "ok");
        assert_eq!(body["problems_open"], 2);
        assert!(body.get("store_error").is_none());

        let (status, body) = health_reply(Some("disk I/O error"), json!({"problems_open": 2}));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "degraded");
        assert_eq!(
            body["store_error"],
            "the request store cannot be written: disk I/O error"
        );
        assert_eq!(body["problems_open"], 2);
    }
}
