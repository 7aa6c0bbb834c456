//! Spans: each call runs inside a `call` span (with its key fields) whose parent is its
//! iteration's span, itself a child of the problem's span. The problem span is a root (one
//! trace per problem), linked to whatever span the caller runs the runner in. This is what
//! lets a trace viewer show every agent interaction under its problem.

use std::sync::Arc;

use crate::support::TEST_TIMEOUT;
use crate::support::logs::{Capture, run_with_subscriber};
use crate::support::toy::*;
use tmas_actors::bank::{BankInit, NoopSink};
use tmas_actors::runner::{Admission, ProblemJob, RoleSettings, Runner, RunnerSettings};
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

#[test]
fn calls_run_in_call_spans_under_their_problem_span() {
    let capture = Capture::default();
    // Without an exporter the per-call spans are DEBUG (created only when a log level
    // asks for them), so this log is at DEBUG.
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("debug,ractor=warn"))
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    run_with_subscriber(subscriber, run_one_problem());

    let text = capture.text();
    let line_with = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line contains {needle:?} in:\n{text}"))
    };
    let call = line_with("content=p0/it0/solve/c1/a0");
    assert!(
        call.contains(
            "problem{problem=p0}:iteration{iteration=0}:call{problem=p0 iteration=0 role=solve candidate=1 attempt=0"
        ),
        "{call}"
    );
    let review = line_with("content=p0/it0/review/a0");
    assert!(
        review
            .contains("problem{problem=p0}:iteration{iteration=0}:call{problem=p0 iteration=0 role=review attempt=0"),
        "{review}"
    );
    let started = line_with("problem started");
    assert!(started.contains("problem{problem=p0}"), "{started}");
    assert!(
        !started.contains("run:"),
        "the problem span is a root: {started}"
    );
}

/// Runs one toy problem (two solve calls and a review) inside a `run` span.
async fn run_one_problem() {
    let settings = RunnerSettings::new(vec![
        RoleSettings::new("solve", "g-solve", 2),
        RoleSettings::new("review", "g-review", 1),
    ])
    .with_admission(Admission::Fixed {
        max_concurrent_problems: 1,
    });
    let fake = Arc::new(FakeExecutor::new());
    let runner = Runner::new(settings, Arc::new(Shared(fake)), Arc::new(NoopSink)).unwrap();
    let plan = ToyPlan {
        rounds: 1,
        fan_out: 2,
        ..Default::default()
    };
    let job = ProblemJob {
        id: "p0".into(),
        strategy: Box::new(Toy::new("p0", plan)),
        banks: vec![BankInit {
            name: "notes".into(),
            items: vec![],
            version: 0,
            policy: Arc::new(AppendOnly),
        }],
        parent: None,
        iterations: None,
    };
    let mut ok = 0;
    let run = runner.run([job], |r| ok += usize::from(r.result.is_ok()));
    tokio::time::timeout(TEST_TIMEOUT, run.instrument(tracing::info_span!("run")))
        .await
        .expect("run timed out")
        .unwrap();
    assert_eq!(ok, 1);
}
