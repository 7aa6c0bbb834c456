//! The store-backed call executor: replays stored outcomes, records new ones.
//!
//! Sits between the role pools (and the judge) and the model client. For a call whose key
//! is in the store and whose prompt is byte-identical (the same prompt id, a digest of the
//! text's chunks, or else the same stored text:
//! [`super::read::StoreReader::prompt_matches`]) it returns the stored outcome without
//! touching the network; otherwise it sends the call and waits until the
//! outcome is *committed* before handing it back. That order is what makes a SIGKILL
//! cheap: anything the strategy has seen is on disk, so a resumed run re-sends only the
//! calls that were in flight.
//!
//! Once the run is stopping ([`StoreExecutor::stopping`] cancelled) no new call is sent:
//! each fails at once with kind `shutdown`, and its problem is marked *tainted* so that
//! its (incomplete) result is not stored as done — resume redoes it by replay. Likewise a
//! failure that says "this process stopped", not "the endpoint failed"
//! ([`FailureKind::is_transient`]) is never stored: resume makes that call for real. A
//! [`StoreExecutor::sibling_via`] shares the store, the counts and the taint but stops at a
//! time of its own, and then also cuts its calls in flight: the judge's, which may go on
//! judging problems already solved during the shutdown's grace period.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use tmas_actors::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, EmbeddingRequest, ModelRequest};
use tokio_util::sync::CancellationToken;

use super::RunStore;
use super::chunks::prompt_id;
use super::rows::{CallRow, Fact, now_ms};

/// Keys of stored failures by problem.
type StaleByProblem = HashMap<Arc<str>, HashSet<Arc<str>>>;

/// (problem, trace id) pairs already sent to the store.
type Traced = HashSet<(Arc<str>, String)>;

/// Counts of this process's calls.
#[derive(Debug, Default)]
pub struct ExecutorCounts {
    pub replayed: AtomicU64,
    pub sent: AtomicU64,
    pub refused: AtomicU64,
}

/// See the module documentation.
pub struct StoreExecutor {
    inner: Arc<dyn CallExecutor>,
    store: RunStore,
    /// Keys stored when the run (re)started; only these are looked up.
    stored: Arc<HashSet<String>>,
    stopping: CancellationToken,
    tainted: Arc<Mutex<HashSet<Arc<str>>>>,
    counts: Arc<ExecutorCounts>,
    wait_for_commit: bool,
    /// Cut calls in flight too once `stopping` is cancelled (a [`StoreExecutor::sibling_via`]).
    cut_in_flight: bool,
    /// Keys of calls stored as failures that this session sends again.
    stale_keys: Arc<HashSet<String>>,
    /// Those not made (yet) in this session, by problem: what is left of them when the
    /// problem is stored is no longer part of its results ([`StaleFailures`]).
    stale: Arc<Mutex<StaleByProblem>>,
    /// (problem, trace id) pairs already sent to the store (`super::traces`).
    traced: Arc<Mutex<Traced>>,
}

impl StoreExecutor {
    /// `false`: hand outcomes back as soon as they are queued for the store instead of
    /// committed. Cheaper under very high call rates, but a SIGKILL then also loses the
    /// outcomes of the last batch, which a resume sends again (used by the benchmark to
    /// measure the difference; runs always wait).
    pub fn with_commit_wait(mut self, wait: bool) -> Self {
        self.wait_for_commit = wait;
        self
    }

    pub fn new(inner: Arc<dyn CallExecutor>, store: RunStore, stored: HashSet<String>) -> Self {
        Self {
            inner,
            store,
            stored: Arc::new(stored),
            stopping: CancellationToken::new(),
            tainted: Arc::default(),
            counts: Arc::default(),
            wait_for_commit: true,
            cut_in_flight: false,
            stale_keys: Arc::default(),
            stale: Arc::default(),
            traced: Arc::default(),
        }
    }

    /// [`StoreExecutor::sibling_via`] sending through this executor's own `inner`.
    #[cfg(test)]
    pub fn sibling(&self, stopping: CancellationToken) -> Self {
        self.sibling_via(self.inner.clone(), stopping)
    }

    /// An executor over the same store, counts, taint and stale failures that sends its
    /// calls through `inner` (the judge's gate in front of the model client; replayed
    /// calls never reach it) and stops when `stopping` is cancelled instead, cutting its
    /// calls in flight at that moment (each fails with kind `shutdown` and taints its
    /// problem, as a refused call does).
    pub fn sibling_via(&self, inner: Arc<dyn CallExecutor>, stopping: CancellationToken) -> Self {
        Self {
            inner,
            store: self.store.clone(),
            stored: self.stored.clone(),
            stopping,
            tainted: self.tainted.clone(),
            counts: self.counts.clone(),
            wait_for_commit: self.wait_for_commit,
            cut_in_flight: true,
            stale_keys: self.stale_keys.clone(),
            stale: self.stale.clone(),
            traced: self.traced.clone(),
        }
    }

