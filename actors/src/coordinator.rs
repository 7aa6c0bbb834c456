//! The per-problem coordinator actor: hosts one [`Strategy`] and performs its commands.
//!
//! Life of a coordinator:
//! 1. `pre_start` spawns the problem's bank actors as linked children, calls
//!    [`Strategy::start`] and dispatches the first commands. Doing this before the spawn
//!    returns means the runner sees the new problem's calls in the pool counters at once,
//!    which work-conserving admission relies on.
//! 2. Each [`Command::Call`] (and [`Command::Embed`]) becomes a pool [`Job`] whose reply is
//!    a `CallDone` message to
//!    this actor; each [`Command::UpdateBank`] is sent to the bank actor (in command order,
//!    so a bank sees a problem's updates in the order the strategy issued them) and comes
//!    back as `BankDone`. Outcomes are fed to the strategy; its new commands are dispatched.
//! 3. When the strategy reports finished, its output goes to the report callback and the
//!    actor stops (which stops its bank actors).
//!
//! The strategy is sans-IO and synchronous; its methods run under `catch_unwind`, so a
//! strategy bug fails that one problem with a message instead of taking a silent actor
//! down. A strategy that is neither finished nor waiting on anything has stalled — that is
//! reported as a failure rather than hanging the run.
//!
//! Spans (see `coordinator/spans.rs`): problem → iteration → call. An iteration span opens
//! with the first command of that iteration and closes when the next iteration starts (or
//! the problem ends); bank updates are sent from inside it, so with ractor's span
//! propagation the bank actor's `bank_update` span lands under the right iteration. The
//! strategy's `on_call` runs inside the call's span.

mod spans;

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::bank::{BankActor, BankArgs, BankError, BankInit, BankMsg, BankSink};
use crate::pool::{Job, RolePool};
use crate::priority::{CallPriority, ProblemLatencies, StageOrder};
use crate::stats::RuntimeStats;
use crate::strategy::{
    BankVersion, CallFailure, CallKey, CallOutcome, Command, ItemEmbeddings, Strategy,
};
use tmas_client::failure::FailureKind;
use tmas_client::wire::ModelRequest;

/// Where calls of one role go.
#[derive(Clone)]
pub struct RoleRoute {
    pub pool: RolePool,
    /// Endpoint group passed to the executor.
    pub group: Arc<str>,
    /// The role's position in the runner's role list, which lists roles in the order an
    /// iteration uses them ([`StageOrder`]): with the iteration, how far along a call's
    /// problem is.
    pub index: usize,
}

/// Role name → route; shared by all coordinators of a run.
pub type Routes = Arc<HashMap<Arc<str>, RoleRoute>>;

/// Why a problem produced no output.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProblemError {
    #[error("problem `{problem}`: the strategy panicked in {during}: {message}")]
    StrategyPanicked {
        problem: Arc<str>,
        during: &'static str,
        message: String,
    },
    #[error("problem `{problem}`: the strategy is not finished but waits on nothing")]
    Stalled { problem: Arc<str> },
    #[error(transparent)]
    Bank(#[from] BankError),
    #[error("problem `{problem}`: could not start bank `{bank}`: {reason}")]
    BankStart {
        problem: Arc<str>,
        bank: Arc<str>,
        reason: String,
    },
    #[error("problem `{problem}`: could not start the coordinator: {reason}")]
    Spawn { problem: Arc<str>, reason: String },
    #[error("problem `{problem}`: the coordinator stopped without reporting")]
    Vanished { problem: Arc<str> },
}

/// Receives a problem's result exactly once.
pub type ReportFn<O> = Box<dyn FnOnce(Result<O, ProblemError>) + Send + 'static>;

pub struct CoordinatorArgs<O> {
    pub problem: Arc<str>,
    pub strategy: Box<dyn Strategy<Output = O>>,
    pub routes: Routes,
    pub banks: Vec<BankInit>,
    pub sink: Arc<dyn BankSink>,
    /// The problem's admission rank (0 for the first admitted).
    pub seq: u64,
    /// How the pools order this problem's calls ([`crate::priority`]).
    pub priority: CallPriority,
    /// The run's stage order, shared by its coordinators.
    pub stages: Arc<StageOrder>,
    /// Latencies of the problem's completed calls (with the run's), for the
    /// latency-aware order.
    pub latencies: ProblemLatencies,
    /// Prompt and response text on call spans (when exporting).
    pub trace_content: bool,
    /// The problem's span; iteration spans are its children.
    pub span: tracing::Span,
    pub report: ReportFn<O>,
    /// Where finished iterations are counted (progress display, metrics).
    pub stats: Option<RuntimeStats>,
}

