//! What one HTTP attempt reports: its span (OpenTelemetry GenAI conventions), the W3C
//! `traceparent` header that lets the inference server join the trace, and metrics.
//!
//! Span: `chat {model}` (kind client) with `gen_ai.operation.name = chat`,
//! `gen_ai.request.{model,temperature,top_p,max_tokens}`, `gen_ai.usage.{input,output}_tokens`,
//! `gen_ai.response.finish_reasons`, `server.{address,port}`, `http.response.status_code`,
//! `error.type`, plus `tmas.endpoint`, `tmas.role`, `tmas.retry` (0 for the first try).
//! An embeddings attempt's span is `embeddings {model}` with `gen_ai.operation.name =
//! embeddings`, `gen_ai.usage.input_tokens`, `tmas.embedding.inputs` and, on success,
//! `gen_ai.embeddings.dimension.count`.
//! Events: `retry` (the delay before the next attempt), `circuit_breaker.open`,
//! `concurrency_limit.change` (`tmas.limit.from`, `tmas.limit.to`, `tmas.limit.latency_ratio`:
//! the limit moved).
//!
//! Metrics (no-ops until a recorder is installed): `tmas_request_duration_seconds`
//! {role, endpoint, outcome}, `tmas_request_errors_total` {endpoint, kind},
//! `tmas_request_retries_total` {role, endpoint}, `tmas_tokens_input_total` /
//! `tmas_tokens_output_total` {role}, `tmas_endpoint_concurrency_limit` {endpoint} (gauge:
//! the effective limit, from the endpoint's creation), `tmas_endpoint_latency_ratio`
//! {endpoint} (gauge, gradient limit: the last window's latency over its unqueued part),
//! `tmas_endpoint_overloads_total` {endpoint} (429/503 answers).

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tmas_observability::span_ext::{self, KeyValue};
use tracing::field::Empty;

use super::body::Completion;
use super::endpoint::{Endpoint, FailureEffects};
use super::error::ClientError;
use super::limit::LimitChange;
use crate::wire::{ChatRequest, EmbeddingRequest, Usage};

/// `chat {model}`, formatted only if a subscriber records the field.
struct ChatName<'a>(&'a str);

impl fmt::Display for ChatName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chat {}", self.0)
    }
}

/// The span of one HTTP attempt; its parent is the current span (the agent call).
///
/// Without an exporter the span only gives log lines their context: it is a DEBUG span
/// (not created at the default INFO log level, as the agent call's span; see
/// `coordinator::spans::call_span`) with just the fields a reader of the log needs, not
/// the 17 OpenTelemetry ones the log layer would format into text. Recording a field the
/// lean span lacks does nothing.
pub(crate) fn attempt_span(
    ep: &Endpoint,
    request: &ChatRequest,
    max_tokens: u32,
    attempt: u32,
) -> tracing::Span {
    if !span_ext::exporting() {
        return tracing::debug_span!(
            "chat",
            tmas.endpoint = %ep.name(),
            tmas.role = %request.tags.role,
            tmas.retry = attempt.saturating_sub(1),
            error.type = Empty,
        );
    }
    tracing::info_span!(
        "chat",
        otel.name = %ChatName(&ep.spec.model),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.request.model = %ep.spec.model,
        // Numbers as i64 and f64: the exporter turns unsigned fields into strings.
        gen_ai.request.temperature = span_ext::decimal(request.sampling.temperature),
        gen_ai.request.top_p = span_ext::decimal(request.sampling.top_p),
        gen_ai.request.max_tokens = i64::from(max_tokens),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        server.address = %ep.host,
        server.port = i64::from(ep.port),
        http.response.status_code = Empty,
        error.type = Empty,
        tmas.endpoint = %ep.name(),
        tmas.role = %request.tags.role,
        tmas.retry = i64::from(attempt.saturating_sub(1)),
    )
}

/// `embeddings {model}`, formatted only if a subscriber records the field.
struct EmbeddingsName<'a>(&'a str);

impl fmt::Display for EmbeddingsName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "embeddings {}", self.0)
    }
}

