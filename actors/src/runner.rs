//! Runs many problems through shared role pools: the entry point of `tmas run`.
//!
//! The [`Runner`] starts one [`RolePool`] per role, then admits problems from a (lazy)
//! iterator according to an [`Admission`] policy, each as a [`Coordinator`] actor. Results
//! are handed to the caller's `on_done` callback on the caller's task, in completion order,
//! so the caller can store each one as soon as it exists.
//!
//! A coordinator counts as active until its actor has actually stopped, so the limit holds
//! for live actors, not just for unreported problems. Cancelling
//! [`RunnerSettings::cancel`] stops admission; problems already running finish normally.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use tmas_actors::runner::*;
//! # use tmas_actors::bank::NoopSink;
//! # async fn demo(executor: Arc<dyn tmas_actors::strategy::CallExecutor>,
//! #     jobs: Vec<ProblemJob<String>>) -> Result<(), RuntimeError> {
//! let settings = RunnerSettings::new(vec![RoleSettings::new("solution", "default", 8)]);
//! let runner = Runner::new(settings, executor, Arc::new(NoopSink))?;
//! let progress = runner.stats(); // poll progress.snapshot() from a display task
//! let summary = runner.run(jobs, |report| println!("{}: {:?}", report.problem, report.result)).await?;
//! # Ok(()) }
//! ```

mod admission;

use std::collections::HashMap;
use std::sync::Arc;

use ractor::Actor;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use crate::priority::{CallPriority, StageOrder};
pub use crate::stats::{RuntimeStats, StatsSnapshot};
pub use admission::{Admission, AdmissionBounds, AdmissionKind};

use crate::bank::{BankInit, BankSink};
use crate::coordinator::{Coordinator, CoordinatorArgs, ProblemError, RoleRoute};
use crate::pool::{PoolError, PoolSettings, RolePool};
use crate::priority::{ProblemLatencies, RunLatencies};
use crate::strategy::{CallExecutor, Strategy};

/// One role's pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSettings {
    pub role: Arc<str>,
    /// Endpoint group the role's calls go to.
    pub group: Arc<str>,
    /// Concurrency limit of the role.
    pub workers: usize,
    /// The role's calls run side by side with the previous role's in an iteration (a
    /// method's two bank updates), not after them: the latency-aware order counts the
    /// longer of the two, not both ([`StageOrder`]).
    pub beside_previous: bool,
}

impl RoleSettings {
    pub fn new(role: impl Into<Arc<str>>, group: impl Into<Arc<str>>, workers: usize) -> Self {
        Self {
            role: role.into(),
            group: group.into(),
            workers,
            beside_previous: false,
        }
    }

    /// Marks the role as running side by side with the one listed before it.
    pub fn beside_previous(mut self) -> Self {
        self.beside_previous = true;
        self
    }
}

/// Everything the runner needs besides the problems, executor and sink.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// One pool per role, listed in the order an iteration uses them (the stage order
    /// the call priorities read, [`StageOrder`]).
    pub roles: Vec<RoleSettings>,
    pub admission: Admission,
    pub priority: CallPriority,
    /// How many iterations each problem runs, when known. The latency-aware order needs
    /// it (a problem's remaining chain counts the iterations it has left); a job that
    /// says its own ([`ProblemJob::iterations`]) is counted by that instead.
    pub iterations: Option<u32>,
    /// Put prompt and response text on the call spans (when an exporter runs). A setting
    /// of this run, not of the process: two runs in one process may differ.
    pub trace_content: bool,
    /// A call that crashes this many workers fails with kind `worker_panic`.
    pub job_crash_limit: u32,
    /// Cancel to stop admitting problems (running ones finish).
    pub cancel: CancellationToken,
}

impl RunnerSettings {
    /// Defaults: one problem at a time, least-progress-first, iterations unknown, no
    /// text on spans, a call may crash 3 workers.
    pub fn new(roles: Vec<RoleSettings>) -> Self {
        Self {
            roles,
            admission: Admission::default(),
            priority: CallPriority::default(),
            iterations: None,
            trace_content: false,
            job_crash_limit: 3,
            cancel: CancellationToken::new(),
        }
    }

    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    pub fn with_priority(mut self, priority: CallPriority) -> Self {
        self.priority = priority;
        self
    }

