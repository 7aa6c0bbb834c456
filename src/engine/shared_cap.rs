//! A cap on model calls in flight shared by several runs in one process (the variants of
//! `tmas experiment`): every call of every run holds one permit of a common semaphore
//! while it is at the endpoints, so the runs' calls interleave under one budget instead
//! of each run having its own.

use std::sync::Arc;

use futures::future::BoxFuture;
use tmas_actors::strategy::{CallExecutor, CallKey, CallOutcome};
use tmas_client::wire::{ChatRequest, EmbeddingRequest};
use tokio::sync::Semaphore;

/// Wraps the executor that sends calls (below the run store, so replayed calls take no
/// permit).
pub struct SharedCap {
    inner: Arc<dyn CallExecutor>,
    permits: Arc<Semaphore>,
}

impl SharedCap {
    pub fn new(inner: Arc<dyn CallExecutor>, permits: Arc<Semaphore>) -> Self {
        Self { inner, permits }
    }
}

impl CallExecutor for SharedCap {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let (inner, permits) = (self.inner.clone(), self.permits.clone());
        Box::pin(async move {
            // A closed semaphore (never closed here) would only lift the cap.
            let _permit = permits.acquire_owned().await.ok();
            inner.execute(group, request).await
        })
    }

    fn execute_call(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: ChatRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let (inner, permits, key) = (self.inner.clone(), self.permits.clone(), key.clone());
        Box::pin(async move {
            let _permit = permits.acquire_owned().await.ok();
            inner.execute_call(&key, group, request).await
        })
    }

    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let (inner, permits, key) = (self.inner.clone(), self.permits.clone(), key.clone());
        Box::pin(async move {
            let _permit = permits.acquire_owned().await.ok();
            inner.execute_embeddings(&key, group, request).await
        })
    }
}
