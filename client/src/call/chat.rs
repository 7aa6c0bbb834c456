//! A chat completion as a [`Job`]: its body fitted to each endpoint's context window (and
//! shared with calls quoting the same prompt), sent plain or streamed, hedged when plain.

use std::sync::Arc;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;

use super::Shared;
use super::job::{Encoded, Ended, Job};
use crate::body::{Completion, encode_request};
use crate::body_cache::EncodedBody;
use crate::endpoint::{AttemptError, Endpoint, FailureEffects};
use crate::error::ClientError;
use crate::request_body::RequestBody;
use crate::telemetry;
use crate::tokens::fit_max_tokens;
use crate::wire::{CallTags, ChatRequest, ChatResponse, DeltaSink};

/// One chat completion request, and where its pieces go as they stream in (if anywhere).
pub(super) struct Chat<'r>(pub &'r ChatRequest, pub Option<&'r DeltaSink>);

impl Job for Chat<'_> {
    type Body = RequestBody;
    type Reply = Completion;
    type Response = ChatResponse;
    const WHAT: &'static str = "call";

    fn tags(&self) -> &CallTags {
        &self.0.tags
    }

    fn stream(&self) -> bool {
        self.0.stream
    }

    fn hedge(&self) -> bool {
        true
    }

    async fn encode(
        &self,
        shared: &Shared,
        ep: &Arc<Endpoint>,
    ) -> Result<Encoded<RequestBody>, ClientError> {
        let encoded = match shared.bodies.get(ep.name(), self.0) {
            Some(shared) => shared,
            None => {
                let encoded = encode(shared, ep, self.0).await?;
                shared.bodies.put(ep.name(), self.0, &encoded);
                encoded
            }
        };
        Ok(Encoded {
            budget_tokens: encoded.prompt_tokens.saturating_add(encoded.max_tokens),
            body: encoded.body,
            max_tokens: encoded.max_tokens,
        })
    }

    fn span(&self, ep: &Endpoint, encoded: &Encoded<RequestBody>, attempt: u32) -> tracing::Span {
        telemetry::attempt_span(ep, self.0, encoded.max_tokens, attempt)
    }

    fn send(
        &self,
        ep: Arc<Endpoint>,
        body: RequestBody,
        headers: HeaderMap,
        scale: f64,
    ) -> BoxFuture<'static, Result<Completion, AttemptError>> {
        let stream = self.0.stream;
        let deltas = self.1.cloned();
        Box::pin(async move { ep.attempt(body, headers, stream, scale, deltas).await })
    }

    fn answered(&self, done: &Ended<'_>, c: Completion, attempts: u32) -> ChatResponse {
        let (ep, elapsed) = (done.endpoint, done.started.elapsed());
        telemetry::on_success(done.span, ep, self.0, &c, elapsed);
        if let Some(change) = ep.record_success(elapsed) {
            telemetry::on_limit_change(done.span, ep, change);
        }
        ChatResponse {
            content: c.content.into(),
            reasoning: c.reasoning.map(Into::into),
            usage: c.usage,
            finish_reason: c.finish_reason,
            latency_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            endpoint: ep.name().clone(),
            attempts,
            max_tokens_sent: done.max_tokens,
            embeddings: None,
        }
    }

    fn failed(&self, done: &Ended<'_>, error: &ClientError, effects: FailureEffects) {
        let elapsed = done.started.elapsed();
        telemetry::on_failure(done.span, done.endpoint, self.0, error, elapsed, effects);
    }

    fn count_retry(&self, ep: &Endpoint) {
        telemetry::count_retry(ep, self.0);
    }
}

/// Counts the prompt's tokens, fits `max_tokens` to the endpoint's window and serializes
/// the body.
async fn encode(
    shared: &Shared,
    ep: &Arc<Endpoint>,
    request: &ChatRequest,
) -> Result<EncodedBody, ClientError> {
    let prompt_tokens = ep.counter.count_async(&request.messages).await;
    let max_tokens = fit_max_tokens(
        ep.name(),
        request.sampling.max_tokens,
        prompt_tokens,
        ep.spec.context_window,
        shared.policy.context_margin,
    )?;
    let body = encode_request(&ep.spec.model, request, max_tokens, &shared.bodies.escapes)
        .map_err(|e| ClientError::Config {
            message: format!(
                "endpoint `{}`: cannot serialize the request: {e}",
                ep.name()
            ),
        })?;
    Ok(EncodedBody {
        body,
        max_tokens,
        prompt_tokens,
    })
}
