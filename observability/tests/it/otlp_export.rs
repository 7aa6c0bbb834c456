//! Spans reach an in-process OTLP (gRPC) receiver through the subscriber's slot, with
//! parent links, run-time attributes, and a `traceparent` naming the exported span.

use std::time::Duration;

use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};
use tmas_observability::otlp::{ObservabilityConfig, OtlpSettings, install};
use tmas_observability::span_ext;

/// Collects exported spans until `want` of them arrived (the fake collector's channel
/// holds only 64, so it is drained continuously).
async fn collect(collector: &mut FakeCollectorServer, want: usize) -> Vec<ExportedSpan> {
    let mut spans = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while spans.len() < want && tokio::time::Instant::now() < deadline {
        spans.extend(
            collector
                .exported_spans(1, Duration::from_millis(200))
                .await,
        );
    }
    spans
}

/// An attribute's value as text: the fake collector stores the protobuf `Debug` form,
/// e.g. `Some(AnyValue { value: Some(StringValue("p1")) })`.
fn attr(span: &ExportedSpan, key: &str) -> Option<String> {
    let raw = span.attributes.get(key)?;
    for kind in ["StringValue(\"", "IntValue(", "DoubleValue(", "BoolValue("] {
        if let Some(rest) = raw.split_once(kind).map(|(_, r)| r) {
            let end = if kind.ends_with('"') { "\")" } else { ")" };
            return rest.split_once(end).map(|(v, _)| v.to_owned());
        }
    }
    Some(raw.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_with_parents_attributes_and_a_matching_traceparent() {
    tmas_observability::init_logging(Some("warn"));
    let mut collector = FakeCollectorServer::start()
        .await
        .map_err(|e| e.to_string())
        .expect("fake collector");
    let config = ObservabilityConfig {
        otlp_endpoint: Some(collector.endpoint()),
        otlp_protocol: Some("grpc".into()),
        ..Default::default()
    };
    let settings = OtlpSettings::resolve(&config, &|_| None)
        .unwrap()
        .expect("an endpoint is configured");
    let guard = install(&settings).expect("exporter installs");
    assert!(span_ext::exporting());

    let traceparent = {
        let outer = tracing::info_span!("outer", tmas.problem_id = "p1");
        let inner = tracing::info_span!(parent: &outer, "inner", gen_ai.operation.name = "chat");
        span_ext::set_attribute(&inner, "tmas.branch", "explore");
        span_ext::set_attribute(
            &inner,
            "gen_ai.response.finish_reasons",
            span_ext::string_array(["stop"]),
        );
        inner.in_scope(|| tracing::info!(retry = 1, "retrying"));
        // Not exported: below INFO.
        let _hidden = tracing::debug_span!(parent: &inner, "hidden");
        span_ext::traceparent(&inner).expect("a traceparent while exporting")
    };
    guard.flush().await;
    let spans = collect(&mut collector, 2).await;
    guard.shutdown().await;

    let by_name = |n: &str| {
        spans
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("no span {n} in {spans:#?}"))
    };
    let (outer, inner) = (by_name("outer"), by_name("inner"));
    assert!(!spans.iter().any(|s| s.name == "hidden"));
    assert_eq!(inner.parent_span_id, outer.span_id);
    assert_eq!(inner.trace_id, outer.trace_id);
    assert_eq!(attr(outer, "tmas.problem_id").as_deref(), Some("p1"));
    assert_eq!(attr(inner, "tmas.branch").as_deref(), Some("explore"));
    assert!(
        inner
            .attributes
            .contains_key("gen_ai.response.finish_reasons")
    );
    assert!(
        inner.events.iter().any(|e| e.name == "retrying"),
        "{inner:#?}"
    );
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00");
    assert_eq!(parts[1], inner.trace_id);
    assert_eq!(parts[2], inner.span_id);
}
