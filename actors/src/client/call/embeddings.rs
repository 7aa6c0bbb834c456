//! One embeddings call: the chat call's path — a healthy endpoint of the group, global and
//! endpoint slots, rate limits, breaker evidence, the permanent-error count, the retry
//! budgets of `retry_budget` and the same backoff — with the embeddings body and reply.
//!
//! What differs: no `max_tokens` to fit (nothing is generated; a too-long input is the
//! server's to refuse), and no hedging (an embeddings reply takes milliseconds, so an
//! attempt past its timeout is abandoned and the next one gets a longer timeout).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use bytes::Bytes;
use tracing::Instrument;

use super::{Shared, spread, tag_headers};
use crate::client::embeddings_body::{EmbeddingsReply, encode_embeddings_request};
use crate::client::endpoint::{Endpoint, take};
use crate::client::error::ClientError;
use crate::client::retry_budget::RetryBudget;
use crate::client::telemetry;
use crate::wire::{ChatMessage, ChatResponse, EmbeddingRequest};

/// An embeddings body ready for one endpoint (its model name), reused on retries.
struct Prepared {
    endpoint: Arc<Endpoint>,
    body: Bytes,
    /// Estimated input tokens, charged to the token rate limits.
    tokens: u32,
}

impl Shared {
    async fn prepare_embeddings<'p>(
        &self,
        cache: &'p mut Vec<Prepared>,
        ep: &Arc<Endpoint>,
        request: &EmbeddingRequest,
    ) -> Result<&'p Prepared, ClientError> {
        if let Some(i) = cache.iter().position(|p| Arc::ptr_eq(&p.endpoint, ep)) {
            return Ok(&cache[i]);
        }
        let body = encode_embeddings_request(&ep.spec.model, &request.inputs).map_err(|e| {
            ClientError::Config {
                message: format!(
                    "endpoint `{}`: cannot serialize the embeddings request: {e}",
                    ep.name()
                ),
            }
        })?;
        // The chat counter's estimate (each input counted as a message): a slight
        // overestimate, which is the safe side of a rate limit.
        let messages: Vec<ChatMessage> = request
            .inputs
            .iter()
            .map(|i| ChatMessage::user(i.clone()))
            .collect();
        let tokens = ep.counter.count_async(&messages).await;
        cache.push(Prepared {
            endpoint: ep.clone(),
            body,
            tokens,
        });
        Ok(&cache[cache.len() - 1])
    }

    /// Records a successful attempt and builds the call's response.
    fn embedded(
        &self,
        span: &tracing::Span,
        ep: &Arc<Endpoint>,
        request: &EmbeddingRequest,
        reply: EmbeddingsReply,
        started: Instant,
        attempts: u32,
    ) -> ChatResponse {
        let dimensions = reply.vectors.first().map_or(0, Vec::len);
        telemetry::on_embeddings_success(
            span,
            ep,
            request,
            reply.usage,
            dimensions,
            started.elapsed(),
        );
        if let Some(change) = ep.record_success(started.elapsed()) {
            telemetry::on_limit_change(span, ep, change);
        }
        self.permanent.on_success(&ep.permanent_in_a_row);
        ChatResponse {
            content: "".into(),
            reasoning: None,
            usage: reply.usage,
            finish_reason: None,
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            endpoint: ep.name().clone(),
            attempts,
            max_tokens_sent: 0,
            embeddings: Some(reply.vectors.into()),
        }
    }

    /// Make one embeddings call with routing, retries and outage waits.
    pub async fn embed(
        &self,
        group_name: &str,
        request: EmbeddingRequest,
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
        let mut attempts = 0u32;
        let mut budget = RetryBudget::new(policy);
        let mut last_failed: Option<Arc<Endpoint>> = None;
        loop {
            let slot = self
                .acquire(
                    &group,
                    last_failed.as_ref(),
                    None,
                    request.tags.affinity_key(),
                    &mut waited,
                )
                .await?;
            let ep = slot.endpoint.clone();
            let prepared = self.prepare_embeddings(&mut cache, &ep, &request).await?;
            take(&self.global_rpm, 1).await;
            take(&self.global_tpm, prepared.tokens).await;
            ep.rate_limit(prepared.tokens).await;
            attempts += 1;
            if attempts > 1 {
                ep.retries.fetch_add(1, Ordering::Relaxed);
                telemetry::count_role_retry(&ep, &request.tags.role);
            }
            let span = telemetry::embeddings_span(&ep, &request, attempts);
            let mut attempt_headers = headers.clone();
            telemetry::inject_traceparent(&span, &mut attempt_headers);
            let started = Instant::now();
            let attempt = ep
                .attempt_embeddings(
                    prepared.body.clone(),
                    attempt_headers,
                    budget.timeout_scale(),
                    request.inputs.len(),
                )
                .instrument(span.clone());
            let result = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                r = attempt => r,
            };
            drop(slot);
            let failure = match result {
                Ok(reply) => {
                    return Ok(self.embedded(&span, &ep, &request, reply, started, attempts));
                }
                Err(f) => f,
            };
            let effects = ep.record_failure(&failure.error, started);
            self.permanent
                .on_failure(ep.name(), &ep.permanent_in_a_row, &failure.error);
            telemetry::on_role_failure(
                &span,
                &ep,
                &request.tags.role,
                &failure.error,
                started.elapsed(),
                effects,
            );
            let error = failure.error;
            if !error.is_retryable() {
                return Err(error);
            }
            if budget.exhausted_by(&error, started, ep.is_healthy()) {
                let call = request.tags.call.as_deref().unwrap_or("");
                tracing::warn!(call, group = %group.name, attempts, error = %error, "embeddings call failed after retries");
                return Err(error);
            }
            let delay = if let Some(after) = failure.retry_after {
                spread(after)
            } else if !ep.is_healthy() {
                Duration::ZERO
            } else {
                backoff.next().unwrap_or(policy.backoff_max)
            };
            tracing::debug!(group = %group.name, endpoint = %ep.name(), attempts, ?delay, error = %error, "retrying embeddings call");
            telemetry::on_retry(&span, &error, delay);
            last_failed = Some(ep);
            // As for chat calls: a backoff ends early when an endpoint changes health.
            let mut health = self.health.subscribe();
            let wake_on_health = failure.retry_after.is_none();
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                _ = tokio::time::sleep(delay) => {}
                _ = health.changed(), if wake_on_health => {}
            }
        }
    }
}
