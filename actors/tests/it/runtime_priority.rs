//! The latency-aware call order as the runner runs it: coordinators learn their
//! problems' latencies from completed calls, and when calls of a slow and a fast problem
//! wait in one pool, the slow problem's go first — where least-progress-first serves the
//! older problem first.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tmas_actors::bank::NoopSink;
use tmas_actors::runner::{
    Admission, CallPriority, ProblemJob, RoleSettings, Runner, RunnerSettings, RuntimeStats,
};
use tmas_actors::strategy::{
    BankVersion, CallExecutor, CallFailure, CallKey, CallOutcome, Command, Strategy,
};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, ChatResponse, EmbeddingRequest, Usage};

use crate::support::TEST_TIMEOUT;
use crate::support::toy::spec;

/// Calls of iteration 1 per problem.
const FAN_OUT: u32 = 4;
/// Workers of the one pool.
const WORKERS: usize = 2;

/// Iteration 0: one `solve` call; iteration 1: [`FAN_OUT`] of them; then finished.
struct Fan {
    problem: &'static str,
    pending: u32,
    iteration: u32,
}

impl Strategy for Fan {
    type Output = ();

    fn start(&mut self) -> Vec<Command> {
        self.pending = 1;
        vec![Command::Call(spec(self.problem, 0, "solve", Some(0)))]
    }

    fn on_call(&mut self, _: CallKey, _: CallOutcome) -> Vec<Command> {
        self.pending -= 1;
        if self.pending > 0 || self.iteration == 1 {
            return Vec::new();
        }
        self.iteration = 1;
        self.pending = FAN_OUT;
        (0..FAN_OUT)
            .map(|c| Command::Call(spec(self.problem, 1, "solve", Some(c))))
            .collect()
    }

    fn on_bank(&mut self, _: BankVersion) -> Vec<Command> {
        Vec::new()
    }

    fn is_finished(&self) -> bool {
        self.iteration == 1 && self.pending == 0
    }

    fn finish(self: Box<Self>) {}
}

/// Answers at once, reporting 1 s of latency for problem `slow` and 1 ms for the others.
/// The two calls of iteration 0 wait for each other. The first [`WORKERS`] calls of iteration 1 hold both workers until both are held and
/// every other call of iteration 1 waits in the pool; each call after them takes 20 ms,
/// so the pool hands them out in pairs whose order is visible.
#[derive(Default)]
struct Recorder {
    stats: OnceLock<RuntimeStats>,
    /// Problems of the iteration-1 calls, in the order they started.
    started: Mutex<Vec<String>>,
    released: AtomicBool,
    /// Calls of iteration 0 started.
    first_calls: AtomicUsize,
}

impl Recorder {
    async fn run(self: Arc<Self>, key: CallKey) -> CallOutcome {
        if key.iteration == 0 {
            // Both problems' first calls run together: neither problem's iteration 1 can
            // start before the other problem's first call has a worker.
            self.first_calls.fetch_add(1, Ordering::SeqCst);
            let deadline = tokio::time::Instant::now() + TEST_TIMEOUT;
            while self.first_calls.load(Ordering::SeqCst) < 2 {
                if tokio::time::Instant::now() > deadline {
                    return Err(CallFailure::new(
                        FailureKind::Status,
                        "the other first call never ran",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let held = {
            let mut started = self.started.lock().unwrap();
            if key.iteration == 1 {
                started.push(key.problem.to_string());
            }
            key.iteration == 1 && started.len() <= WORKERS
        };
        if held {
            let waiting = (2 * FAN_OUT) as u64 - WORKERS as u64;
            let deadline = tokio::time::Instant::now() + TEST_TIMEOUT;
            // Latched: the first held call to see the condition releases both.
            while !self.released.load(Ordering::SeqCst) {
                if self.started.lock().unwrap().len() >= WORKERS && self.queued() >= waiting {
                    self.released.store(true, Ordering::SeqCst);
                    break;
                }
                if tokio::time::Instant::now() > deadline {
                    return Err(CallFailure::new(
                        FailureKind::Status,
                        "the other calls never queued",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        } else if key.iteration == 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(ChatResponse {
            content: key.to_string().into(),
            reasoning: None,
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
                estimated: false,
            },
            finish_reason: Some("stop".into()),
            latency_ms: if &*key.problem == "slow" { 1000 } else { 1 },
            endpoint: "e".into(),
            attempts: 1,
            max_tokens_sent: 16,
            embeddings: None,
        })
    }

    fn queued(&self) -> u64 {
        self.stats
            .get()
            .map_or(0, |s| s.snapshot().roles.iter().map(|r| r.queued).sum())
    }
}

struct Executor(Arc<Recorder>);

impl CallExecutor for Executor {
    fn execute(&self, _: Arc<str>, _: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        async {
            Err(CallFailure::new(
                FailureKind::Status,
                "calls go through execute_call",
            ))
        }
        .boxed()
    }

    fn execute_call(
        &self,
        key: &CallKey,
        _: Arc<str>,
        _: ChatRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        self.0.clone().run(key.clone()).boxed()
    }

    fn execute_embeddings(
        &self,
        _: &CallKey,
        _: Arc<str>,
        _: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        async {
            Err(CallFailure::new(
                FailureKind::Status,
                "this test sends no embeddings calls",
            ))
        }
        .boxed()
    }
}

/// Runs `fast` (admitted first) and `slow` together; the problems of the iteration-1
/// calls in the order the pool released them after the two held ones.
async fn released_order(priority: CallPriority) -> Vec<String> {
    let settings = RunnerSettings::new(vec![RoleSettings::new("solve", "g", WORKERS)])
        .with_admission(Admission::Fixed {
            max_concurrent_problems: 2,
        })
        .with_priority(priority)
        .with_iterations(2);
    let recorder = Arc::new(Recorder::default());
    let runner = Runner::new(
        settings,
        Arc::new(Executor(recorder.clone())),
        Arc::new(NoopSink),
    )
    .unwrap();
    let _ = recorder.stats.set(runner.stats());
    let jobs = ["fast", "slow"].map(|problem| ProblemJob {
        id: problem.into(),
        strategy: Box::new(Fan {
            problem,
            pending: 0,
            iteration: 0,
        }) as Box<dyn Strategy<Output = ()>>,
        banks: Vec::new(),
        parent: None,
        iterations: None,
    });
    let mut failures = Vec::new();
    let run = runner.run(jobs, |r| {
        if let Err(e) = r.result {
            failures.push(e.to_string());
        }
    });
    let summary = tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("run timed out")
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(summary.stats.roles[0].failed, 0, "{summary:?}");
    let started = recorder.started.lock().unwrap().clone();
    assert_eq!(started.len(), 2 * FAN_OUT as usize);
    started[WORKERS..].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_aware_serves_the_slow_problems_waiting_calls_first() {
    // Released in pairs (two workers): the first pair after the held calls is the pool's
    // top two, by priority.
    let aware = released_order(CallPriority::LatencyAware).await;
    assert_eq!(&aware[..2], ["slow", "slow"], "{aware:?}");
    // Least-progress-first: both at the same step, so the older problem goes first.
    let lpf = released_order(CallPriority::LeastProgressFirst).await;
    assert_eq!(&lpf[..2], ["fast", "fast"], "{lpf:?}");
}
