//! A demo run exported to an in-process OTLP receiver while its metrics endpoint is
//! scraped.
//!
//! Layout checked (documented in README "See a run in Jaeger"): one trace per problem
//! (`problem` root → `iteration` → agent call `invoke_agent <role>` → attempt
//! `chat <model>`, plus `bank_update` under its iteration), problems linked to the `run`
//! span; one agent-call span per call the strategy made (per role and iteration, as
//! counted in the run's own records); GenAI attributes; the simulator saw a
//! `traceparent` naming the exported attempt span; every number typed as the GenAI and
//! HTTP conventions type it (integers, doubles with the configured value exactly), and
//! only namespaced attributes. Metrics: `tmas_calls_in_flight` never exceeds the
//! endpoint's cap.
//!
//! The run is a `tmas run` child process: the exporter and the metrics recorder are
//! process-wide, and the other tests of this binary run engines at the same time.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::engine::{dataset, header, sim_options, spawn_process_on_sim};
use crate::support::otlp::{Collector, Typed, attr, typed};
use fake_opentelemetry_collector::ExportedSpan;
use tmas::sim::LatencyModel;
use tmas_observability::prometheus::parse_text;

const CAP: usize = 4;
/// The default `top_p` of every role; an `f32` widened would arrive as 0.949999988079071.
const TOP_P: f64 = 0.95;