    pub fn with_iterations(mut self, iterations: u32) -> Self {
        self.iterations = Some(iterations);
        self
    }

    /// The stage order of [`Self::roles`].
    pub fn stage_order(&self) -> Result<StageOrder, RuntimeError> {
        let beside: Vec<bool> = self.roles.iter().map(|r| r.beside_previous).collect();
        StageOrder::new(&beside, self.iterations).map_err(|e| {
            let first = self.roles.first().map_or("", |r| &*r.role);
            RuntimeError::Settings(format!("roles.{first}: {e}"))
        })
    }

    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |m: String| Err(RuntimeError::Settings(m));
        if self.roles.is_empty() {
            return bad("roles: at least one role is needed".into());
        }
        let mut seen = std::collections::HashSet::new();
        for r in &self.roles {
            if !seen.insert(r.role.clone()) {
                return bad(format!("roles: role `{}` is listed twice", r.role));
            }
            if r.workers == 0 {
                return bad(format!("roles.{}.workers must be at least 1", r.role));
            }
        }
        if self.job_crash_limit == 0 {
            return bad("job_crash_limit must be at least 1".into());
        }
        if self.priority == CallPriority::LatencyAware && self.iterations.is_none() {
            return bad(format!(
                "priority `{}` needs `iterations` (how many iterations a problem runs)",
                self.priority
            ));
        }
        self.stage_order()?;
        self.admission.validate().map_err(RuntimeError::Settings)
    }
}

/// One problem to run: its id, a fresh strategy and its banks' starting points.
pub struct ProblemJob<O> {
    pub id: Arc<str>,
    pub strategy: Box<dyn Strategy<Output = O>>,
    pub banks: Vec<BankInit>,
    /// The span the problem's span is a child of (a server's request, itself continuing
    /// its caller's trace). `None`: the problem's span is the root of a trace of its own,
    /// linked to the span the runner runs in.
    pub parent: Option<tracing::Span>,
    /// How many iterations this problem's strategy runs, when the job knows: the
    /// latency-aware order counts what is left of the problem from this rather than from
    /// [`RunnerSettings::iterations`], since problems of one runner may run different
    /// numbers (each request to a server asks for its own). `None`: the runner's.
    pub iterations: Option<u32>,
}

/// A problem's result as given to `on_done`.
#[derive(Debug)]
pub struct ProblemReport<O> {
    pub problem: Arc<str>,
    pub result: Result<O, ProblemError>,
    /// The problem's span (the root of its trace; disabled for a problem that never
    /// started): what the caller does with the result next, such as judging it, can be
    /// traced under it. The span ends when the last handle to it is dropped.
    pub span: tracing::Span,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// Cancellation stopped admission before the problem list ran out.
    pub stopped_early: bool,
    pub stats: StatsSnapshot,
}

/// Errors that stop a whole run (a single problem's failure is reported through `on_done`).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("runner settings: {0}")]
    Settings(String),
    #[error(transparent)]
    Pool(#[from] PoolError),
}

/// A configured run, not yet started.
pub struct Runner {
    settings: RunnerSettings,
    executor: Arc<dyn CallExecutor>,
    sink: Arc<dyn BankSink>,
    stats: RuntimeStats,
    stages: Arc<StageOrder>,
    /// This run's per-role latencies (the latency-aware order's fallback).
    latencies: Arc<RunLatencies>,
}

enum Event<O> {
    Report {
        seq: u64,
        result: Result<O, ProblemError>,
    },
    Exited {
        seq: u64,
    },
}

impl Runner {
    pub fn new(
        settings: RunnerSettings,
        executor: Arc<dyn CallExecutor>,
        sink: Arc<dyn BankSink>,
    ) -> Result<Self, RuntimeError> {
        settings.validate()?;
        let stats = RuntimeStats::new(settings.roles.iter().map(|r| &r.role));
        let stages = Arc::new(settings.stage_order()?);
        let latencies = Arc::new(RunLatencies::new(stages.roles()));
        Ok(Self {
            settings,
            executor,
            sink,
            stats,
            stages,
            latencies,
        })
    }

    /// The run's live counters; take it before [`Runner::run`] to display progress.
    pub fn stats(&self) -> RuntimeStats {
        self.stats.clone()
    }

