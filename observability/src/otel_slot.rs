//! A `tracing` layer slot that the OpenTelemetry layer is put into once an exporter exists.
//!
//! Why a slot: the global subscriber is installed at process start (before the config file
//! is read), but whether spans are exported — and where — is only known once `tmas run`
//! has loaded its config, and the gRPC exporter must be built inside the Tokio runtime.
//! `tracing` cannot swap a per-layer-filtered layer later (`reload` breaks per-layer
//! filters), so the subscriber carries this empty slot from the start.
//!
//! Cost when empty: the slot's filter answers `Interest::never()` for every callsite, so
//! nothing is recorded for it; spans exist only if the log filter wants them. Filling the
//! slot flips the filter on and rebuilds the callsite interest cache once.

use std::any::TypeId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use opentelemetry_sdk::trace::SdkTracer;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Filter, Layer};

/// The OpenTelemetry layer of an exporter (what the slot holds once filled).
pub type OtelLayer = OpenTelemetryLayer<Registry, SdkTracer>;

/// Targets never exported: ractor's long-lived per-actor spans, and the HTTP/gRPC stack
/// the exporter itself uses (exporting those would feed the exporter its own traffic).
const EXCLUDED_TARGETS: [&str; 9] = [
    "ractor",
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "reqwest",
    "opentelemetry",
    "rustls",
];

/// Shared between the slot, its filter and the installer.
#[derive(Clone, Default)]
pub(crate) struct SlotHandle {
    layer: Arc<OnceLock<OtelLayer>>,
    active: Arc<AtomicBool>,
}

impl SlotHandle {
    /// Puts the OpenTelemetry layer in; false if one was already there.
    pub(crate) fn fill(&self, layer: OtelLayer) -> bool {
        if self.layer.set(layer).is_err() {
            return false;
        }
        self.active.store(true, Ordering::Release);
        crate::span_ext::set_exporting();
        tracing::callsite::rebuild_interest_cache();
        true
    }

    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub(crate) fn layer(&self) -> OtelSlot {
        OtelSlot(self.clone())
    }

    pub(crate) fn filter(&self) -> OtelFilter {
        OtelFilter(self.active.clone())
    }
}

/// What the exporter receives: INFO and above, minus [`EXCLUDED_TARGETS`].
fn exported(meta: &Metadata<'_>) -> bool {
    *meta.level() <= Level::INFO
        && !EXCLUDED_TARGETS
            .iter()
            .any(|t| meta.target().starts_with(t))
}

/// Per-layer filter of the slot: nothing until the slot is filled.
pub(crate) struct OtelFilter(Arc<AtomicBool>);

impl<S> Filter<S> for OtelFilter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        self.0.load(Ordering::Relaxed) && exported(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.0.load(Ordering::Relaxed) && exported(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(if self.0.load(Ordering::Relaxed) {
            tracing::level_filters::LevelFilter::INFO
        } else {
            tracing::level_filters::LevelFilter::OFF
        })
    }
}

/// The slot layer: forwards everything to the OpenTelemetry layer once it is there.
pub(crate) struct OtelSlot(SlotHandle);

impl OtelSlot {
    fn inner(&self) -> Option<&OtelLayer> {
        self.0.layer.get()
    }
}

impl Layer<Registry> for OtelSlot {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_record(span, values, ctx);
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_follows_from(span, follows, ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_enter(id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_exit(id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_close(id, ctx);
        }
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, Registry>) {
        if let Some(l) = self.inner() {
            l.on_id_change(old, new, ctx);
        }
    }

    /// Lets `OpenTelemetrySpanExt` (span contexts for `traceparent`, attributes set after
    /// creation) find the inner layer through the slot.
    ///
    /// # Safety
    /// Same contract as [`Layer::downcast_raw`]: the pointer is to `self` or comes from
    /// the inner layer, which lives in the `OnceLock` as long as the slot does (the global
    /// subscriber, i.e. the whole process).
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: forwarded to the inner layer under the same contract.
        self.inner().and_then(|l| unsafe { l.downcast_raw(id) })
    }
}
