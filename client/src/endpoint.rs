//! One endpoint's shared state and a single HTTP attempt against it.
//!
//! The hot path (routing, in-flight accounting, breaker evidence, the AIMD limit) uses
//! only atomics, semaphores and short critical sections held here, so a call costs no
//! actor round-trip; the endpoint's actor
//! ([`super::health`]) owns the slow part: probing a down endpoint and re-admitting it.
//! An embeddings attempt is in `endpoint/embeddings.rs`.

mod embeddings;

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use ractor::ActorRef;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use tokio::sync::watch;

use super::body::{Completion, parse_response};
use super::breaker::{Breaker, BreakerSettings, Signal};
use super::config::{EndpointSpec, ResiliencePolicy};
use super::connect_limit::connect_limit_layer;
use super::error::{ClientError, Interruption, snippet};
use super::limit::{ConcurrencyLimit, LimitChange};
use super::request_body::RequestBody;
use super::sse::StreamError;
use super::tokens::TokenCounter;
/// Bound on reading an error body or a probe.
const SIDE_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Bumped on every health change of any endpoint; waiters re-check their group.
#[derive(Debug)]
pub(crate) struct Health {
    epoch: watch::Sender<u64>,
}

impl Health {
    pub fn new() -> Self {
        Self {
            epoch: watch::Sender::new(0),
        }
    }
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }
    pub fn bump(&self) {
        self.epoch.send_modify(|e| *e = e.wrapping_add(1));
    }
}

/// A failed attempt, with the server's `Retry-After` if it sent one.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub error: ClientError,
    pub retry_after: Option<Duration>,
}