    /// Runs every problem (until cancelled) and returns when all admitted ones are done.
    pub async fn run<O, I, F>(self, problems: I, on_done: F) -> Result<RunSummary, RuntimeError>
    where
        O: Send + 'static,
        I: IntoIterator<Item = ProblemJob<O>>,
        F: FnMut(ProblemReport<O>),
    {
        self.drive(Problems::Listed(problems.into_iter()), on_done)
            .await
    }

    /// Runs problems as they arrive on `incoming`, for as long as it is open: one
    /// long-lived runtime whose pools, admission and call order every arriving problem
    /// shares (a server admits each request this way). Returns once the last sender is
    /// dropped (or the run is cancelled) and every admitted problem is done. The
    /// end-of-run rule of work-conserving admission never applies: how many problems
    /// are still to come is unknown.
    pub async fn run_incoming<O, F>(
        self,
        incoming: mpsc::UnboundedReceiver<ProblemJob<O>>,
        on_done: F,
    ) -> Result<RunSummary, RuntimeError>
    where
        O: Send + 'static,
        F: FnMut(ProblemReport<O>),
    {
        self.drive(
            Problems::<std::iter::Empty<ProblemJob<O>>, O>::Incoming(incoming),
            on_done,
        )
        .await
    }

    async fn drive<O, I, F>(
        self,
        mut problems: Problems<I, O>,
        mut on_done: F,
    ) -> Result<RunSummary, RuntimeError>
    where
        O: Send + 'static,
        I: Iterator<Item = ProblemJob<O>>,
        F: FnMut(ProblemReport<O>),
    {
        let pools = self.start_pools().await?;
        let routes: HashMap<Arc<str>, RoleRoute> = self
            .settings
            .roles
            .iter()
            .zip(&pools)
            .enumerate()
            .map(|(index, (r, pool))| {
                (
                    r.role.clone(),
                    RoleRoute {
                        pool: pool.clone(),
                        group: r.group.clone(),
                        index,
                    },
                )
            })
            .collect();
        let routes = Arc::new(routes);
        let (tx, mut rx) = mpsc::unbounded_channel::<Event<O>>();
        let cancel = self.settings.cancel.clone();
        let admission = self.settings.admission;
        let mut exhausted = false;
        let mut live: Live = HashMap::new();
        let mut next_seq = 0u64;
        // A problem taken from an incoming channel, admitted at the next chance.
        let mut arrived: Option<ProblemJob<O>> = None;

        loop {
            while !exhausted
                && !cancel.is_cancelled()
                && admission.admits(
                    live.len(),
                    self.stats.outstanding_calls(),
                    problems.waiting(),
                )
            {
                let job = match arrived.take() {
                    Some(job) => job,
                    None => match problems.next_now() {
                        Next::Job(job) => job,
                        Next::Later => break,
                        Next::End => {
                            exhausted = true;
                            break;
                        }
                    },
                };
                let seq = next_seq;
                next_seq += 1;
                let id = job.id.clone();
                match self.start_problem(job, seq, &routes, &tx).await {
                    Ok(span) => {
                        live.insert(seq, (id, false, span));
                    }
                    Err(err) => {
                        self.stats.on_problem_result(false);
                        on_done(ProblemReport {
                            problem: id,
                            result: Err(err),
                            span: tracing::Span::none(),
                        });
                    }
                }
            }
            if live.is_empty() && (exhausted || cancel.is_cancelled()) {
                break;
            }
            // A channel is listened to only while a problem could be admitted; otherwise
            // arrivals wait in it.
            let listen = arrived.is_none()
                && !exhausted
                && !cancel.is_cancelled()
                && problems.is_incoming()
                && admission.admits(
                    live.len(),
                    self.stats.outstanding_calls(),
                    problems.waiting(),
                );
            tokio::select! {
                event = rx.recv() => match event {
                    Some(Event::Report { seq, result }) => {
                        if let Some((id, reported, span)) = live.get_mut(&seq) {
                            *reported = true;
                            self.stats.on_problem_result(result.is_ok());
                            on_done(ProblemReport {
                                problem: id.clone(),
                                result,
                                span: span.clone(),
                            });
                        }
                    }
                    Some(Event::Exited { seq }) => {
                        self.stats.on_problem_exited();
                        if let Some((id, false, span)) = live.remove(&seq) {
                            self.stats.on_problem_result(false);
                            let err = ProblemError::Vanished { problem: id.clone() };
                            on_done(ProblemReport { problem: id, result: Err(err), span });
                        }
                    }
                    // Unreachable while `tx` lives; treat like "nothing left to wait for".
                    None => break,
                },
                job = problems.arrival(), if listen => match job {
                    Some(job) => arrived = Some(job),
                    None => exhausted = true,
                },
                _ = self.stats.calls_changed().notified(), if admission.depends_on_calls() => {}
                _ = cancel.cancelled(), if !cancel.is_cancelled() => {
                    tracing::info!(active = live.len(), "cancelled: no further problems are admitted");
                }
            }
        }
        for pool in &pools {
            pool.stop().await;
        }
        Ok(RunSummary {
            stopped_early: !exhausted,
            stats: self.stats.snapshot(),
        })
    }

