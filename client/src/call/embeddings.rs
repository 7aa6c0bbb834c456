//! An embeddings request as a [`Job`]: the chat call's path and rules with the embeddings
//! body and reply.
//!
//! What differs: no `max_tokens` to fit (nothing is generated; a too-long input is the
//! server's to refuse), and no hedging (an embeddings reply takes milliseconds, so an
//! attempt past its timeout is abandoned and the next one gets a longer timeout).

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use reqwest::header::HeaderMap;

use super::Shared;
use super::job::{Encoded, Ended, Job};
use crate::embeddings_body::{EmbeddingsReply, encode_embeddings_request};
use crate::endpoint::{AttemptError, Endpoint, FailureEffects};
use crate::error::ClientError;
use crate::telemetry;
use crate::wire::{CallTags, ChatMessage, ChatResponse, EmbeddingRequest};

/// One embeddings request.
pub(super) struct Embed<'r>(pub &'r EmbeddingRequest);

impl Job for Embed<'_> {
    type Body = Bytes;
    type Reply = EmbeddingsReply;
    type Response = ChatResponse;
    const WHAT: &'static str = "embeddings call";

    fn tags(&self) -> &CallTags {
        &self.0.tags
    }

    fn stream(&self) -> bool {
        false
    }

    fn hedge(&self) -> bool {
        false
    }

    async fn encode(&self, _: &Shared, ep: &Arc<Endpoint>) -> Result<Encoded<Bytes>, ClientError> {
        let body = encode_embeddings_request(&ep.spec.model, &self.0.inputs).map_err(|e| {
            ClientError::Config {
                message: format!(
                    "endpoint `{}`: cannot serialize the embeddings request: {e}",
                    ep.name()
                ),
            }
        })?;
        // The chat counter's estimate (each input counted as a message): a slight
        // overestimate, which is the safe side of a rate limit.
        let messages: Vec<ChatMessage> = self
            .0
            .inputs
            .iter()
            .map(|i| ChatMessage::user(i.clone()))
            .collect();
        let tokens = ep.counter.count_async(&messages).await;
        Ok(Encoded {
            body,
            max_tokens: 0,
            budget_tokens: tokens,
        })
    }

    fn span(&self, ep: &Endpoint, _: &Encoded<Bytes>, attempt: u32) -> tracing::Span {
        telemetry::embeddings_span(ep, self.0, attempt)
    }

    fn send(
        &self,
        ep: Arc<Endpoint>,
        body: Bytes,
        headers: HeaderMap,
        scale: f64,
    ) -> BoxFuture<'static, Result<EmbeddingsReply, AttemptError>> {
        let inputs = self.0.inputs.len();
        Box::pin(async move { ep.attempt_embeddings(body, headers, scale, inputs).await })
    }

    fn answered(&self, done: &Ended<'_>, reply: EmbeddingsReply, attempts: u32) -> ChatResponse {
        let (ep, elapsed) = (done.endpoint, done.started.elapsed());
        let dimensions = reply.vectors.first().map_or(0, Vec::len);
        telemetry::on_embeddings_success(done.span, ep, self.0, reply.usage, dimensions, elapsed);
        if let Some(change) = ep.record_success(elapsed) {
            telemetry::on_limit_change(done.span, ep, change);
        }
        ChatResponse {
            content: "".into(),
            reasoning: None,
            usage: reply.usage,
            finish_reason: None,
            latency_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            endpoint: ep.name().clone(),
            attempts,
            max_tokens_sent: 0,
            embeddings: Some(reply.vectors.into()),
        }
    }

    fn failed(&self, done: &Ended<'_>, error: &ClientError, effects: FailureEffects) {
        let (span, ep, elapsed) = (done.span, done.endpoint, done.started.elapsed());
        telemetry::on_role_failure(span, ep, &self.0.tags.role, error, elapsed, effects);
    }

    fn count_retry(&self, ep: &Endpoint) {
        telemetry::count_role_retry(ep, &self.0.tags.role);
    }
}
