//! What a call sends and how it is answered: a [`Job`] (a chat completion, an
//! embeddings request) tells the driver how its body is encoded, sent and answered, and
//! records its telemetry.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;

use super::Shared;
use crate::endpoint::{AttemptError, Endpoint, FailureEffects};
use crate::error::ClientError;
use crate::wire::CallTags;

/// A request body ready for one endpoint (encoded once, reused on retries).
#[derive(Clone)]
pub(super) struct Encoded<B> {
    pub body: B,
    /// `max_tokens` as sent (0 when nothing is generated).
    pub max_tokens: u32,
    /// Tokens charged to the token rate limits.
    pub budget_tokens: u32,
}

/// What a call sends and how it is answered.
pub(super) trait Job: Sync {
    type Body: Clone + Send + Sync + 'static;
    type Reply: Send + 'static;
    type Response;
    /// "call" or "embeddings call", for the log.
    const WHAT: &'static str;
    fn tags(&self) -> &CallTags;
    fn stream(&self) -> bool;
    /// Whether an attempt past its timeout may be hedged (else it is abandoned).
    fn hedge(&self) -> bool;
    fn encode(
        &self,
        shared: &Shared,
        ep: &Arc<Endpoint>,
    ) -> impl Future<Output = Result<Encoded<Self::Body>, ClientError>> + Send;
    fn span(&self, ep: &Endpoint, encoded: &Encoded<Self::Body>, attempt: u32) -> tracing::Span;
    fn send(
        &self,
        ep: Arc<Endpoint>,
        body: Self::Body,
        headers: HeaderMap,
        scale: f64,
    ) -> BoxFuture<'static, Result<Self::Reply, AttemptError>>;
    /// Records the answer (telemetry) and builds the call's response.
    fn answered(&self, done: &Ended<'_>, reply: Self::Reply, attempts: u32) -> Self::Response;
    fn failed(&self, done: &Ended<'_>, error: &ClientError, effects: FailureEffects);
    fn count_retry(&self, ep: &Endpoint);
}

/// An attempt as it ended: where it ran, its span, when it started.
pub(super) struct Ended<'s> {
    pub endpoint: &'s Arc<Endpoint>,
    pub span: &'s tracing::Span,
    pub started: Instant,
    pub max_tokens: u32,
}
