//! Prompt and response text on spans (`--trace-content`, `observability.trace_content`)
//! is a setting of one run, not of the process: two variants of one `tmas experiment`
//! run at once in one process and export through its one exporter, one with the text
//! and one without, and each variant's agent-call spans follow its own setting.
//!
//! A `tmas experiment` child process: the exporter is process-wide, and the other tests
//! of this binary run engines at the same time.

use std::collections::{BTreeMap, HashMap};

use crate::support::cli::{ok, tmas, write_config};
use crate::support::otlp::{Collector, attr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_content_is_a_setting_of_each_run_not_of_the_process() {
    let collector = Collector::start().await;
    let tmp = tempfile::tempdir().expect("temporary directory");
    write_config(tmp.path(), "embedded-sim", 2, 1);
    let exp = tmp.path().join("exp.toml");
    // The variants differ in method too, which tells their run spans apart.
    let spec = format!(
        r#"
name = "content"
config = "config.toml"
report_iterations = [0]
set = {{ "observability.otlp_endpoint" = "{endpoint}", "observability.otlp_protocol" = "grpc" }}

[[variant]]
name = "with-text"
set = {{ "method.name" = "tmas", "observability.trace_content" = true }}

[[variant]]
name = "without-text"
set = {{ "method.name" = "verify-refine" }}
"#,
        endpoint = collector.endpoint
    );
    std::fs::write(&exp, spec).expect("experiment file written");
    let out = tmp.path().join("out");
    let args = [
        "experiment".to_owned(),
        exp.display().to_string(),
        "--out".to_owned(),
        out.display().to_string(),
        "--progress-every".to_owned(),
        "0".to_owned(),
    ];
    let output = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tmas(&args)
    })
    .await
    .expect("the experiment child is waited for");
    ok(output, "experiment exporting spans");
    let spans = collector.finish().await;

    // Run span → method; problem trace → its run's method (problems link to their run).
    let method_of_run: HashMap<&str, String> = spans
        .iter()
        .filter(|s| s.name == "run")
        .map(|s| {
            let method = attr(s, "tmas.method").expect("tmas.method on the run span");
            (s.span_id.as_str(), method)
        })
        .collect();
    assert_eq!(method_of_run.len(), 2, "one run span per variant");
    let method_of_trace: HashMap<&str, &str> = spans
        .iter()
        .filter(|s| s.name == "problem")
        .filter_map(|p| {
            let run = p
                .links
                .iter()
                .find_map(|l| method_of_run.get(l.span_id.as_str()))?;
            Some((p.trace_id.as_str(), run.as_str()))
        })
        .collect();
    assert_eq!(method_of_trace.len(), 4, "2 problems × 2 variants");

    // Per method: (agent-call spans, those with the prompt, those with a response text).
    let mut seen: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for call in spans.iter().filter(|s| s.name.starts_with("invoke_agent ")) {
        let method = method_of_trace
            .get(call.trace_id.as_str())
            .unwrap_or_else(|| panic!("call span outside a problem trace: {call:?}"));
        let entry = seen.entry(method).or_default();
        entry.0 += 1;
        entry.1 += usize::from(call.attributes.contains_key("gen_ai.input.messages"));
        entry.2 += usize::from(call.attributes.contains_key("gen_ai.output.messages"));
    }
    let (tmas_calls, tmas_in, tmas_out) = seen.get("Tmas").copied().unwrap_or_default();
    assert!(tmas_calls > 0, "{seen:?}");
    assert_eq!(
        tmas_in, tmas_calls,
        "every call of the run with text has its prompt"
    );
    assert_eq!(tmas_out, tmas_calls, "and its response");
    let (vr_calls, vr_in, vr_out) = seen.get("VerifyRefine").copied().unwrap_or_default();
    assert!(vr_calls > 0, "{seen:?}");
    assert_eq!(
        (vr_in, vr_out),
        (0, 0),
        "no text in the other run: {seen:?}"
    );
}
