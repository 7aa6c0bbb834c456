//! What the model client needs to know about endpoints and groups.
//!
//! These are plain runtime settings; `tmas`'s config layer (TOML, env, CLI) resolves its
//! own schema into them. Keys are resolved from the environment by the caller and held in
//! [`ApiKey`], whose `Debug`/`Display` never print the secret.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// An API key. Printing it (Debug or Display) shows `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    pub fn new(secret: impl Into<Arc<str>>) -> Self {
        Self(secret.into())
    }
    /// The secret itself: only for building the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How prompt tokens are counted when fitting `max_tokens` into the context window.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenEstimate {
    /// `ceil(bytes / bytes_per_token)`; conservative for English/LaTeX at 3.0.
    Bytes { bytes_per_token: f32 },
    /// A local HuggingFace `tokenizer.json`.
    Tokenizer { path: std::path::PathBuf },
}

/// [`EndpointSpec::max_connecting`] unless configured: enough handshakes at once that a
/// loopback or LAN server's pool fills in milliseconds, far below a server's listen
/// backlog (uvicorn's default is 2,048).
pub const DEFAULT_MAX_CONNECTING: usize = 64;

/// One OpenAI-compatible endpoint (a vLLM/SGLang server, or the simulator).
#[derive(Debug, Clone)]
pub struct EndpointSpec {
    /// Unique name, used in logs, metrics and errors.
    pub name: Arc<str>,
    /// e.g. `http://127.0.0.1:8000/v1` (the client appends `/chat/completions`).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Hard cap on requests in flight to this endpoint; also sizes the connection pool.
    pub max_in_flight: usize,
    /// Connections being established to this endpoint at once (handshakes in progress);
    /// the others wait their turn, so a run's first burst of calls does not overflow the
    /// server's listen backlog.
    pub max_connecting: usize,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Whole-request timeout for non-streaming calls.
    pub request_timeout: Duration,
    /// For streaming calls: longest silence between chunks before the server is presumed dead.
    pub stream_idle_timeout: Duration,
    /// Model context window in tokens (prompt + output).
    pub context_window: u32,
    pub token_estimate: TokenEstimate,
}

/// Retry, breaker and outage settings shared by all endpoints.
#[derive(Debug, Clone)]
pub struct ResiliencePolicy {
    /// Attempts per call for connection failures, interrupted generations, 408 and 5xx
    /// other than 503 (first try included). Overload answers (429, 503) are bounded by
    /// `outage_budget` in time instead, timeouts by `max_timeout_attempts`.
    pub max_attempts: u32,
    /// Attempts per call that may end in a timeout: a slow generation gets its own budget.
    pub max_timeout_attempts: u32,
    /// Each timed-out attempt's successor waits this many times longer (request timeout,
    /// or the stream idle timeout), so a long generation can still finish; 1 = no growth.
    pub timeout_growth: f64,
    /// Attempts for a malformed or empty body (its own, smaller budget).
    pub max_malformed_attempts: u32,
    /// Crashes of its endpoints a request may be in flight at, each while the endpoint
    /// answered other calls, before it is suspected of causing them and stopped; 0: never.
    /// (Crashes are otherwise the endpoint's, bounded by `outage_budget` in time.)
    pub suspect_after_crashes: u32,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Consecutive connection failures (refused or reset) that open an
    /// endpoint's circuit breaker.
    pub breaker_failures: u32,
    /// The breaker also opens when `breaker_failure_ratio` of the last `breaker_window`
    /// attempts failed (any failure but overload and the request's own 4xx), once at
    /// least `breaker_min_calls` are in the window.
    pub breaker_window: usize,
    pub breaker_min_calls: usize,
    pub breaker_failure_ratio: f64,
    /// Floor of each endpoint's effective concurrency limit (lowered on overload, raised on
    /// success, never above the endpoint's `max_in_flight`).
    pub min_in_flight: usize,
    /// How that limit moves: AIMD on overload answers, or also on queueing delay.
    pub limit: super::limit::LimitAlgorithm,
    /// Interval between health probes of a down endpoint.
    pub probe_interval: Duration,
    /// Successful probes needed to re-admit it.
    pub probe_successes: u32,
    /// How long a call waits while every endpoint of its group is down.
    pub outage_budget: Duration,
    /// Tokens kept free between prompt + max_tokens and the context window.
    pub context_margin: u32,
    /// Consecutive permanent errors (400, 401, 403, 404, 422) from one endpoint that stop
    /// the run; 0: never.
    pub permanent_error_limit: u32,
}

impl Default for ResiliencePolicy {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            max_timeout_attempts: 4,
            timeout_growth: 2.0,
            max_malformed_attempts: 4,
            suspect_after_crashes: 16,
            backoff_min: Duration::from_millis(200),
            backoff_max: Duration::from_secs(30),
            breaker_failures: 5,
            breaker_window: 50,
            breaker_min_calls: 20,
            breaker_failure_ratio: 0.5,
            min_in_flight: 1,
            limit: super::limit::LimitAlgorithm::Aimd,
            probe_interval: Duration::from_secs(2),
            probe_successes: 2,
            outage_budget: Duration::from_secs(30 * 60),
            context_margin: 256,
            permanent_error_limit: 5,
        }
    }
}

/// How a group picks the endpoint for a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// The healthy endpoint with the fewest calls sent or queued.
    #[default]
    LeastLoad,
    /// Calls of one problem prefer one endpoint (bounded-load rendezvous hashing on the
    /// problem id, load bound 1.25 × the group's mean), so the prompts they share — a
    /// problem's question and rollout context, a candidate's verifications — hit that
    /// server's prefix cache; least-load when that endpoint is down or saturated.
    PrefixAffinity,
}

/// Everything the model client needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub endpoints: Vec<EndpointSpec>,
    /// Group name -> endpoint names.
    pub groups: Vec<(Arc<str>, Vec<Arc<str>>)>,
    /// Group name -> routing policy; groups not listed route by least load.
    pub routing: Vec<(Arc<str>, Routing)>,
    /// Cap on calls in flight across all endpoints.
    pub global_max_in_flight: usize,
    /// Optional cap on requests started per minute across all endpoints.
    pub global_requests_per_minute: Option<u32>,
    /// Optional cap on tokens (estimated prompt + `max_tokens`) per minute across all endpoints.
    pub global_tokens_per_minute: Option<u32>,
    pub policy: ResiliencePolicy,
}