/// Messages of a coordinator (sent by pools and bank forwarders).
pub enum CoordinatorMsg {
    CallDone {
        key: CallKey,
        outcome: CallOutcome,
    },
    BankDone {
        result: Result<BankVersion, BankError>,
    },
}

/// The coordinator actor, generic over the strategy's output.
pub struct Coordinator<O>(PhantomData<fn() -> O>);

impl<O> Default for Coordinator<O> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

pub struct CoordinatorState<O> {
    problem: Arc<str>,
    /// `None` once finished or after the strategy panicked.
    strategy: Option<Box<dyn Strategy<Output = O>>>,
    routes: Routes,
    banks: HashMap<Arc<str>, ActorRef<BankMsg>>,
    bank_ids: HashMap<ActorId, Arc<str>>,
    seq: u64,
    priority: CallPriority,
    stages: Arc<StageOrder>,
    latencies: ProblemLatencies,
    trace_content: bool,
    span: tracing::Span,
    report: Option<ReportFn<O>>,
    calls_out: usize,
    banks_out: usize,
    failure: Option<ProblemError>,
    /// Open iteration spans, by iteration.
    iterations: BTreeMap<u32, tracing::Span>,
    /// Spans of the calls in flight.
    call_spans: HashMap<CallKey, tracing::Span>,
    stats: Option<RuntimeStats>,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

impl<O: Send + 'static> CoordinatorState<O> {
    /// Runs one strategy method; a panic becomes the problem's failure.
    fn drive(
        &mut self,
        during: &'static str,
        f: impl FnOnce(&mut dyn Strategy<Output = O>) -> Vec<Command>,
    ) -> Vec<Command> {
        let Some(strategy) = self.strategy.as_mut() else {
            return Vec::new();
        };
        let _problem = ProblemSpanGuard::enter(&self.span);
        match catch_unwind(AssertUnwindSafe(|| f(strategy.as_mut()))) {
            Ok(commands) => commands,
            Err(payload) => {
                self.strategy = None;
                self.fail(ProblemError::StrategyPanicked {
                    problem: self.problem.clone(),
                    during,
                    message: panic_message(payload.as_ref()),
                });
                Vec::new()
            }
        }
    }

    /// The span of iteration `t`, opened on first use. Earlier iterations are over once a
    /// later one has work: their spans close and they count as done.
    fn iteration_span(&mut self, t: u32) -> tracing::Span {
        if let Some(span) = self.iterations.get(&t) {
            return span.clone();
        }
        let later = self.iterations.split_off(&t);
        let finished = std::mem::replace(&mut self.iterations, later).len();
        self.count_iterations(finished);
        let span = spans::iteration_span(&self.span, &self.problem, t);
        self.iterations.insert(t, span.clone());
        span
    }

    /// Counts a successful call's latency for the latency-aware order (the only order
    /// that reads it).
    fn learn_latency(&mut self, key: &CallKey, outcome: &CallOutcome) {
        if self.priority != CallPriority::LatencyAware {
            return;
        }
        if let (Ok(resp), Some(route)) = (outcome, self.routes.get(&key.role)) {
            let latency_us = resp.latency_ms.saturating_mul(1000);
            self.latencies.observe(route.index, latency_us);
        }
    }

    fn count_iterations(&self, n: usize) {
        if let (Some(stats), true) = (&self.stats, n > 0) {
            stats.on_iterations_done(n as u64);
        }
    }

    fn fail(&mut self, err: ProblemError) {
        if self.failure.is_none() {
            self.failure = Some(err);
        }
    }

    fn dispatch(&mut self, myself: &ActorRef<CoordinatorMsg>, commands: Vec<Command>) {
        for command in commands {
            match command {
                Command::Call(spec) => {
                    self.dispatch_call(myself, spec.key, ModelRequest::Chat(spec.request));
                }
                Command::Embed(spec) => {
                    self.dispatch_call(myself, spec.key, ModelRequest::Embeddings(spec.request));
                }
                Command::UpdateBank {
                    bank,
                    iteration,
                    proposed,
                    embeddings,
                } => self.dispatch_bank(myself, bank, iteration, proposed, embeddings),
            }
        }
    }

