//! The calls of each request: the runtime's [`CallExecutor`] for `tmas serve`.
//!
//! Every call names its problem (the call key), and each problem is one choice of one
//! request, registered here with its [`RequestCalls`]: the request's cancellation value,
//! its call budget and where its progress goes. A call of a cancelled request is not sent,
//! and one in flight when its request is cancelled is dropped at once (its connection
//! closes, its slot is freed), so a client that goes away stops its calls within
//! milliseconds without touching any other request's. The cancellation is a value each
//! request owns, never a process-wide switch.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use tmas_actors::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, ChatResponse, EmbeddingRequest};
use tmas_client::{ClientError, ModelClient};

use crate::method::{IterationResult, IterationWatcher, ProblemInput};
use crate::role::Role;

/// What a request's stream shows while its method runs (one choice's).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The first call of iteration `iteration` (0-based) went out.
    IterationStarted { iteration: u32 },
    /// A call finished (answered or failed).
    CallDone {
        role: Role,
        iteration: u32,
        answered: bool,
    },
    /// The method completed an iteration.
    IterationDone(IterationSummary),
}

/// An iteration as the progress stream tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationSummary {
    pub iteration: u32,
    /// Candidates with a solution, of how many.
    pub solved: usize,
    pub candidates: usize,
    /// Candidates every verification of which scored 1 (by the method's rule).
    pub fully_verified: usize,
    /// The iteration's best candidate and its average score, when scored.
    pub best: Option<(u32, Option<f64>)>,
}

impl IterationSummary {
    pub fn of(it: &IterationResult) -> Self {
        let best = it.best.map(|b| {
            let score = it.candidates.get(b as usize).and_then(|c| c.average_score);
            (b, score)
        });
        Self {
            iteration: it.iteration,
            solved: it
                .candidates
                .iter()
                .filter(|c| c.solution.is_some())
                .count(),
            candidates: it.candidates.len(),
            fully_verified: it.candidates.iter().filter(|c| c.fully_verified).count(),
            best,
        }
    }
}

/// The calls a request may still make (its choices share it).
#[derive(Debug)]
pub struct Budget {
    left: AtomicU64,
    cap: u64,
}

impl Budget {
    pub fn new(cap: u64) -> Arc<Self> {
        Arc::new(Self {
            left: AtomicU64::new(cap),
            cap,
        })
    }

    /// Takes one call; false once the budget is spent.
    fn take(&self) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
            .is_ok()
    }
}

/// One choice of one request, as its calls see it.
pub struct RequestCalls {
    /// The request's cancellation value: cancelled when its client goes away.
    pub cancel: CancellationToken,
    pub budget: Arc<Budget>,
    /// Where progress goes (streaming requests), tagged with the choice's index.
    progress: Option<(u32, mpsc::UnboundedSender<(u32, Progress)>)>,
    started: Mutex<BTreeSet<u32>>,
}

impl RequestCalls {
    pub fn new(
        cancel: CancellationToken,
        budget: Arc<Budget>,
        progress: Option<(u32, mpsc::UnboundedSender<(u32, Progress)>)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            cancel,
            budget,
            progress,
            started: Mutex::new(BTreeSet::new()),
        })
    }

    fn tell(&self, p: Progress) {
        if let Some((index, tx)) = &self.progress {
            // The stream may be gone (its client left): nothing waits for progress then.
            let _ = tx.send((*index, p));
        }
    }

    fn on_sent(&self, iteration: u32) {
        let first = self
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(iteration);
        if first {
            self.tell(Progress::IterationStarted { iteration });
        }
    }

    fn on_done(&self, role: Role, iteration: u32, outcome: &CallOutcome) {
        self.tell(Progress::CallDone {
            role,
            iteration,
            answered: outcome.is_ok(),
        });
    }
}

/// Tells a request's stream each iteration its method completes.
impl IterationWatcher for RequestCalls {
    fn iteration_done(&self, _problem: &ProblemInput, iteration: &IterationResult) {
        self.tell(Progress::IterationDone(IterationSummary::of(iteration)));
    }
}

