//! The model client as the runtime's [`CallExecutor`]: each call on a task of its own.
//!
//! The pool workers await their executor; running the HTTP work on its own task keeps it
//! out of any actor's handler, and a panic in it comes back as a [`CallFailure`] of kind
//! [`FailureKind::Panic`] instead of killing the worker.

use std::sync::Arc;

use futures::future::BoxFuture;
use tracing::Instrument;

use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, ChatResponse, EmbeddingRequest};
use tmas_client::{ClientError, ModelClient};

use crate::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome};

impl From<ClientError> for CallFailure {
    fn from(e: ClientError) -> Self {
        CallFailure {
            kind: e.kind(),
            message: e.to_string(),
            endpoint: e.endpoint().cloned(),
        }
    }
}

impl CallExecutor for ModelClient {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let client = self.clone();
        // The task carries the caller's span (the agent call), so attempt spans and the
        // `traceparent` sent to the server hang under it.
        let span = tracing::Span::current();
        joined(tokio::spawn(
            async move { client.chat(&group, request).await }.instrument(span),
        ))
    }

    /// As [`CallExecutor::execute`], for an embeddings call; the request carries the
    /// call's identity, so the server sees which call it serves.
    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        mut request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        request.tags.identify(key);
        let client = self.clone();
        let span = tracing::Span::current();
        joined(tokio::spawn(
            async move { client.embed(&group, request).await }.instrument(span),
        ))
    }
}

/// The outcome of a call's task; a panic in it is reported as a failure.
fn joined(
    task: tokio::task::JoinHandle<Result<ChatResponse, ClientError>>,
) -> BoxFuture<'static, CallOutcome> {
    Box::pin(async move {
        match task.await {
            Ok(result) => result.map_err(CallFailure::from),
            Err(e) => Err(CallFailure::new(
                FailureKind::Panic,
                format!("model call task failed: {e}"),
            )),
        }
    })
}