    fn dispatch_call(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        key: CallKey,
        request: ModelRequest,
    ) {
        self.calls_out += 1;
        let parent = self.iteration_span(key.iteration);
        let labels = self.strategy.as_ref().map_or_else(Vec::new, |s| {
            catch_unwind(AssertUnwindSafe(|| s.call_labels(&key))).unwrap_or_default()
        });
        let span = spans::call_span(&parent, &key, labels, &request, self.trace_content);
        self.call_spans.insert(key.clone(), span.clone());
        let Some(route) = self.routes.get(&key.role) else {
            let failure = CallFailure::new(
                FailureKind::UnknownRole,
                format!(
                    "problem `{}`: no worker pool for role `{}`",
                    self.problem, key.role
                ),
            );
            let msg = CoordinatorMsg::CallDone {
                key,
                outcome: Err(failure),
            };
            // Delivered as a message so the strategy is never re-entered from dispatch.
            let _ = myself.send_message(msg);
            return;
        };
        let me = myself.clone();
        let reply = Box::new(move |key, outcome| {
            // Fails only if the problem was already given up; nothing waits then.
            let _ = me.send_message(CoordinatorMsg::CallDone { key, outcome });
        });
        let priority = self.priority.of_call(
            &self.stages,
            self.seq,
            key.iteration,
            route.index,
            &self.latencies,
        );
        let job = Job::of(key, request, route.group.clone(), reply)
            .with_priority(priority)
            .with_span(span);
        route.pool.submit(job);
    }

    fn dispatch_bank(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        bank: Arc<str>,
        iteration: u32,
        proposed: Option<Vec<String>>,
        embeddings: Option<Arc<ItemEmbeddings>>,
    ) {
        self.banks_out += 1;
        let iteration_span = self.iteration_span(iteration);
        let Some(actor) = self.banks.get(&bank) else {
            let err = BankError::Unknown {
                problem: self.problem.clone(),
                bank,
            };
            let _ = myself.send_message(CoordinatorMsg::BankDone { result: Err(err) });
            return;
        };
        // Send now (keeps command order per bank); wait for the reply off this actor.
        let (tx, rx) = ractor::concurrency::oneshot();
        let reply: RpcReplyPort<_> = tx.into();
        let gone = |reason: String| BankError::Gone {
            problem: self.problem.clone(),
            bank: bank.clone(),
            reason,
        };
        // Sent from inside the iteration's span: ractor hands it to the bank's handler.
        let sent = iteration_span.in_scope(|| {
            actor.send_message(BankMsg::Update {
                iteration,
                proposed,
                embeddings,
                reply,
            })
        });
        if sent.is_err() {
            let err = gone("it no longer takes messages".into());
            let _ = myself.send_message(CoordinatorMsg::BankDone { result: Err(err) });
            return;
        }
        let lost = gone("it stopped before replying".into());
        let me = myself.clone();
        tokio::spawn(async move {
            let result = rx.await.unwrap_or(Err(lost));
            let _ = me.send_message(CoordinatorMsg::BankDone { result });
        });
    }

    /// Reports and stops if the problem is over (failed, finished or stalled).
    fn settle(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        if self.report.is_none() {
            return;
        }
        let outstanding = self.calls_out + self.banks_out;
        let result = if let Some(err) = self.failure.take() {
            Err(err)
        } else if self.strategy.as_ref().is_some_and(|s| s.is_finished()) {
            if outstanding > 0 {
                tracing::warn!(
                    outstanding,
                    "strategy finished with commands outstanding; ignoring them"
                );
            }
            let Some(strategy) = self.strategy.take() else {
                return;
            };
            match catch_unwind(AssertUnwindSafe(|| strategy.finish())) {
                Ok(output) => Ok(output),
                Err(payload) => Err(ProblemError::StrategyPanicked {
                    problem: self.problem.clone(),
                    during: "finish",
                    message: panic_message(payload.as_ref()),
                }),
            }
        } else if outstanding == 0 {
            Err(ProblemError::Stalled {
                problem: self.problem.clone(),
            })
        } else {
            return;
        };
        match &result {
            Ok(_) => {
                tracing::debug!("problem finished");
                let open = std::mem::take(&mut self.iterations).len();
                self.count_iterations(open);
            }
            Err(err) => {
                tracing::error!(error = %err, "problem failed");
                tmas_observability::span_ext::set_error(&self.span, err.to_string());
                self.iterations.clear();
            }
        }
        self.call_spans.clear();
        if let Some(report) = self.report.take() {
            report(result);
        }
        myself.stop(None);
    }
}

