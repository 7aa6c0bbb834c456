//! An exporter wrapper that exports only namespaced span attributes and reports the first
//! failed export once and then stays quiet.
//!
//! A span's attributes are its `tracing` fields plus those set through
//! [`crate::span_ext`]. Fields without a namespace (`problem`, `iteration`, `role`, …) are
//! there for log lines; each has a typed, namespaced counterpart (`tmas.problem_id`,
//! `tmas.iteration`, `gen_ai.agent.name`, …), so they are left out of the export rather
//! than repeated untyped on every span.
//!
//! The batch processor drops a batch whose export failed; the run goes on. Without this,
//! the SDK would report every failed batch (its own logs are filtered out of the log
//! lines); with it, an unreachable collector costs one warning.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Counts of what happened to exported batches (shared with the guard).
#[derive(Debug, Default)]
pub struct ExportStats {
    pub spans_exported: AtomicU64,
    pub spans_dropped: AtomicU64,
    pub failed_batches: AtomicU64,
}

pub(crate) struct LogOnce<E> {
    inner: E,
    endpoint: String,
    warned: AtomicBool,
    stats: Arc<ExportStats>,
}

impl<E> LogOnce<E> {
    pub(crate) fn new(inner: E, endpoint: String, stats: Arc<ExportStats>) -> Self {
        Self {
            inner,
            endpoint,
            warned: AtomicBool::new(false),
            stats,
        }
    }
}

impl<E> fmt::Debug for LogOnce<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogOnce")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// `gen_ai.request.model`, `tmas.role`, `error.type`: a semantic-convention or `tmas.`
/// name, as opposed to a bare `tracing` field name.
pub(crate) fn is_namespaced(key: &str) -> bool {
    key.contains('.')
}

impl<E: SpanExporter> SpanExporter for LogOnce<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        for span in &mut batch {
            span.attributes.retain(|kv| is_namespaced(kv.key.as_str()));
        }
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.stats.spans_exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(error) => {
                self.stats.spans_dropped.fetch_add(n, Ordering::Relaxed);
                self.stats.failed_batches.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        %error,
                        "OTLP export failed; spans are dropped and the run goes on \
                         (further export failures are not logged)"
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}