impl From<ClientError> for AttemptError {
    fn from(error: ClientError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

/// Messages of the endpoint's actor ([`super::health::EndpointActor`]). Defined here
/// because calls hold the actor's address in `Endpoint::actor` and send
/// [`EndpointMsg::MarkDown`] themselves; the actor's behaviour is in `health`.
#[derive(Debug)]
pub enum EndpointMsg {
    /// The breaker opened: start probing.
    MarkDown { reason: String },
    /// Timer tick: run one probe.
    Probe,
    /// Result of a probe task.
    ProbeDone(Result<(), String>),
}

/// What a failed attempt did to its endpoint.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FailureEffects {
    /// It opened the breaker.
    pub opened: bool,
    /// It lowered the concurrency limit.
    pub limit: Option<LimitChange>,
}

/// Shared state of one endpoint.
pub(crate) struct Endpoint {
    pub spec: EndpointSpec,
    http: reqwest::Client,
    chat_url: reqwest::Url,
    embeddings_url: reqwest::Url,
    health_url: reqwest::Url,
    models_url: reqwest::Url,
    /// Host and port of `base_url`, for the spans' `server.address` / `server.port`.
    pub host: Arc<str>,
    pub port: u16,
    auth: Option<HeaderValue>,
    pub counter: TokenCounter,
    /// Caps requests in flight at the AIMD limit; its semaphore is what calls queue on.
    pub limit: ConcurrencyLimit,
    pub in_flight: AtomicUsize,
    pub queued: AtomicUsize,
    pub healthy: AtomicBool,
    /// Permanent errors in a row ([`super::permanent`]).
    pub permanent_in_a_row: AtomicU32,
    breaker: Breaker,
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub retries: AtomicU64,
    pub trips: AtomicU64,
    /// Attempts answered (what tells a server that answered others while a request was in
    /// flight from one that never did).
    pub successes: AtomicU64,
    /// Attempts answered 429 or 503, or whose stream the server cut for another request.
    pub overloads: AtomicU64,
    /// Attempts that timed out.
    pub timeouts: AtomicU64,
    /// Tokens of successful attempts (as reported by the server).
    pub input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
    rpm: Option<Limiter>,
    tpm: Option<Limiter>,
    /// The endpoint's actor, told when the breaker opens. Replaced if it is restarted.
    pub actor: Mutex<Option<ActorRef<EndpointMsg>>>,
    health: Arc<Health>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// A per-minute rate limiter that remembers its burst (governor does not expose it).
pub(crate) struct Limiter {
    inner: DefaultDirectRateLimiter,
    burst: NonZeroU32,
}

/// A per-minute limiter, or `None` when unlimited.
pub(crate) fn per_minute(limit: Option<u32>) -> Option<Limiter> {
    let burst = limit.and_then(NonZeroU32::new)?;
    Some(Limiter {
        inner: RateLimiter::direct(Quota::per_minute(burst)),
        burst,
    })
}

/// Wait for `n` cells; a request larger than the whole burst waits for the full burst.
pub(crate) async fn take(limiter: &Option<Limiter>, n: u32) {
    if let Some(l) = limiter {
        let n = NonZeroU32::new(n.clamp(1, l.burst.get())).unwrap_or(NonZeroU32::MIN);
        // Cannot fail: n <= burst.
        let _ = l.inner.until_n_ready(n).await;
    }
}

fn join(base: &str, tail: &str, name: &str) -> Result<reqwest::Url, ClientError> {
    let text = format!("{}/{}", base.trim_end_matches('/'), tail);
    reqwest::Url::parse(&text).map_err(|e| ClientError::Config {
        message: format!("endpoint `{name}`: base_url `{base}` is not a valid URL: {e}"),
    })
}

impl Endpoint {
    pub fn new(
        spec: EndpointSpec,
        counter: TokenCounter,
        policy: &ResiliencePolicy,
        health: Arc<Health>,
    ) -> Result<Self, ClientError> {
        let name = spec.name.clone();
        let config = |message: String| ClientError::Config {
            message: format!("endpoint `{name}`: {message}"),
        };
        let http = reqwest::Client::builder()
            .http1_only()
            .tcp_nodelay(true)
            // Python clients stop at a pool of 100; ours keeps one connection per slot.
            .pool_max_idle_per_host(spec.max_in_flight)
            .connector_layer(connect_limit_layer(
                spec.max_connecting,
                spec.request_timeout.min(SIDE_READ_TIMEOUT),
            ))
            .build()
            .map_err(|e| config(format!("cannot build HTTP client: {e}")))?;
        let chat_url = join(&spec.base_url, "chat/completions", &name)?;
        let embeddings_url = join(&spec.base_url, "embeddings", &name)?;
        let models_url = join(&spec.base_url, "models", &name)?;
        // vLLM/SGLang serve /health at the root, beside /v1.
        let root = spec.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        let health_url = join(root, "health", &name)?;
        let auth = match &spec.api_key {
            Some(key) => {
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                        config("the API key contains characters not allowed in a header".into())
                    })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let host: Arc<str> = chat_url.host_str().unwrap_or_default().into();
        let port = chat_url.port_or_known_default().unwrap_or(0);
        Ok(Self {
            host,
            port,
            limit: ConcurrencyLimit::with(policy.limit, spec.max_in_flight, policy.min_in_flight),
            rpm: per_minute(spec.requests_per_minute),
            tpm: per_minute(spec.tokens_per_minute),
            spec,
            http,
            chat_url,
            embeddings_url,
            health_url,
            models_url,
            auth,
            counter,
            in_flight: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            healthy: AtomicBool::new(true),
            permanent_in_a_row: AtomicU32::new(0),
            breaker: Breaker::new(BreakerSettings {
                consecutive_hard: policy.breaker_failures,
                window: policy.breaker_window,
                min_calls: policy.breaker_min_calls,
                failure_ratio: policy.breaker_failure_ratio,
            }),
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            trips: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            overloads: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            input_tokens: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            actor: Mutex::new(None),
            health,
        })
    }

    pub fn name(&self) -> &Arc<str> {
        &self.spec.name
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// Load used for routing: requests sent plus requests waiting for a slot here.
    pub fn load(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed) + self.queued.load(Ordering::Relaxed)
    }

    /// Wait for this endpoint's rate limits (requests, then estimated tokens).
    pub async fn rate_limit(&self, tokens: u32) {
        take(&self.rpm, 1).await;
        take(&self.tpm, tokens).await;
    }

    /// A successful attempt: evidence of health, and one step up the AIMD limit.
    /// A successful attempt that took `latency` (the gradient limit's signal).
    pub fn record_success(&self, latency: Duration) -> Option<LimitChange> {
        self.successes.fetch_add(1, Ordering::Relaxed);
        self.breaker.record(Signal::Success);
        self.limit.on_success(latency)
    }