impl<O: Send + 'static> Actor for Coordinator<O> {
    type Msg = CoordinatorMsg;
    type State = CoordinatorState<O>;
    type Arguments = CoordinatorArgs<O>;

    /// Never fails: problems found here are recorded and reported from `post_start`.
    async fn pre_start(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        args: CoordinatorArgs<O>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let CoordinatorArgs {
            problem,
            strategy,
            routes,
            banks,
            sink,
            seq,
            priority,
            stages,
            latencies,
            trace_content,
            span,
            report,
            stats,
        } = args;
        let mut state = CoordinatorState {
            problem: problem.clone(),
            strategy: Some(strategy),
            routes,
            banks: HashMap::new(),
            bank_ids: HashMap::new(),
            seq,
            priority,
            stages,
            latencies,
            trace_content,
            span,
            report: Some(report),
            calls_out: 0,
            banks_out: 0,
            failure: None,
            iterations: BTreeMap::new(),
            call_spans: HashMap::new(),
            stats,
        };
        for init in banks {
            let name = init.name.clone();
            let args = BankArgs {
                problem: problem.clone(),
                init,
                sink: sink.clone(),
            };
            match Actor::spawn_linked(None, BankActor, args, myself.get_cell()).await {
                Ok((bank, _)) => {
                    state.bank_ids.insert(bank.get_id(), name.clone());
                    state.banks.insert(name, bank);
                }
                Err(err) => {
                    let reason = err.to_string();
                    state.fail(ProblemError::BankStart {
                        problem: problem.clone(),
                        bank: name,
                        reason,
                    });
                    return Ok(state);
                }
            }
        }
        let span = state.span.clone();
        span.in_scope(|| {
            tracing::debug!("problem started");
            let commands = state.drive("start", |s| s.start());
            state.dispatch(&myself, commands);
        });
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        span.in_scope(|| state.settle(&myself));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        msg: CoordinatorMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        span.in_scope(|| {
            let commands = match msg {
                CoordinatorMsg::CallDone { key, outcome } => {
                    state.calls_out = state.calls_out.saturating_sub(1);
                    let call = state
                        .call_spans
                        .remove(&key)
                        .unwrap_or_else(tracing::Span::none);
                    spans::record_outcome(&call, &outcome, state.trace_content);
                    state.learn_latency(&key, &outcome);
                    call.in_scope(|| state.drive("on_call", |s| s.on_call(key, outcome)))
                }
                CoordinatorMsg::BankDone { result } => {
                    state.banks_out = state.banks_out.saturating_sub(1);
                    match result {
                        Ok(version) => state.drive("on_bank", |s| s.on_bank(version)),
                        Err(err) => {
                            state.fail(err.into());
                            Vec::new()
                        }
                    }
                }
            };
            if state.failure.is_none() {
                state.dispatch(&myself, commands);
            }
            state.settle(&myself);
        });
        Ok(())
    }

    /// Bank actors are children; one dying (a panic in a merge policy) fails the problem.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<CoordinatorMsg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            _ => return Ok(()),
        };
        if let Some(bank) = state.bank_ids.remove(&cell.get_id()) {
            state.banks.remove(&bank);
            let problem = state.problem.clone();
            state.fail(ProblemError::Bank(BankError::Gone {
                problem,
                bank,
                reason,
            }));
            let span = state.span.clone();
            span.in_scope(|| state.settle(&myself));
        }
        Ok(())
    }
}

thread_local! {
    /// The span of the problem whose strategy this thread is driving right now.
    static PROBLEM_SPAN: std::cell::RefCell<Option<tracing::Span>> =
        const { std::cell::RefCell::new(None) };
}

/// The span of the problem whose strategy is being driven on this thread, while a
/// strategy method runs (`None` elsewhere). Work a strategy's observer starts from there
/// (the engine judges each iteration as it completes) hangs under it, in the problem's
/// trace, rather than under whichever call's span is current.
pub fn current_problem_span() -> Option<tracing::Span> {
    PROBLEM_SPAN.with(|s| s.borrow().clone())
}

/// Sets [`current_problem_span`] for as long as it lives.
struct ProblemSpanGuard(Option<tracing::Span>);

impl ProblemSpanGuard {
    fn enter(span: &tracing::Span) -> Self {
        Self(PROBLEM_SPAN.with(|s| s.replace(Some(span.clone()))))
    }
}

impl Drop for ProblemSpanGuard {
    fn drop(&mut self) {
        let previous = self.0.take();
        PROBLEM_SPAN.with(|s| *s.borrow_mut() = previous);
    }
}
