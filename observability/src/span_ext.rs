//! Small helpers the runtime uses on its spans, all free when no exporter is installed.
//!
//! - [`traceparent`]: the W3C header for a span, so an inference server started with
//!   `--otlp-traces-endpoint` joins the trace; [`trace_id`]: the span's trace id alone.
//! - [`set_attribute`] / [`add_event`]: OpenTelemetry attributes and events whose names
//!   are only known at run time (strategy-supplied labels, string arrays).
//! - [`exporting`]: whether spans leave the process at all. Whether a run's spans carry
//!   prompt and response text is that run's own setting (`--trace-content`), which the
//!   runtime passes along with the run, not a state of this crate.
//! - [`int`] / [`decimal`]: numbers as the attribute types collectors compare and
//!   aggregate. `tracing-opentelemetry` exports a `u64`/`u32`/`usize` field as a string
//!   (only `i64`, `f64` and `bool` keep their type), and an `f32` widened to `f64` shows
//!   its binary error (0.95 becomes 0.949999988079071).

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use opentelemetry::{Array, KeyValue, StringValue, Value};

/// Set once an exporter's layer is in the process-wide subscriber (the `exporters`
/// feature's `otlp::install`); these helpers are free until then.
///
/// Process-wide because what it describes is: `tracing` has one global subscriber per
/// process, and the exporter is a layer of it, so every run of the process (each variant
/// of `tmas experiment`) exports through the same one, like the one metrics registry.
/// Settings that may differ between runs do not live here.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// True once `otlp::install` put an exporter in place.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Acquire)
}

/// Records that spans are exported from now on (called when the subscriber's slot is
/// filled).
#[cfg(feature = "exporters")]
pub(crate) fn set_exporting() {
    EXPORTING.store(true, Ordering::Release);
}

/// The W3C `traceparent` value (`00-<trace id>-<span id>-<flags>`) of `span`, or `None`
/// when spans are not exported (or the span is disabled).
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if !exporting() || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let otel = cx.span();
    let sc = otel.span_context();
    if !sc.is_valid() {
        return None;
    }
    Some(format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    ))
}

/// The OpenTelemetry trace id of `span` (32 hex digits, as Jaeger shows it), or `None`
/// when spans are not exported (or the span is disabled): what a store keeps to find a
/// problem's trace.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    if !exporting() || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let otel = cx.span();
    let sc = otel.span_context();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

/// Makes `span` a child of the remote span a W3C `traceparent` header names
/// (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`), so a caller's trace goes on
/// in this process. Call it before the span is entered. False (and nothing changed) when
/// not exporting, when the header is not a valid `traceparent`, or when the span has
/// started already.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) -> bool {
    if !exporting() || span.is_disabled() {
        return false;
    }
    let Some(sc) = parse_traceparent(traceparent) else {
        return false;
    };
    let cx = opentelemetry::Context::new().with_remote_span_context(sc);
    span.set_parent(cx).is_ok()
}

/// The span context a `traceparent` value names (version `00`; ids not all zero).
fn parse_traceparent(value: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.next().is_some()
        || version != "00"
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// Sets an OpenTelemetry attribute on `span` (no-op when not exporting).
pub fn set_attribute(span: &tracing::Span, key: &'static str, value: impl Into<Value>) {
    if exporting() && !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// Marks `span` as failed (OpenTelemetry status `Error` with `message`).
pub fn set_error(span: &tracing::Span, message: impl Into<String>) {
    if exporting() && !span.is_disabled() {
        span.set_status(opentelemetry::trace::Status::error(message.into()));
    }
}

/// Adds an OpenTelemetry event to `span` (no-op when not exporting).
pub fn add_event(span: &tracing::Span, name: &'static str, attributes: Vec<KeyValue>) {
    if exporting() && !span.is_disabled() {
        span.add_event(name, attributes);
    }
}

/// A string-array attribute value (e.g. `gen_ai.response.finish_reasons`).
pub fn string_array<I, S>(items: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: Into<StringValue>,
{
    Value::Array(Array::String(items.into_iter().map(Into::into).collect()))
}

/// An unsigned count as an integer attribute value (saturating at `i64::MAX`).
pub fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `f64` of the shortest decimal that reads back as `x`: the number as written in the
/// config (0.95), not the `f32`'s binary value widened (0.949999988079071).
pub fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// At most `max` bytes of `text` (cut at a character boundary), for span attributes.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_values_are_read_by_the_w3c_rules() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse_traceparent(good).expect("valid");
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled() && sc.is_remote());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        // Without an exporter nothing is continued.
        assert!(!continue_trace(&tracing::Span::none(), good));
    }

    #[test]
    fn without_an_exporter_there_is_no_traceparent() {
        let span = tracing::info_span!("x");
        assert!(!exporting());
        assert_eq!(traceparent(&span), None);
        assert_eq!(trace_id(&span), None);
    }

    #[test]
    fn numbers_keep_their_written_value_and_counts_saturate() {
        assert_eq!(decimal(0.95), 0.95);
        assert_ne!(f64::from(0.95f32), 0.95);
        assert_eq!(decimal(1.0), 1.0);
        assert_eq!(decimal(0.7), 0.7);
        assert_eq!(decimal(1e-3), 0.001);
        assert_eq!(int(7), 7);
        assert_eq!(int(u64::MAX), i64::MAX);
    }

    #[test]
    fn clip_cuts_at_a_char_boundary() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
    }
}