    /// A failed attempt sent at `sent`: overload (429, 503, a stream cut for another
    /// request) lowers the limit, evidence of ill health may open the breaker (marking the
    /// endpoint down and telling its actor to probe).
    pub fn record_failure(&self, error: &ClientError, sent: Instant) -> FailureEffects {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let signal = Signal::of(error);
        let mut effects = FailureEffects::default();
        match signal {
            Signal::Overload => {
                self.overloads.fetch_add(1, Ordering::Relaxed);
                // The failed attempt's slot is already given back: what is left running
                // is what the server held of ours when it refused.
                let held = self.in_flight.load(Ordering::Relaxed);
                effects.limit = if error.is_preempted() {
                    self.limit.on_stream_cut(sent, held)
                } else {
                    self.limit.on_overload(sent, held)
                };
                return effects;
            }
            _ if matches!(error, ClientError::Timeout { .. }) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        let Some(why) = self.breaker.record(signal) else {
            return effects;
        };
        if !self.healthy.swap(false, Ordering::AcqRel) {
            return effects;
        }
        effects.opened = true;
        self.trips.fetch_add(1, Ordering::Relaxed);
        self.health.bump();
        let reason = format!("{why}; last: {error}");
        let actor = self.actor.lock().map(|a| a.clone()).unwrap_or(None);
        match actor {
            Some(actor)
                if actor
                    .cast(EndpointMsg::MarkDown {
                        reason: reason.clone(),
                    })
                    .is_ok() => {}
            // The actor is being restarted; its successor probes on start.
            _ => {
                tracing::warn!(endpoint = %self.spec.name, %reason, "endpoint marked down (actor restarting)")
            }
        }
        effects
    }

    /// The actor re-admits the endpoint after enough successful probes: a fresh window,
    /// and the full limit (a restarted server's queue is empty). Returns the limit's
    /// change, if it moved, for the caller to report.
    #[must_use]
    pub fn mark_up(&self) -> Option<LimitChange> {
        self.breaker.reset();
        let change = self.limit.reset();
        if !self.healthy.swap(true, Ordering::AcqRel) {
            self.health.bump();
        }
        change
    }

    fn request(&self, url: &reqwest::Url, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut req = self.http.request(method, url.clone());
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        req
    }

    fn connect_error(&self, e: &reqwest::Error) -> ClientError {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        let message = super::error::redact(&message, self.spec.api_key.as_ref());
        ClientError::Connect {
            endpoint: self.spec.name.clone(),
            message,
        }
    }

    fn timeout(&self, after: Duration) -> ClientError {
        ClientError::Timeout {
            endpoint: self.spec.name.clone(),
            after,
        }
    }

    fn interrupted(&self, message: String, how: Interruption) -> ClientError {
        ClientError::Interrupted {
            endpoint: self.spec.name.clone(),
            message: super::error::redact(&message, self.spec.api_key.as_ref()),
            how,
        }
    }

    /// A stream that ended before its `finish_reason`: broken off, or ended by the server
    /// itself (`[DONE]` seen), and then whether other attempts were running here (this one
    /// still holds its slot, so it is one of `in_flight`).
    fn interruption(&self, message: String, done: bool) -> ClientError {
        if !done {
            return self.interrupted(message, Interruption::Broken);
        }
        let others = self.in_flight.load(Ordering::Relaxed).saturating_sub(1);
        if others == 0 {
            return self.interrupted(message, Interruption::Ended);
        }
        let message = format!(
            "{message}; ended by the server while {others} other attempt{} ran on this \
             endpoint (a server that cuts a stream for the next request)",
            if others == 1 { "" } else { "s" }
        );
        self.interrupted(message, Interruption::Preempted)
    }

    fn malformed(&self, status: u16, problem: &str, body: &[u8]) -> ClientError {
        let mut text = format!("{problem}; body: ");
        text.push_str(&snippet(body, self.spec.api_key.as_ref()));
        let snippet = snippet(text.as_bytes(), self.spec.api_key.as_ref());
        ClientError::Malformed {
            endpoint: self.spec.name.clone(),
            status,
            snippet,
        }
    }

    /// A non-2xx response: read a bounded part of the body for the error.
    async fn status_error(&self, resp: reqwest::Response) -> AttemptError {
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| super::retry_after::parse(v, SystemTime::now()));
        let body = tokio::time::timeout(SIDE_READ_TIMEOUT, resp.bytes()).await;
        let body = match body {
            Ok(Ok(b)) => b,
            _ => Bytes::new(),
        };
        let body_snippet = snippet(&body, self.spec.api_key.as_ref());
        AttemptError {
            error: ClientError::Status {
                endpoint: self.spec.name.clone(),
                status,
                body_snippet,
            },
            retry_after,
        }
    }

    /// One HTTP attempt. The caller holds the in-flight permits. `timeout_scale` (≥ 1)
    /// stretches the request timeout (or the stream idle timeout) for a call whose earlier
    /// attempts timed out.
    pub async fn attempt(
        &self,
        body: RequestBody,
        headers: HeaderMap,
        stream: bool,
        timeout_scale: f64,
        deltas: Option<crate::wire::DeltaSink>,
    ) -> Result<Completion, AttemptError> {
        let scale = |d: Duration| d.mul_f64(timeout_scale.max(1.0));
        self.calls.fetch_add(1, Ordering::Relaxed);
        let req = self
            .request(&self.chat_url, reqwest::Method::POST)
            .header(CONTENT_TYPE, "application/json")
            .headers(headers)
            .body(body.http_body());
        if stream {
            self.attempt_streaming(req, scale(self.spec.stream_idle_timeout), deltas)
                .await
        } else {
            let after = scale(self.spec.request_timeout);
            match tokio::time::timeout(after, self.attempt_plain(req)).await {
                Ok(r) => r,
                Err(_) => Err(self.timeout(after).into()),
            }
        }
    }

