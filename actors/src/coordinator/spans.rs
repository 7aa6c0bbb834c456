//! The spans a coordinator opens: one per iteration (child of the problem span) and one
//! per agent call (child of its iteration), with the OpenTelemetry GenAI and `tmas.*`
//! attributes. Attributes that only matter to an exporter are set through
//! [`span_ext`], which does nothing when no exporter runs, so log lines keep their
//! short span prefixes and an unexported run pays nothing for them.
//!
//! Whether prompt and response text go on the spans is the run's own setting
//! (`trace_content`, from [`crate::runner::RunnerSettings`]), passed in by the
//! coordinator: two runs of one process may decide differently. Whether spans are
//! exported at all is the process's (one tracing subscriber serves it).

use std::sync::Arc;

use tmas_observability::span_ext;

use crate::strategy::{CallKey, CallOutcome};
use tmas_client::wire::ModelRequest;

/// Longest prompt or response text put on a span with `--trace-content` (bytes). Larger
/// texts are cut: OTLP receivers reject oversized batches.
pub const CONTENT_LIMIT: usize = 16 * 1024;

/// `invoke_agent {role}`, formatted only if a subscriber records the field.
struct AgentName<'a>(&'a str);

impl std::fmt::Display for AgentName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invoke_agent {}", self.0)
    }
}

pub(crate) fn iteration_span(
    problem_span: &tracing::Span,
    problem: &Arc<str>,
    t: u32,
) -> tracing::Span {
    let span = tracing::info_span!(parent: problem_span, "iteration", iteration = t);
    span_ext::set_attribute(&span, "tmas.problem_id", problem.clone());
    span_ext::set_attribute(&span, "tmas.iteration", i64::from(t));
    span
}

/// True when a run that asks for text on its spans (`trace_content`) gets it: only while
/// spans are exported.
pub(crate) fn content_on_spans(trace_content: bool) -> bool {
    trace_content && span_ext::exporting()
}

/// The span of one agent call; `labels` come from the strategy (e.g. `tmas.branch`).
pub(crate) fn call_span(
    parent: &tracing::Span,
    key: &CallKey,
    labels: Vec<(&'static str, Arc<str>)>,
    request: &ModelRequest,
    trace_content: bool,
) -> tracing::Span {
    if !span_ext::exporting() {
        // Without an exporter the span only gives log lines their context, and a span
        // per call (entered on every poll of the call) cost ~5 % of the orchestrator's
        // CPU in `tmas bench eval` (docs/performance-log.md, "Log level"). At DEBUG
        // it is not even created under the default INFO log level; `--log debug` brings
        // it back. The problem and iteration spans stay INFO.
        return tracing::debug_span!(parent: parent, "call",
            problem = %key.problem, iteration = key.iteration, role = %key.role,
            candidate = key.candidate, index = key.index, attempt = key.attempt);
    }
    let span = tracing::info_span!(parent: parent, "call",
        problem = %key.problem, iteration = key.iteration, role = %key.role,
        candidate = key.candidate, index = key.index, attempt = key.attempt,
        otel.name = %AgentName(&key.role));
    let set = |k: &'static str, v: span_ext::Value| span_ext::set_attribute(&span, k, v);
    set("gen_ai.operation.name", "invoke_agent".into());
    set("gen_ai.agent.name", key.role.clone().into());
    set("tmas.problem_id", key.problem.clone().into());
    set("tmas.iteration", i64::from(key.iteration).into());
    set("tmas.role", key.role.clone().into());
    if let Some(c) = key.candidate {
        set("tmas.candidate", i64::from(c).into());
    }
    if let Some(i) = key.index {
        set("tmas.verification_index", i64::from(i).into());
    }
    set("tmas.reask", i64::from(key.attempt).into());
    for (k, v) in labels {
        set(k, v.into());
    }
    if content_on_spans(trace_content) {
        let text = match request {
            ModelRequest::Chat(r) => serde_json::to_string(&r.messages).unwrap_or_default(),
            ModelRequest::Embeddings(r) => serde_json::to_string(&r.inputs).unwrap_or_default(),
        };
        set(
            "gen_ai.input.messages",
            span_ext::clip(&text, CONTENT_LIMIT).to_owned().into(),
        );
    }
    span
}

/// What the call produced, on its span.
pub(crate) fn record_outcome(span: &tracing::Span, outcome: &CallOutcome, trace_content: bool) {
    if !span_ext::exporting() {
        return;
    }
    let set = |k: &'static str, v: span_ext::Value| span_ext::set_attribute(span, k, v);
    match outcome {
        Ok(resp) => {
            let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX).into();
            set(
                "gen_ai.usage.input_tokens",
                tokens(resp.usage.prompt_tokens),
            );
            set(
                "gen_ai.usage.output_tokens",
                tokens(resp.usage.completion_tokens),
            );
            if let Some(reason) = &resp.finish_reason {
                set(
                    "gen_ai.response.finish_reasons",
                    span_ext::string_array([reason.clone()]),
                );
            }
            set("tmas.endpoint", resp.endpoint.clone().into());
            set("tmas.http_attempts", i64::from(resp.attempts).into());
            if let Some(vectors) = &resp.embeddings {
                let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX).into();
                set("tmas.embedding.vectors", n(vectors.len()));
                set(
                    "tmas.embedding.dimensions",
                    n(vectors.first().map_or(0, Vec::len)),
                );
            }
            if content_on_spans(trace_content) {
                let clip = |t: &str| span_ext::clip(t, CONTENT_LIMIT).to_owned();
                set("gen_ai.output.messages", clip(&resp.content).into());
                if let Some(r) = &resp.reasoning {
                    set("tmas.output.reasoning", clip(r).into());
                }
            }
        }
        Err(failure) => {
            set("error.type", failure.kind.as_str().into());
            span_ext::set_error(span, failure.message.clone());
        }
    }
}