    /// The calls stored as failures, as (key, problem), that this session sends again
    /// (their keys are not among the looked-up ones).
    pub fn with_failures_to_resend(mut self, failed: Vec<(String, String)>) -> Self {
        let mut by_problem: HashMap<Arc<str>, HashSet<Arc<str>>> = HashMap::new();
        let mut keys = HashSet::with_capacity(failed.len());
        for (key, problem) in failed {
            by_problem
                .entry(problem.into())
                .or_default()
                .insert(key.as_str().into());
            keys.insert(key);
        }
        self.stale_keys = Arc::new(keys);
        self.stale = Arc::new(Mutex::new(by_problem));
        self
    }

    /// Records the trace of the current span (the call's, which the pool worker enters
    /// around [`CallExecutor::execute_call`]) as one of `problem`'s, once per trace; nothing
    /// when spans are not exported.
    fn record_trace(&self, problem: &Arc<str>) {
        use tmas_observability::span_ext;
        // Checked first: an unexported run does not even look up its current span.
        if !span_ext::exporting() {
            return;
        }
        let Some(trace_id) = span_ext::trace_id(&tracing::Span::current()) else {
            return;
        };
        let new = self
            .traced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((problem.clone(), trace_id.clone()));
        if new {
            self.store.send(Fact::Trace {
                problem_id: problem.clone(),
                trace_id,
                at_ms: now_ms(),
            });
        }
    }

    /// A handle to the stored failures not made again, for the result writer.
    pub fn stale_failures(&self) -> StaleFailures {
        StaleFailures(self.stale.clone())
    }

    /// Cancel to stop sending calls (graceful shutdown, store failure).
    pub fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// Whether a call of `problem` was refused or not stored (its result is incomplete).
    #[cfg(test)]
    pub fn is_tainted(&self, problem: &str) -> bool {
        self.tainted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(problem)
    }

    pub fn counts(&self) -> Arc<ExecutorCounts> {
        self.counts.clone()
    }

    /// A handle sharing this executor's taint set (for the result writer).
    pub fn taint_view(&self) -> TaintView {
        TaintView(self.tainted.clone())
    }
}

/// Calls stored as failures by an earlier session and not made again by a resumed
/// problem: once the problem is stored, they are dropped (`Fact::DropFailedCalls`).
#[derive(Clone, Default)]
pub struct StaleFailures(Arc<Mutex<StaleByProblem>>);

impl StaleFailures {
    /// The stale failures of `problem` (each key once).
    pub fn take(&self, problem: &str) -> Vec<Arc<str>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(problem)
            .map(|keys| keys.into_iter().collect())
            .unwrap_or_default()
    }
}

/// Read access to the tainted problems.
#[derive(Clone)]
pub struct TaintView(Arc<Mutex<HashSet<Arc<str>>>>);

impl TaintView {
    pub fn contains(&self, problem: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(problem)
    }
}

fn taint(set: &Mutex<HashSet<Arc<str>>>, problem: &Arc<str>) {
    set.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(problem.clone());
}

impl CallExecutor for StoreExecutor {
    /// Without a key nothing can be stored or replayed: a plain pass-through.
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        self.inner.execute(group, request)
    }

    fn execute_call(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: ChatRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        self.replay_or_send(key, group, ModelRequest::Chat(request))
    }

    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        self.replay_or_send(key, group, ModelRequest::Embeddings(request))
    }
}

