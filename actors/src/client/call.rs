//! One call, from routing to a response: slots, rate limits, retries, outage waits.
//!
//! Runs in the caller's task (no actor round-trip per call). Order of waits:
//! a healthy endpoint in the group (bounded by the outage budget) → a global slot →
//! the least-loaded healthy endpoint's slot (re-routed if that endpoint goes down while
//! we queue) → global then endpoint rate limits → the HTTP attempt.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::wire::{CallTags, ChatRequest, ChatResponse};

use super::body::encode_request;
use super::body_cache::{BodyCache, EncodedBody};
use super::config::ResiliencePolicy;
use super::endpoint::{Endpoint, Health, Limiter, take};
use super::error::ClientError;
use super::permanent::PermanentErrors;
use super::router::Group;
use super::telemetry;
use super::tokens::fit_max_tokens;

/// Everything calls share; owned by the [`super::ModelClient`] handle.
pub(crate) struct Shared {
    pub groups: HashMap<Arc<str>, Arc<Group>>,
    pub endpoints: Vec<Arc<Endpoint>>,
    pub global: Arc<Semaphore>,
    pub global_cap: usize,
    pub global_in_flight: AtomicUsize,
    pub global_rpm: Option<Limiter>,
    pub global_tpm: Option<Limiter>,
    pub policy: ResiliencePolicy,
    pub health: Arc<Health>,
    pub cancel: CancellationToken,
    /// Bodies of recent calls, reused by calls that share their prompt.
    pub bodies: BodyCache,
    pub permanent: Arc<PermanentErrors>,
}

/// Holds a global and an endpoint slot; releasing it updates the in-flight counters.
struct Slot<'a> {
    endpoint: Arc<Endpoint>,
    global_in_flight: &'a AtomicUsize,
    _global: OwnedSemaphorePermit,
    _endpoint: OwnedSemaphorePermit,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.endpoint.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.global_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a call as queued on an endpoint while it waits for a slot there.
struct Queued(Arc<Endpoint>);