    async fn attempt_plain(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<Completion, AttemptError> {
        let resp = req.send().await.map_err(|e| self.connect_error(&e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(self.status_error(resp).await);
        }
        let body = resp.bytes().await.map_err(|e| self.connect_error(&e))?;
        parse_response(&body).map_err(|p| self.malformed(status.as_u16(), &p, &body).into())
    }

    /// Streaming: every wait (headers, each chunk) is bounded by the idle timeout, so a
    /// dead server is noticed in seconds, however long the generation.
    async fn attempt_streaming(
        &self,
        req: reqwest::RequestBuilder,
        idle: Duration,
        deltas: Option<crate::wire::DeltaSink>,
    ) -> Result<Completion, AttemptError> {
        let resp = match tokio::time::timeout(idle, req.send()).await {
            Err(_) => return Err(self.timeout(idle).into()),
            Ok(Err(e)) => return Err(self.connect_error(&e).into()),
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(self.status_error(resp).await);
        }
        let mut acc = super::sse::SseAccumulator::default();
        let mut forward = deltas.map(super::sse::Forward::new);
        let mut chunks = resp.bytes_stream();
        loop {
            match tokio::time::timeout(idle, chunks.next()).await {
                Err(_) => return Err(self.timeout(idle).into()),
                Ok(None) => break,
                // The response had begun: the connection broke mid-generation.
                Ok(Some(Err(e))) => {
                    let cause = self.connect_error(&e).to_string();
                    return Err(self
                        .interrupted(
                            format!("{}; {cause}", acc.interruption()),
                            Interruption::Broken,
                        )
                        .into());
                }
                Ok(Some(Ok(chunk))) => {
                    if let Err(p) = acc.push(&chunk) {
                        return Err(self.malformed(status.as_u16(), &p, acc.head()).into());
                    }
                    if let Some(forward) = &mut forward {
                        forward.send_new(&acc);
                    }
                    if acc.is_done() {
                        break;
                    }
                }
            }
        }
        let head = acc.head().to_vec();
        let done = acc.is_done();
        acc.finish().map_err(|e| {
            match e {
                StreamError::Malformed(p) => self.malformed(status.as_u16(), &p, &head),
                StreamError::Interrupted(m) => self.interruption(m, done),
            }
            .into()
        })
    }

    /// Health probe: `GET /health`, falling back to `GET {base}/models`.
    pub async fn probe(&self) -> Result<(), String> {
        let timeout = self.spec.request_timeout.min(SIDE_READ_TIMEOUT);
        let get = |url: &reqwest::Url| {
            let req = self.request(url, reqwest::Method::GET).timeout(timeout);
            async move { req.send().await.map(|r| r.status()) }
        };
        match get(&self.health_url).await {
            Ok(s) if s.is_success() => return Ok(()),
            // No /health route on this server: ask /models instead. Any other status
            // (e.g. 503 while a model loads) means "not ready".
            Ok(s) if s.as_u16() == 404 || s.as_u16() == 405 => {}
            Ok(s) => return Err(format!("GET /health answered HTTP {}", s.as_u16())),
            Err(e) => return Err(self.connect_error(&e).to_string()),
        }
        match get(&self.models_url).await {
            Ok(s) if s.is_success() => Ok(()),
            Ok(s) => Err(format!(
                "GET /health and GET /models answered HTTP {}",
                s.as_u16()
            )),
            Err(e) => Err(self.connect_error(&e).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_larger_than_the_token_budget_waits_for_the_full_burst_not_forever() {
        let limiter = per_minute(Some(100));
        // 1,000 tokens > the 100-token burst: clamped, so it passes on a fresh limiter.
        tokio::time::timeout(Duration::from_secs(5), take(&limiter, 1_000))
            .await
            .expect("clamped to the burst");
        // The burst is now spent: the next request must wait (a minute's refill).
        let waited = tokio::time::timeout(Duration::from_millis(200), take(&limiter, 50)).await;
        assert!(
            waited.is_err(),
            "the limiter must hold back a request over budget"
        );
        take(&None, u32::MAX).await; // unlimited never waits
    }
}