impl StoreExecutor {
    /// A chat or embeddings call: replayed from the store, or sent and recorded (see the
    /// module documentation).
    fn replay_or_send(
        &self,
        key: &CallKey,
        group: Arc<str>,
        mut request: ModelRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let asked_at_ms = now_ms();
        let key_text: Arc<str> = key.to_string().into();
        request.tags_mut().call = Some(key_text.clone());
        self.record_trace(&key.problem);
        let key = key.clone();
        let inner = self.inner.clone();
        let store = self.store.clone();
        let stopping = self.stopping.clone();
        let tainted = self.tainted.clone();
        let counts = self.counts.clone();
        let maybe_stored = self.stored.contains(&*key_text);
        let wait_for_commit = self.wait_for_commit;
        let resending = !self.stale_keys.is_empty();
        let cut_in_flight = self.cut_in_flight;
        if self.stale_keys.contains(&*key_text) {
            // Made again: no longer stale, whatever its new outcome.
            let mut stale = self.stale.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(keys) = stale.get_mut(&key.problem) {
                keys.remove(&key_text);
            }
        }
        async move {
            let refused = || {
                taint(&tainted, &key.problem);
                counts.refused.fetch_add(1, Ordering::Relaxed);
                Err(CallFailure::new(
                    FailureKind::Shutdown,
                    format!("call {key_text} not sent: the run is stopping (it is made on resume)"),
                ))
            };
            if stopping.is_cancelled() {
                return refused();
            }
            if maybe_stored {
                let (k, asked) = (key_text.clone(), request.clone());
                let lookup = store
                    .read(move |reader| {
                        let Some(stored) = reader.call(&k)? else {
                            return Ok(None);
                        };
                        let same = match &asked {
                            ModelRequest::Chat(r) => {
                                reader.prompt_matches(&stored.prompt_id, &r.messages)?
                            }
                            // One segment: its id is the whole text's.
                            ModelRequest::Embeddings(r) => {
                                prompt_id(&r.prompt_text()) == stored.prompt_id
                            }
                        };
                        Ok(Some((stored, same)))
                    })
                    .await;
                match lookup {
                    Ok(Some((stored, true))) => {
                        counts.replayed.fetch_add(1, Ordering::Relaxed);
                        return stored.outcome;
                    }
                    // Expected once failed calls are sent again: the calls that quote
                    // their answers change too.
                    Ok(Some(_)) if resending => tracing::debug!(call = %key_text,
                        "stored call had a different prompt; sending it again"),
                    Ok(Some(_)) => tracing::warn!(call = %key_text,
                        "stored call had a different prompt; sending it again"),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(call = %key_text, error = %e,
                        "cannot read a stored call; sending it again"),
                }
            }
            counts.sent.fetch_add(1, Ordering::Relaxed);
            let send = match request.clone() {
                ModelRequest::Chat(r) => inner.execute(group.clone(), r),
                ModelRequest::Embeddings(r) => inner.execute_embeddings(&key, group.clone(), r),
            };
            let outcome = if cut_in_flight {
                tokio::select! {
                    outcome = send => outcome,
                    _ = stopping.cancelled() => return refused(),
                }
            } else {
                send.await
            };
            if let Err(f) = &outcome
                && f.kind.is_transient()
            {
                taint(&tainted, &key.problem);
                return outcome;
            }
            if let Err(f) = &outcome {
                metrics::counter!("tmas_calls_lost_total",
                    "role" => key.role.to_string(),
                    "endpoint" => f.endpoint.as_deref().unwrap_or("").to_string(),
                    "kind" => f.kind.as_str())
                .increment(1);
            }
            let row = CallRow {
                key: key.clone(),
                key_text,
                group,
                request,
                outcome: outcome.clone(),
                asked_at_ms,
                completed_at_ms: now_ms(),
            };
            if !wait_for_commit {
                store.send(Fact::Call(Box::new(row)));
            } else if let Err(e) = store.write(Fact::Call(Box::new(row))).await {
                tracing::error!(call = %key, error = %e, "call outcome could not be stored");
                taint(&tainted, &key.problem);
            }
            outcome
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use tmas_client::wire::{CallTags, ChatMessage, Sampling};

    use super::*;
    use crate::store::tests::{key, response};

    /// Answers every call at once, or never (`hang`).
    struct Endpoint {
        hang: bool,
    }

    impl CallExecutor for Endpoint {
        fn execute(&self, _: Arc<str>, _: ChatRequest) -> BoxFuture<'static, CallOutcome> {
            if self.hang {
                futures::future::pending().boxed()
            } else {
                futures::future::ready(Ok(response("ok"))).boxed()
            }
        }

        fn execute_embeddings(
            &self,
            _: &CallKey,
            _: Arc<str>,
            _: EmbeddingRequest,
        ) -> BoxFuture<'static, CallOutcome> {
            futures::future::pending().boxed()
        }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::user("judge this")],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 10,
                top_k: None,
            },
            tags: CallTags::default(),
            stream: false,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sibling_sends_after_the_runs_stop_and_cuts_its_calls_in_flight_at_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        let hanging = StoreExecutor::new(Arc::new(Endpoint { hang: true }), store.clone(), {
            HashSet::new()
        });
        let judge_stop = CancellationToken::new();
        let judge = hanging.sibling(judge_stop.clone());
        hanging.stopping().cancel();
        // The run's executor refuses; the sibling still sends.
        let refused = hanging
            .execute_call(&key("a", "solution", Some(0), None), "g".into(), request())
            .await;
        assert!(refused.is_err_and(|f| f.is_stop()));
        let judging =
            judge.execute_call(&key("b", "judge", Some(0), Some(0)), "g".into(), request());
        let judging = tokio::spawn(judging);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!judging.is_finished(), "sent, in flight");
        assert!(!hanging.is_tainted("b"));
        judge_stop.cancel();
        let cut = tokio::time::timeout(std::time::Duration::from_secs(5), judging)
            .await
            .expect("the call in flight ends at the sibling's stop")
            .unwrap();
        assert!(cut.is_err_and(|f| f.is_stop()), "cut at the sibling's stop");
        assert!(hanging.is_tainted("b"), "its problem is not stored as done");
        assert_eq!(
            store.read(|r| r.call_count()).await.unwrap(),
            0,
            "nothing stored"
        );

        // Before its stop, a sibling's calls are answered and stored as any.
        let answering = StoreExecutor::new(Arc::new(Endpoint { hang: false }), store.clone(), {
            HashSet::new()
        });
        let judge = answering.sibling(CancellationToken::new());
        answering.stopping().cancel();
        let answered = judge
            .execute_call(&key("c", "judge", Some(0), Some(0)), "g".into(), request())
            .await;
        assert!(answered.is_ok());
        assert_eq!(store.read(|r| r.call_count()).await.unwrap(), 1);
        store.close().await.unwrap();
    }
}