/// Cancels a request's problems when dropped: when its handler (or its stream) is dropped
/// because the client went away, or when it is done.
pub struct CancelOnDrop(pub CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The model client behind the requests' cancellation values and budgets.
pub struct ServeCalls {
    client: ModelClient,
    problems: Mutex<HashMap<Arc<str>, Arc<RequestCalls>>>,
}

/// Why a call of a request that is over was not made.
pub fn cancelled() -> CallFailure {
    CallFailure::new(
        FailureKind::Shutdown,
        "the request was cancelled (its client went away)",
    )
}

fn budget_spent(cap: u64) -> CallFailure {
    CallFailure::new(
        FailureKind::Shutdown,
        format!("the request's call budget (serve.max_calls_per_request = {cap}) is spent"),
    )
}

impl ServeCalls {
    pub fn new(client: ModelClient) -> Self {
        Self {
            client,
            problems: Mutex::new(HashMap::new()),
        }
    }

    pub fn client(&self) -> &ModelClient {
        &self.client
    }

    fn problems(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<RequestCalls>>> {
        self.problems.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `problem`'s calls before its job is admitted.
    pub fn register(&self, problem: Arc<str>, calls: Arc<RequestCalls>) {
        self.problems().insert(problem, calls);
    }

    /// Forgets `problem` once it ended.
    pub fn unregister(&self, problem: &str) {
        self.problems().remove(problem);
    }

    /// Problems registered (running or waiting for admission).
    pub fn registered(&self) -> usize {
        self.problems().len()
    }

    /// Runs `call` for a call of `problem` (its `iteration`, its `role`) under its
    /// request's cancellation and budget.
    fn guarded(
        &self,
        problem: &str,
        iteration: u32,
        role: &str,
        call: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'static, CallOutcome> {
        let entry = self.problems().get(problem).cloned();
        let role = Role::from_label(role);
        // The task carries the caller's span (the agent call), so attempt spans and the
        // `traceparent` sent to the server hang under it.
        let span = tracing::Span::current();
        Box::pin(async move {
            let Some(entry) = entry else {
                // Not a request's problem (never the case in a server): just the call.
                return joined(tokio::spawn(call.instrument(span))).await;
            };
            if entry.cancel.is_cancelled() {
                return Err(cancelled());
            }
            if !entry.budget.take() {
                return Err(budget_spent(entry.budget.cap));
            }
            entry.on_sent(iteration);
            let cancel = entry.cancel.clone();
            // Dropping the call's future when the request is cancelled closes its
            // connection and frees its slot at once.
            let task = tokio::spawn(
                async move {
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => Err(cancelled()),
                        r = call => r,
                    }
                }
                .instrument(span),
            );
            let outcome = match joined(task).await {
                Err(f) if f.kind == FailureKind::Shutdown && entry.cancel.is_cancelled() => {
                    Err(cancelled())
                }
                other => other,
            };
            if let Some(role) = role {
                entry.on_done(role, iteration, &outcome);
            }
            outcome
        })
    }
}

/// The outcome of a call's task; a panic in it is reported as a failure.
async fn joined(task: tokio::task::JoinHandle<CallOutcome>) -> CallOutcome {
    match task.await {
        Ok(outcome) => outcome,
        Err(e) => Err(CallFailure::new(
            FailureKind::Panic,
            format!("model call task failed: {e}"),
        )),
    }
}

/// A call of the model client as a future of its outcome. Not spawned: dropping it (a
/// request cancelled) drops the HTTP call with it.
fn client_call(
    call: impl std::future::Future<Output = Result<ChatResponse, ClientError>> + Send + 'static,
) -> BoxFuture<'static, CallOutcome> {
    Box::pin(async move { call.await.map_err(CallFailure::from) })
}

/// Every call of a request's problem goes through the request's guard. A call arrives
/// here with its key in its tags (`execute_call` fills them, as the run store's executor
/// does in front of this one), so the guard reads the problem, iteration and role there.
impl CallExecutor for ServeCalls {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let (problem, iteration, role) = (
            request.tags.problem.clone(),
            request.tags.iteration,
            request.tags.role.clone(),
        );
        let client = self.client.clone();
        self.guarded(
            &problem,
            iteration,
            &role,
            client_call(async move { client.chat(&group, request).await }),
        )
    }

    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        mut request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        request.tags.identify(key);
        let client = self.client.clone();
        self.guarded(
            &key.problem,
            key.iteration,
            &key.role,
            client_call(async move { client.embed(&group, request).await }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_gives_exactly_its_cap_of_calls_to_all_its_takers() {
        let budget = Budget::new(50);
        let taken = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..40 {
                        if budget.take() {
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(taken.load(Ordering::Relaxed), 50);
        assert!(!budget.take(), "spent");
    }

    #[test]
    fn a_requests_cancellation_guard_cancels_when_dropped() {
        let token = CancellationToken::new();
        let guard = CancelOnDrop(token.clone());
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
    }
}
