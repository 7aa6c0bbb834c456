//! Spans: each call runs inside a `call` span (with its key fields) whose parent is its
//! iteration's span, itself a child of the problem's span. The problem span is a root (one
//! trace per problem), linked to whatever span the caller runs the runner in. This is what
//! lets a trace viewer show every agent interaction under its problem.

mod runtime_support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use runtime_support::*;
use tmas_actors::bank::{BankInit, NoopSink};
use tmas_actors::runner::{Admission, ProblemJob, RoleSettings, Runner, RunnerSettings};
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

/// Collects formatted log lines in memory.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_in_call_spans_under_their_problem_span() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    // Without an exporter the per-call spans are DEBUG (created only when a log level
    // asks for them), so this log is at DEBUG.
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("debug,ractor=warn"))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Actors run on the runtime's threads, so a thread-local default would miss them.
    tracing::subscriber::set_global_default(subscriber).unwrap();

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
    };
    let mut ok = 0;
    let run = runner.run([job], |r| ok += usize::from(r.result.is_ok()));
    tokio::time::timeout(TEST_TIMEOUT, run.instrument(tracing::info_span!("run")))
        .await
        .expect("run timed out")
        .unwrap();
    assert_eq!(ok, 1);

    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
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