/// The span of one embeddings attempt (lean without an exporter, as [`attempt_span`]).
pub(crate) fn embeddings_span(
    ep: &Endpoint,
    request: &EmbeddingRequest,
    attempt: u32,
) -> tracing::Span {
    if !span_ext::exporting() {
        return tracing::debug_span!(
            "embeddings",
            tmas.endpoint = %ep.name(),
            tmas.role = %request.tags.role,
            tmas.retry = attempt.saturating_sub(1),
            error.type = Empty,
        );
    }
    tracing::info_span!(
        "embeddings",
        otel.name = %EmbeddingsName(&ep.spec.model),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "embeddings",
        gen_ai.request.model = %ep.spec.model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.embeddings.dimension.count = Empty,
        server.address = %ep.host,
        server.port = i64::from(ep.port),
        http.response.status_code = Empty,
        error.type = Empty,
        tmas.endpoint = %ep.name(),
        tmas.role = %request.tags.role,
        tmas.retry = i64::from(attempt.saturating_sub(1)),
        tmas.embedding.inputs = i64::try_from(request.inputs.len()).unwrap_or(i64::MAX),
    )
}

/// A successful embeddings attempt: usage and dimension on the span, latency and input
/// tokens counted (an embeddings call has no output tokens).
pub(crate) fn on_embeddings_success(
    span: &tracing::Span,
    ep: &Endpoint,
    request: &EmbeddingRequest,
    usage: Usage,
    dimensions: usize,
    elapsed: Duration,
) {
    ep.input_tokens
        .fetch_add(usage.prompt_tokens, Ordering::Relaxed);
    span.record(
        "gen_ai.usage.input_tokens",
        span_ext::int(usage.prompt_tokens),
    );
    span.record(
        "gen_ai.embeddings.dimension.count",
        i64::try_from(dimensions).unwrap_or(i64::MAX),
    );
    span.record("http.response.status_code", 200i64);
    let role = request.tags.role.to_string();
    metrics::histogram!("tmas_request_duration_seconds",
        "role" => role.clone(), "endpoint" => ep.name().to_string(), "outcome" => "ok")
    .record(elapsed.as_secs_f64());
    metrics::counter!("tmas_tokens_input_total", "role" => role).increment(usage.prompt_tokens);
}

/// Adds `traceparent` for `span` when spans are exported (the server's own spans then
/// become children of the attempt).
pub(crate) fn inject_traceparent(span: &tracing::Span, headers: &mut HeaderMap) {
    let Some(tp) = span_ext::traceparent(span) else {
        return;
    };
    if let Ok(value) = HeaderValue::from_str(&tp) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
}

/// A successful attempt: usage and finish reason on the span, latency and tokens counted.
pub(crate) fn on_success(
    span: &tracing::Span,
    ep: &Endpoint,
    request: &ChatRequest,
    c: &Completion,
    elapsed: Duration,
) {
    ep.input_tokens
        .fetch_add(c.usage.prompt_tokens, Ordering::Relaxed);
    ep.output_tokens
        .fetch_add(c.usage.completion_tokens, Ordering::Relaxed);
    span.record(
        "gen_ai.usage.input_tokens",
        span_ext::int(c.usage.prompt_tokens),
    );
    span.record(
        "gen_ai.usage.output_tokens",
        span_ext::int(c.usage.completion_tokens),
    );
    span.record("http.response.status_code", 200i64);
    if let Some(reason) = &c.finish_reason {
        span_ext::set_attribute(
            span,
            "gen_ai.response.finish_reasons",
            span_ext::string_array([reason.clone()]),
        );
    }
    let role = request.tags.role.to_string();
    metrics::histogram!("tmas_request_duration_seconds",
        "role" => role.clone(), "endpoint" => ep.name().to_string(), "outcome" => "ok")
    .record(elapsed.as_secs_f64());
    metrics::counter!("tmas_tokens_input_total", "role" => role.clone())
        .increment(c.usage.prompt_tokens);
    metrics::counter!("tmas_tokens_output_total", "role" => role)
        .increment(c.usage.completion_tokens);
}

/// Tokens the client estimated for a call whose server sent no usage: counted like
/// reported ones, so the per-endpoint and per-role totals never take the call as free.
pub(crate) fn on_estimated_usage(ep: &Endpoint, request: &ChatRequest, usage: &Usage) {
    ep.input_tokens
        .fetch_add(usage.prompt_tokens, Ordering::Relaxed);
    ep.output_tokens
        .fetch_add(usage.completion_tokens, Ordering::Relaxed);
    let role = request.tags.role.to_string();
    metrics::counter!("tmas_tokens_input_total", "role" => role.clone())
        .increment(usage.prompt_tokens);
    metrics::counter!("tmas_tokens_output_total", "role" => role)
        .increment(usage.completion_tokens);
}