    async fn start_pools(&self) -> Result<Vec<RolePool>, RuntimeError> {
        let mut pools: Vec<RolePool> = Vec::with_capacity(self.settings.roles.len());
        for (role, counters) in self.settings.roles.iter().zip(self.stats.pools()) {
            let settings = PoolSettings {
                role: role.role.clone(),
                workers: role.workers,
                job_crash_limit: self.settings.job_crash_limit,
            };
            match RolePool::spawn(settings, self.executor.clone(), counters.clone()).await {
                Ok((pool, _join)) => pools.push(pool),
                Err(err) => {
                    for pool in &pools {
                        pool.stop().await;
                    }
                    return Err(err.into());
                }
            }
        }
        Ok(pools)
    }

    async fn start_problem<O: Send + 'static>(
        &self,
        job: ProblemJob<O>,
        seq: u64,
        routes: &Arc<HashMap<Arc<str>, RoleRoute>>,
        tx: &mpsc::UnboundedSender<Event<O>>,
    ) -> Result<tracing::Span, ProblemError> {
        let ProblemJob {
            id,
            strategy,
            banks,
            parent,
            iterations,
        } = job;
        let span = problem_span(&id, parent.as_ref());
        let report_tx = tx.clone();
        let args = CoordinatorArgs {
            problem: id.clone(),
            strategy,
            routes: routes.clone(),
            banks,
            sink: self.sink.clone(),
            seq,
            priority: self.settings.priority,
            stages: problem_stages(&self.stages, iterations),
            latencies: ProblemLatencies::new(self.latencies.clone()),
            trace_content: self.settings.trace_content,
            span: span.clone(),
            stats: Some(self.stats.clone()),
            report: Box::new(move |result| {
                let _ = report_tx.send(Event::Report { seq, result });
            }),
        };
        self.stats.on_problem_started();
        match Actor::spawn(None, Coordinator::<O>::default(), args).await {
            Ok((_actor, join)) => {
                let exit_tx = tx.clone();
                tokio::spawn(async move {
                    // A join error means the actor task panicked outside ractor's guard;
                    // either way it is gone, which is all the runner needs to know.
                    let _ = join.await;
                    let _ = exit_tx.send(Event::Exited { seq });
                });
                Ok(span)
            }
            Err(err) => {
                self.stats.on_problem_exited();
                Err(ProblemError::Spawn {
                    problem: id,
                    reason: err.to_string(),
                })
            }
        }
    }
}

/// Admitted problems not yet exited: seq → (problem id, reported yet, its span).
type Live = HashMap<u64, (Arc<str>, bool, tracing::Span)>;

/// Where the runner takes its problems from: a list known up front, or a channel problems
/// arrive on while the runtime lives.
enum Problems<I, O> {
    Listed(I),
    Incoming(mpsc::UnboundedReceiver<ProblemJob<O>>),
}

/// What a source has now.
enum Next<O> {
    Job(ProblemJob<O>),
    /// Nothing now; more may arrive.
    Later,
    /// Nothing more will come.
    End,
}

