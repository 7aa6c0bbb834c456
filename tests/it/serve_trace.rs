//! `tmas serve` exporting to an in-process OTLP receiver: each request is one trace, the
//! caller's when it sends a `traceparent`, with each choice's problem under the request's
//! span.

use std::collections::HashMap;

use serde_json::json;

use crate::support::cli::Sim;
use crate::support::otlp::Collector;
use crate::support::serve::{Server, write_serve_config};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_continues_its_callers_trace_with_each_choices_problem_under_it() {
    let collector = Collector::start().await;
    let endpoint = collector.endpoint.clone();
    let spans_done = tokio::task::spawn_blocking(move || {
        let sim = Sim::start(0, 2);
        let dir = tempfile::tempdir().unwrap();
        let config = write_serve_config(
            dir.path(),
            &sim.root,
            &format!("[observability]\notlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\"\n"),
        );
        // Spans exist at the log filter's level: INFO, as by default.
        let server = Server::start(&config, &[("RUST_LOG", "info")]);
        let body = json!({
            "model": "tmas/tmas-sim",
            "n": 2,
            "messages": [{"role": "user", "content": "What is 1+1?"}],
            "tmas": {"n": 1, "m": 1, "iterations": 1},
        });
        let traceparent = format!("00-{TRACE}-{PARENT}-01");
        let reply = server.post_with(&[("traceparent", &traceparent)], &body.to_string());
        assert_eq!(reply.status, 200, "{}", reply.body);
        // A request without one starts a trace of its own.
        let reply = server.post(&body);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let (status, stderr) = server.interrupt();
        assert!(status.success(), "{status:?}: {stderr}");
    });
    spans_done.await.unwrap();
    let spans = collector.finish().await;
    let by_id: HashMap<&str, _> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let requests: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "chat_completion")
        .collect();
    let names: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(requests.len(), 2, "one span per request; spans: {names:?}");
    let continued = requests
        .iter()
        .find(|s| s.trace_id == TRACE)
        .expect("the request with a traceparent is in the caller's trace");
    assert_eq!(continued.parent_span_id, PARENT);
    let own = requests
        .iter()
        .find(|s| s.trace_id != TRACE)
        .expect("the other request");
    assert!(
        own.parent_span_id.is_empty(),
        "a root: {}",
        own.parent_span_id
    );

    // Both choices' problems under the continued request, their calls in the same trace.
    let problems: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "problem" && s.trace_id == TRACE)
        .collect();
    assert_eq!(problems.len(), 2);
    for p in &problems {
        assert_eq!(p.parent_span_id, continued.span_id);
    }
    let calls = spans
        .iter()
        .filter(|s| s.trace_id == TRACE && s.name.starts_with("invoke_agent"))
        .count();
    assert_eq!(calls, 2 * 5, "N=1, M=1, T=1: five calls per choice");
    // Every span of the caller's trace hangs, through its parents, from the caller's span.
    for s in spans.iter().filter(|s| s.trace_id == TRACE) {
        let mut at = s;
        while let Some(parent) = by_id.get(at.parent_span_id.as_str()) {
            at = parent;
        }
        assert_eq!(
            at.parent_span_id, PARENT,
            "{} is cut off from the caller",
            s.name
        );
    }
}