/// A new endpoint's limit: the gauge starts there (and a second client in the same process
/// does not show the first one's last value until its own limit first moves).
pub(crate) fn initial_limit(ep: &Endpoint) {
    metrics::gauge!("tmas_endpoint_concurrency_limit", "endpoint" => ep.name().to_string())
        .set(ep.limit.current() as f64);
}

/// The endpoint's effective concurrency limit moved: the gauge follows.
pub(crate) fn record_limit(ep: &Endpoint, change: LimitChange) {
    metrics::gauge!("tmas_endpoint_concurrency_limit", "endpoint" => ep.name().to_string())
        .set(change.to as f64);
    if let Some(ratio) = change.latency_ratio {
        metrics::gauge!("tmas_endpoint_latency_ratio", "endpoint" => ep.name().to_string())
            .set(ratio);
    }
    tracing::debug!(endpoint = %ep.name(), from = change.from, to = change.to, "concurrency limit changed");
}

/// The limit moved because of this attempt: an event on its span, and the gauge.
pub(crate) fn on_limit_change(span: &tracing::Span, ep: &Endpoint, change: LimitChange) {
    record_limit(ep, change);
    span_ext::add_event(
        span,
        "concurrency_limit.change",
        vec![
            KeyValue::new("tmas.endpoint", ep.name().to_string()),
            KeyValue::new(
                "tmas.limit.from",
                i64::try_from(change.from).unwrap_or(i64::MAX),
            ),
            KeyValue::new(
                "tmas.limit.to",
                i64::try_from(change.to).unwrap_or(i64::MAX),
            ),
            KeyValue::new(
                "tmas.limit.latency_ratio",
                change.latency_ratio.unwrap_or(f64::NAN),
            ),
        ],
    );
}

/// A failed attempt: error type (and HTTP status) on the span, the breaker opening and a
/// limit change as events, latency and the error counted.
pub(crate) fn on_failure(
    span: &tracing::Span,
    ep: &Endpoint,
    request: &ChatRequest,
    error: &ClientError,
    elapsed: Duration,
    effects: FailureEffects,
) {
    on_role_failure(span, ep, &request.tags.role, error, elapsed, effects);
}

/// [`on_failure`] of an attempt of any kind of call, by the call's role.
pub(crate) fn on_role_failure(
    span: &tracing::Span,
    ep: &Endpoint,
    role: &str,
    error: &ClientError,
    elapsed: Duration,
    effects: FailureEffects,
) {
    span.record("error.type", error.kind().as_str());
    span.record("otel.status_code", "ERROR");
    if let ClientError::Status { status, .. } = error {
        span.record("http.response.status_code", i64::from(*status));
    }
    if effects.opened {
        span_ext::add_event(
            span,
            "circuit_breaker.open",
            vec![KeyValue::new("tmas.endpoint", ep.name().to_string())],
        );
    }
    if let Some(change) = effects.limit {
        on_limit_change(span, ep, change);
    }
    if super::breaker::Signal::of(error) == super::breaker::Signal::Overload {
        metrics::counter!("tmas_endpoint_overloads_total", "endpoint" => ep.name().to_string())
            .increment(1);
    }
    metrics::histogram!("tmas_request_duration_seconds",
        "role" => role.to_string(), "endpoint" => ep.name().to_string(),
        "outcome" => "error")
    .record(elapsed.as_secs_f64());
    metrics::counter!("tmas_request_errors_total",
        "endpoint" => ep.name().to_string(), "kind" => error.kind().as_str())
    .increment(1);
}

/// The call will try again after `delay`: an event on the failed attempt's span.
pub(crate) fn on_retry(span: &tracing::Span, error: &ClientError, delay: Duration) {
    span_ext::add_event(
        span,
        "retry",
        vec![
            KeyValue::new("error.type", error.kind().as_str()),
            KeyValue::new(
                "tmas.retry.delay_ms",
                i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
            ),
        ],
    );
}

/// Counts a retry attempt as it starts.
pub(crate) fn count_retry(ep: &Endpoint, request: &ChatRequest) {
    count_role_retry(ep, &request.tags.role);
}

/// [`count_retry`] of any kind of call, by the call's role.
pub(crate) fn count_role_retry(ep: &Endpoint, role: &str) {
    metrics::counter!("tmas_request_retries_total",
        "role" => role.to_string(), "endpoint" => ep.name().to_string())
    .increment(1);
}