impl<I: Iterator<Item = ProblemJob<O>>, O> Problems<I, O> {
    fn next_now(&mut self) -> Next<O> {
        match self {
            Problems::Listed(problems) => problems.next().map_or(Next::End, Next::Job),
            Problems::Incoming(rx) => match rx.try_recv() {
                Ok(job) => Next::Job(job),
                Err(mpsc::error::TryRecvError::Empty) => Next::Later,
                Err(mpsc::error::TryRecvError::Disconnected) => Next::End,
            },
        }
    }

    /// Problems not yet admitted, when known (never for a channel: more may come).
    fn waiting(&self) -> Option<usize> {
        match self {
            Problems::Listed(problems) => waiting_problems(problems),
            Problems::Incoming(_) => None,
        }
    }

    fn is_incoming(&self) -> bool {
        matches!(self, Problems::Incoming(_))
    }

    /// The next problem to arrive (`None`: the channel closed); a list never has one
    /// arriving.
    async fn arrival(&mut self) -> Option<ProblemJob<O>> {
        match self {
            Problems::Listed(_) => std::future::pending().await,
            Problems::Incoming(rx) => rx.recv().await,
        }
    }
}

/// Problems not yet admitted, when the iterator knows exactly (a `Vec`'s does; a lazy
/// source that cannot tell gets no end-of-run admission, see [`Admission::admits`]).
fn waiting_problems(problems: &impl Iterator) -> Option<usize> {
    match problems.size_hint() {
        (low, Some(high)) if low == high => Some(low),
        _ => None,
    }
}

/// A problem's span: a child of `parent` when the job names one, else the root of its own
/// trace (a run of 100 problems × 20 iterations would be one unreadable trace otherwise),
/// linked to the caller's span (the run) by `follows_from`, which an OpenTelemetry
/// exporter turns into a span link.
fn problem_span(id: &Arc<str>, parent: Option<&tracing::Span>) -> tracing::Span {
    let span = match parent {
        Some(parent) => tracing::info_span!(parent: parent, "problem", problem = %id),
        None => {
            let span = tracing::info_span!(parent: None, "problem", problem = %id);
            span.follows_from(tracing::Span::current());
            span
        }
    };
    tmas_observability::span_ext::set_attribute(&span, "tmas.problem_id", id.clone());
    span
}

/// The stage order a problem's calls are ranked by: the runner's, with the problem's own
/// iteration count when its job says one.
fn problem_stages(run: &Arc<StageOrder>, iterations: Option<u32>) -> Arc<StageOrder> {
    match iterations {
        Some(t) if run.iterations() != Some(t) => Arc::new(run.for_iterations(t)),
        _ => run.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{CallPriority, StageOrder, problem_stages, waiting_problems};
    use crate::priority::{ProblemLatencies, RunLatencies};

    #[test]
    fn the_latency_aware_estimate_counts_the_iterations_of_the_problems_own_job() {
        // A runner told T = 20; two roles in sequence, 1 s each once observed.
        let run = Arc::new(StageOrder::new(&[false, false], Some(20)).unwrap());
        let mut latencies = ProblemLatencies::new(Arc::new(RunLatencies::new(2)));
        latencies.observe(0, 1_000_000);
        latencies.observe(1, 1_000_000);
        let first_call = |iterations| {
            CallPriority::LatencyAware.of_call(
                &problem_stages(&run, iterations),
                0,
                0,
                0,
                &latencies,
            )
        };
        // Every role known: the priority is the estimate, 2 s per iteration left.
        assert_eq!(first_call(Some(3)), 3 * 2_000_000, "a 3-iteration request");
        assert_eq!(first_call(None), 20 * 2_000_000, "the runner's T");
        assert_eq!(first_call(Some(20)), first_call(None));
        // Its last iteration's last call: only that call's stage is left.
        let last =
            CallPriority::LatencyAware.of_call(&problem_stages(&run, Some(3)), 0, 2, 1, &latencies);
        assert_eq!(last, 1_000_000);
    }

    #[test]
    fn waiting_problems_is_known_only_when_the_iterator_knows_its_length() {
        let mut v = vec![1, 2, 3].into_iter();
        assert_eq!(waiting_problems(&v), Some(3));
        v.next();
        assert_eq!(waiting_problems(&v), Some(2));
        let lazy = vec![1, 2, 3].into_iter().filter(|x| x % 2 == 1);
        assert_eq!(waiting_problems(&lazy), None);
    }
}