impl Queued {
    fn new(ep: &Arc<Endpoint>) -> Self {
        ep.queued.fetch_add(1, Ordering::Relaxed);
        Self(ep.clone())
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request body ready for one endpoint (serialized once, reused on retries).
struct Prepared {
    endpoint: Arc<Endpoint>,
    body: Bytes,
    max_tokens: u32,
    /// Estimated prompt + `max_tokens`, charged to the token rate limits.
    budget_tokens: u32,
}

fn tag_headers(tags: &CallTags) -> HeaderMap {
    // Header values must be visible ASCII; anything else is replaced, never rejected.
    fn value(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap_or_else(|_| {
            let clean: String = text
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() || c == ' ' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            HeaderValue::from_str(&clean).unwrap_or(HeaderValue::from_static("invalid"))
        })
    }
    let mut h = HeaderMap::with_capacity(3);
    h.insert(HeaderName::from_static("x-tmas-role"), value(&tags.role));
    h.insert(
        HeaderName::from_static("x-tmas-problem"),
        value(&tags.problem),
    );
    h.insert(
        HeaderName::from_static("x-tmas-iteration"),
        HeaderValue::from(tags.iteration),
    );
    if let Some(call) = &tags.call {
        h.insert(HeaderName::from_static("x-tmas-call"), value(call));
    }
    h
}

impl Shared {
    fn shutdown_error(&self) -> ClientError {
        ClientError::Shutdown
    }

    /// Wait (bounded by the outage budget) until the group has a healthy endpoint.
    async fn wait_for_health(
        &self,
        group: &Group,
        waited: &mut Duration,
    ) -> Result<(), ClientError> {
        let mut rx = self.health.subscribe();
        if group.any_healthy() {
            return Ok(());
        }
        let budget = self.policy.outage_budget;
        group.enter_outage(budget);
        let remaining = budget.saturating_sub(*waited);
        if remaining.is_zero() {
            return Err(ClientError::Outage {
                group: group.name.clone(),
                waited: *waited,
            });
        }
        tracing::debug!(group = %group.name, "call waiting: every endpoint of the group is down");
        let t0 = Instant::now();
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
            _ = rx.changed() => {}
            _ = tokio::time::sleep(remaining) => {}
        }
        *waited += t0.elapsed();
        Ok(())
    }

    /// Obtain a global slot and a slot on the best healthy endpoint.
    async fn acquire(
        &self,
        group: &Group,
        avoid: Option<&Arc<Endpoint>>,
        waited: &mut Duration,
    ) -> Result<Slot<'_>, ClientError> {
        'route: loop {
            if !group.any_healthy() {
                self.wait_for_health(group, waited).await?;
                continue;
            }
            let global = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
                p = self.global.clone().acquire_owned() => p.map_err(|_| self.shutdown_error())?,
            };
            let Some(ep) = group.pick(avoid) else {
                continue;
            };
            let permit = match ep.permits.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    let _queued = Queued::new(&ep);
                    let mut rx = self.health.subscribe();
                    let acquire = ep.permits.clone().acquire_owned();
                    tokio::pin!(acquire);
                    loop {
                        tokio::select! {
                            biased;
                            _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
                            p = &mut acquire => break p.map_err(|_| self.shutdown_error())?,
                            changed = rx.changed() => {
                                if changed.is_err() {
                                    return Err(self.shutdown_error());
                                }
                                if !ep.is_healthy() {
                                    // The endpoint went down while we queued: move elsewhere.
                                    continue 'route;
                                }
                            }
                        }
                    }
                }
            };
            ep.in_flight.fetch_add(1, Ordering::Relaxed);
            self.global_in_flight.fetch_add(1, Ordering::Relaxed);
            return Ok(Slot {
                endpoint: ep,
                global_in_flight: &self.global_in_flight,
                _global: global,
                _endpoint: permit,
            });
        }
    }

    async fn prepare<'p>(
        &self,
        cache: &'p mut Vec<Prepared>,
        ep: &Arc<Endpoint>,
        request: &ChatRequest,
    ) -> Result<&'p Prepared, ClientError> {
        if let Some(i) = cache.iter().position(|p| Arc::ptr_eq(&p.endpoint, ep)) {
            return Ok(&cache[i]);
        }
        let encoded = match self.bodies.get(ep.name(), request) {
            Some(shared) => shared,
            None => {
                let encoded = self.encode(ep, request).await?;
                self.bodies.put(ep.name(), request, &encoded);
                encoded
            }
        };
        cache.push(Prepared {
            endpoint: ep.clone(),
            budget_tokens: encoded.prompt_tokens.saturating_add(encoded.max_tokens),
            body: encoded.body,
            max_tokens: encoded.max_tokens,
        });
        Ok(&cache[cache.len() - 1])
    }

    /// Counts the prompt's tokens, fits `max_tokens` to the endpoint's window and
    /// serializes the body.
    async fn encode(
        &self,
        ep: &Arc<Endpoint>,
        request: &ChatRequest,
    ) -> Result<EncodedBody, ClientError> {
        let prompt_tokens = ep.counter.count_async(&request.messages).await;
        let max_tokens = fit_max_tokens(
            ep.name(),
            request.sampling.max_tokens,
            prompt_tokens,
            ep.spec.context_window,
            self.policy.context_margin,
        )?;
        let body = encode_request(&ep.spec.model, request, max_tokens).map_err(|e| {
            ClientError::Config {
                message: format!(
                    "endpoint `{}`: cannot serialize the request: {e}",
                    ep.name()
                ),
            }
        })?;
        Ok(EncodedBody {
            body,
            max_tokens,
            prompt_tokens,
        })
    }

    /// Make one call with routing, retries and outage waits.
    pub async fn call(
        &self,
        group_name: &str,
        request: ChatRequest,
    ) -> Result<ChatResponse, ClientError> {
        if self.cancel.is_cancelled() {
            return Err(ClientError::Shutdown);
        }
        let group = self
            .groups
            .get(group_name)
            .ok_or_else(|| ClientError::UnknownGroup {
                group: group_name.into(),
            })?
            .clone();
        let policy = &self.policy;
        let headers = tag_headers(&request.tags);
        let mut backoff = backon::ExponentialBuilder::default()
            .with_min_delay(policy.backoff_min)
            .with_max_delay(policy.backoff_max)
            .with_jitter()
            .without_max_times()
            .build();
        let mut cache: Vec<Prepared> = Vec::with_capacity(1);
        let mut waited = Duration::ZERO;
        let (mut counted, mut malformed, mut attempts) = (0u32, 0u32, 0u32);
        // Failures on an endpoint that is (now) down are not charged to the call (it waits
        // for a healthy one instead), but the total stays bounded.
        let hard_cap = policy
            .max_attempts
            .max(1)
            .saturating_mul(4)
            .saturating_add(policy.max_malformed_attempts);
        let mut last_failed: Option<Arc<Endpoint>> = None;
        loop {
            let slot = self
                .acquire(&group, last_failed.as_ref(), &mut waited)
                .await?;
            let ep = slot.endpoint.clone();
            let prepared = self.prepare(&mut cache, &ep, &request).await?;
            take(&self.global_rpm, 1).await;
            take(&self.global_tpm, prepared.budget_tokens).await;
            ep.rate_limit(prepared.budget_tokens).await;
            attempts += 1;
            if attempts > 1 {
                ep.retries.fetch_add(1, Ordering::Relaxed);
                telemetry::count_retry(&ep, &request);
            }
            let span = telemetry::attempt_span(&ep, &request, prepared.max_tokens, attempts);
            let mut attempt_headers = headers.clone();
            telemetry::inject_traceparent(&span, &mut attempt_headers);
            let started = Instant::now();
            let result = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                r = ep.attempt(prepared.body.clone(), attempt_headers, request.stream)
                    .instrument(span.clone()) => r,
            };
            let max_tokens_sent = prepared.max_tokens;
            drop(slot);
            let failure = match result {
                Ok(c) => {
                    telemetry::on_success(&span, &ep, &request, &c, started.elapsed());
                    ep.record_success();
                    self.permanent.on_success(&ep.permanent_in_a_row);
                    return Ok(ChatResponse {
                        content: c.content.into(),
                        reasoning: c.reasoning.map(Into::into),
                        usage: c.usage,
                        finish_reason: c.finish_reason,
                        latency_ms: u64::try_from(started.elapsed().as_millis())
                            .unwrap_or(u64::MAX),
                        endpoint: ep.name().clone(),
                        attempts,
                        max_tokens_sent,
                    });
                }
                Err(f) => f,
            };
            let opened = ep.record_failure(&failure.error);
            self.permanent
                .on_failure(ep.name(), &ep.permanent_in_a_row, &failure.error);
            telemetry::on_failure(
                &span,
                &ep,
                &request,
                &failure.error,
                started.elapsed(),
                opened,
            );
            let error = failure.error;
            if !error.is_retryable() {
                return Err(error);
            }
            let exhausted = if matches!(error, ClientError::Malformed { .. }) {
                malformed += 1;
                malformed >= policy.max_malformed_attempts.max(1)
            } else if matches!(
                error,
                ClientError::Connect { .. } | ClientError::Timeout { .. }
            ) && !ep.is_healthy()
            {
                // The endpoint is unreachable and now marked down: the call waits for a
                // healthy one (outage budget) instead of burning its attempts.
                false
            } else {
                counted += 1;
                counted >= policy.max_attempts.max(1)
            };
            if exhausted || attempts >= hard_cap {
                // Named here: the call's own span exists only at DEBUG or when exporting.
                let call = request.tags.call.as_deref().unwrap_or("");
                tracing::warn!(call, group = %group.name, attempts, error = %error, "call failed after retries");
                return Err(error);
            }
            let delay = failure
                .retry_after
                .or_else(|| backoff.next())
                .unwrap_or(policy.backoff_max);
            tracing::debug!(group = %group.name, endpoint = %ep.name(), attempts, ?delay, error = %error, "retrying call");
            telemetry::on_retry(&span, &error, delay);
            last_failed = Some(ep);
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}