/// Scrapes `/metrics` until stopped; returns (scrapes parsed, max calls in flight seen).
async fn scrape(url: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<(usize, f64, bool)>>) {
    let http = reqwest::Client::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(resp) = http.get(&url).send().await {
            let text = resp.text().await.unwrap_or_default();
            let samples = parse_text(&text).expect("the metrics endpoint serves Prometheus text");
            let mut s = seen.lock().unwrap();
            s.0 += 1;
            for sample in samples.iter().filter(|s| s.name == "tmas_calls_in_flight") {
                assert_eq!(sample.label("endpoint"), Some("sim"));
                s.1 = s.1.max(sample.value);
            }
            s.2 |= samples
                .iter()
                .any(|s| s.name == "tmas_request_duration_seconds_bucket");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn by_id(spans: &[ExportedSpan]) -> HashMap<&str, &ExportedSpan> {
    spans.iter().map(|s| (s.span_id.as_str(), s)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_run_exports_one_trace_per_problem_and_serves_metrics() {
    let collector = Collector::start().await;
    let endpoint = format!("observability.otlp_endpoint=\"{}\"", collector.endpoint);
    // Port 0: the child binds a free port and logs it (a port picked here could be taken
    // by another test before the child binds it).
    let metrics = "observability.metrics_addr=\"127.0.0.1:0\"";
    let cap = format!("endpoints.sim.max_in_flight={CAP}");

    let mut opts = sim_options(5);
    opts.latency = LatencyModel::Fixed(Duration::from_millis(30));
    let run = spawn_process_on_sim(
        opts,
        dataset(2),
        &[
            &endpoint,
            "observability.otlp_protocol=\"grpc\"",
            metrics,
            &cap,
        ],
        // The metrics endpoint logs its address at INFO.
        "warn,tmas_observability::prometheus=info",
    )
    .await;
    let line = run.line_with("serving Prometheus metrics").await;
    let url = line
        .split_once("url=")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no url in {line:?}"))
        .to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new((0usize, 0.0f64, false)));
    let scraper = tokio::spawn(scrape(url, stop.clone(), seen.clone()));
    let finished = run.finish().await;
    stop.store(true, Ordering::Relaxed);
    scraper.await.expect("the scraper does not panic");
    let spans = collector.finish().await;

    // Metrics: scraped during the run, never above the cap, histograms rendered.
    let (scrapes, max_in_flight, histograms) = *seen.lock().unwrap();
    assert!(
        scrapes >= 2,
        "the metrics endpoint answered {scrapes} scrapes"
    );
    assert!(
        max_in_flight <= CAP as f64,
        "in flight {max_in_flight} > cap {CAP}"
    );
    assert!(histograms, "latency histograms are served");
    assert!(finished.sim.peak_in_flight <= CAP as u64);

    let ids = by_id(&spans);
    let named = |prefix: &str| -> Vec<&ExportedSpan> {
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    // One `run` span; one root `problem` span per problem, each its own trace, linked to it.
    let runs = named("run");
    assert_eq!(runs.len(), 1, "one run span");
    let problems = named("problem");
    assert_eq!(problems.len(), 2, "one problem span per problem");
    let mut trace_of: BTreeMap<String, String> = BTreeMap::new();
    for p in &problems {
        assert!(p.parent_span_id.is_empty(), "problem spans are roots");
        assert!(
            p.links.iter().any(|l| l.span_id == runs[0].span_id),
            "problem links to the run: {p:?}"
        );
        let id = attr(p, "tmas.problem_id").expect("tmas.problem_id on the problem span");
        trace_of.insert(id, p.trace_id.clone());
    }
    assert_ne!(problems[0].trace_id, problems[1].trace_id);

    // Every attempt span chains up: attempt → call → iteration → problem, in one trace.
    let attempts = named("chat ");
    assert!(!attempts.is_empty(), "attempt spans are exported");
    for a in &attempts {
        let call = ids[a.parent_span_id.as_str()];
        assert!(call.name.starts_with("invoke_agent "), "{}", call.name);
        let iteration = ids[call.parent_span_id.as_str()];
        assert_eq!(iteration.name, "iteration");
        let problem = ids[iteration.parent_span_id.as_str()];
        assert_eq!(problem.name, "problem");
        assert!(
            [call, iteration, problem]
                .iter()
                .all(|s| s.trace_id == a.trace_id)
        );
        // GenAI attributes of an inference request.
        assert_eq!(attr(a, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(a, "gen_ai.request.model").as_deref(), Some("tmas-sim"));
        for key in [
            "gen_ai.request.temperature",
            "gen_ai.request.max_tokens",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
            "server.address",
        ] {
            assert!(a.attributes.contains_key(key), "{key} missing on {a:?}");
        }
        // Integers as integers (the HTTP and GenAI conventions' `int`).
        for key in [
            "gen_ai.request.max_tokens",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "server.port",
            "http.response.status_code",
            "tmas.retry",
        ] {
            assert!(
                matches!(typed(a, key), Some(Typed::Int(_))),
                "{key} is not an integer: {:?} on {a:?}",
                typed(a, key)
            );
        }
        assert_eq!(typed(a, "http.response.status_code"), Some(Typed::Int(200)));
        assert_eq!(typed(a, "tmas.retry"), Some(Typed::Int(0)));
        // Sampling parameters: doubles holding the configured values exactly (the
        // default temperatures: 1.0 for solution and verification, 0.6 for the rest).
        let temperature = match attr(a, "tmas.role").as_deref() {
            Some("solution" | "verification") => 1.0,
            _ => 0.6,
        };
        assert_eq!(
            typed(a, "gen_ai.request.temperature"),
            Some(Typed::Double(temperature)),
            "{a:?}"
        );
        assert_eq!(typed(a, "gen_ai.request.top_p"), Some(Typed::Double(TOP_P)));
        assert_eq!(
            typed(a, "gen_ai.request.model"),
            Some(Typed::Str("tmas-sim".into()))
        );
    }
    // Only namespaced attributes: no bare `tracing` field (`problem`, `iteration`, `role`,
    // `target`, …) on any span.
    for s in &spans {
        let bare: Vec<&String> = s.attributes.keys().filter(|k| !k.contains('.')).collect();
        assert!(bare.is_empty(), "{} carries {bare:?}", s.name);
    }

    // Agent-call spans per (problem, iteration, role) = the calls the run recorded.
    let mut exported: BTreeMap<(String, u32, String), u32> = BTreeMap::new();
    for c in named("invoke_agent ") {
        let it: u32 = attr(c, "tmas.iteration").unwrap().parse().unwrap();
        for key in ["tmas.iteration", "tmas.reask", "gen_ai.usage.input_tokens"] {
            assert!(matches!(typed(c, key), Some(Typed::Int(_))), "{key}: {c:?}");
        }
        let key = (
            attr(c, "tmas.problem_id").unwrap(),
            it,
            attr(c, "tmas.role").unwrap(),
        );
        *exported.entry(key).or_default() += 1;
        assert_eq!(
            attr(c, "gen_ai.operation.name").as_deref(),
            Some("invoke_agent")
        );
        let role = attr(c, "tmas.role").unwrap();
        if role == "solution" {
            assert!(
                matches!(
                    attr(c, "tmas.branch").as_deref(),
                    Some("explore" | "exploit")
                ),
                "solution calls carry their branch: {c:?}"
            );
        }
        if role == "verification" {
            assert!(
                matches!(typed(c, "tmas.score"), Some(Typed::Double(_))),
                "verification score: {c:?}"
            );
            assert!(attr(c, "tmas.verification_index").is_some());
        }
        assert!(
            !c.attributes.contains_key("gen_ai.input.messages"),
            "no prompt text without --trace-content"
        );
    }
    let mut recorded: BTreeMap<(String, u32, String), u32> = BTreeMap::new();
    for r in &finished.records {
        for it in &r.outcome.iterations {
            let c = &it.calls;
            for (role, n) in [
                ("solution", c.solution),
                ("verification", c.verification),
                ("summary", c.summary),
                ("experience", c.experience),
                ("guideline", c.guideline),
            ] {
                if n > 0 {
                    recorded.insert((r.problem_id.clone(), it.iteration, role.into()), n);
                }
            }
        }
    }
    assert_eq!(exported, recorded, "one agent-call span per call made");
    // Iterations: 3 per problem, each under its problem; bank updates under iterations.
    assert_eq!(named("iteration").len(), 2 * 3);
    let banks = named("bank_update");
    assert!(!banks.is_empty(), "bank updates are exported");
    for b in banks {
        assert_eq!(ids[b.parent_span_id.as_str()].name, "iteration", "{b:?}");
        for key in [
            "tmas.bank.size",
            "tmas.bank.version",
            "tmas.bank.rejected",
            "tmas.iteration",
        ] {
            assert!(matches!(typed(b, key), Some(Typed::Int(_))), "{key}: {b:?}");
        }
        assert!(
            matches!(typed(b, "tmas.bank.name"), Some(Typed::Str(_))),
            "{b:?}"
        );
    }

    // The simulator received a traceparent naming the exported attempt span.
    let attempt_ids: HashMap<&str, &ExportedSpan> =
        attempts.iter().map(|a| (a.span_id.as_str(), *a)).collect();
    let requests = &finished.sim.recent_requests;
    assert!(!requests.is_empty());
    for r in requests {
        let tp = header(r, "traceparent");
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "traceparent `{tp}` on {:?}", r.headers);
        let span = attempt_ids
            .get(parts[2])
            .unwrap_or_else(|| panic!("no exported attempt span {}", parts[2]));
        assert_eq!(span.trace_id, parts[1]);
        assert_eq!(trace_of[header(r, "x-tmas-problem")], parts[1]);
    }
}

/// With the LLM judge on, its calls are in their problem's trace, under a `judging` span
/// of the problem: as many traces as problems (plus the run's), none made of one judge
/// call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_calls_are_traced_under_their_problems_judging_span() {
    let collector = Collector::start().await;
    let endpoint = format!("observability.otlp_endpoint=\"{}\"", collector.endpoint);
    let mut opts = sim_options(5);
    opts.latency = LatencyModel::Fixed(Duration::from_millis(5));
    let run = spawn_process_on_sim(
        opts,
        dataset(3),
        &[
            &endpoint,
            "observability.otlp_protocol=\"grpc\"",
            "method.iterations=2",
            "judge.enabled=true",
            "judge.repeats=2",
            "judge.policy=\"always\"",
        ],
        "warn",
    )
    .await;
    run.finish().await;
    let spans = collector.finish().await;
    let ids = by_id(&spans);
    let problems: Vec<&ExportedSpan> = spans.iter().filter(|s| s.name == "problem").collect();
    assert_eq!(problems.len(), 3);
    let judge_attempts: Vec<&ExportedSpan> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat ") && attr(s, "tmas.role").as_deref() == Some("judge"))
        .collect();
    assert!(!judge_attempts.is_empty(), "judge calls are exported");
    for a in &judge_attempts {
        let judging = ids[a.parent_span_id.as_str()];
        assert_eq!(judging.name, "judging", "{a:?}");
        let problem = ids[judging.parent_span_id.as_str()];
        assert_eq!(problem.name, "problem");
        assert_eq!(a.trace_id, problem.trace_id);
    }
    let traces: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 3 + 1, "one trace per problem and the run's");
}
