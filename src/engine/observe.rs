//! What a user sees of a running `tmas run`: the run span (exported over OTLP when
//! configured), the Prometheus `/metrics` endpoint and the progress display.
//!
//! The engine calls [`RunObserver::start`] once the runner and the model client exist and
//! [`RunObserver::finish`] when the run is over; everything else reads their live counters.
//! The command-line flags (`--metrics-addr`, `--trace-content`, `--quiet`,
//! `--progress-every`) travel in the run request as [`ObserveOptions`]; the config file's
//! `[observability]` section and the `OTEL_*` variables are read from the resolved config
//! and the environment. The run's own figures (the Pass@1 estimate) belong to its
//! [`RunObserver`], and whether its spans carry text ([`trace_content`]) to its runner
//! settings, so two runs of one process share neither; only the metrics registry and the
//! tracing exporter (which serve the whole process) are global.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use tmas_actors::runner::RuntimeStats;
use tmas_client::ModelClient;
use tmas_observability::otlp::{self, OtlpSettings, TracingGuard};
use tmas_observability::prometheus::{MetricsServer, Refresh};
use tmas_observability::{
    Console, ProgressDisplay, ProgressMode, ProgressSnapshot, ProgressSource, span_ext,
};

use crate::config::Config;
use crate::engine::judging::JudgeProgress;
use crate::eval::judge::{FailedCandidates, counted_score};
use crate::record::ProblemRecord;

/// The command line's observability flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObserveOptions {
    /// Serve Prometheus metrics here (overrides `observability.metrics_addr`).
    pub metrics_addr: Option<SocketAddr>,
    /// Put prompt and response text on spans (or `observability.trace_content`).
    pub trace_content: bool,
    /// No progress display at all.
    pub quiet: bool,
    /// Plain status lines this often when stderr is not a terminal (`None`: the engine's
    /// `status_every`).
    pub progress_every: Option<Duration>,
    /// The stderr the process's log lines share with progress bars
    /// ([`tmas_observability::init_logging`]).
    pub console: Console,
}

impl ObserveOptions {
    /// Warnings and the final table only (benchmarks, experiments).
    pub fn quiet() -> Self {
        Self {
            quiet: true,
            ..Self::default()
        }
    }
}

/// The exporter, installed by the first run that asks for one and kept for the process:
/// it serves the process-wide tracing subscriber, so it is as global as that is.
static EXPORTER: OnceLock<TracingGuard> = OnceLock::new();

/// The live counters the observer reads.
pub struct Sources {
    pub stats: RuntimeStats,
    pub client: ModelClient,
    /// Calls answered from the run store so far.
    pub replayed: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Problems this session runs.
    pub problems_total: u64,
    pub iterations: u32,
    /// The judge phase's counters.
    pub judge: Arc<JudgeProgress>,
    /// Most LLM judge calls one problem makes ([`judge_calls_per_problem`]).
    pub judge_calls_per_problem: u64,
    /// The Pass@1 of the problems judged so far (`tmas_pass_at_1`).
    pub pass_at_1: Arc<PassAt1Gauge>,
}

/// Most LLM judge calls one problem makes: R per candidate of every iteration (0 without
/// an LLM judge). Under `when_undecided` most candidates need none, so the display uses
/// this bound only until the first problem has been judged.
pub fn judge_calls_per_problem(config: &Config) -> u64 {
    if !config.judge.enabled {
        return 0;
    }
    u64::from(config.method.iterations)
        * u64::from(config.method.n)
        * u64::from(config.judge.repeats.max(1))
}

/// A run being watched.
pub struct RunObserver {
    run_span: tracing::Span,
    metrics: Option<MetricsServer>,
    progress: ProgressDisplay,
    sources: Arc<Sources>,
}

/// Where a run publishes its progress counters for a display outside it (`tmas
/// experiment` draws one bar per variant); frozen at the run's last state when it ends.
#[derive(Default)]
pub struct ProgressSlot(Mutex<Option<ProgressSource>>);

impl std::fmt::Debug for ProgressSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressSlot").finish_non_exhaustive()
    }
}

impl ProgressSlot {
    fn set(&self, source: ProgressSource) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// The run's counters now (`None` before the run started its display).
    pub fn snapshot(&self) -> Option<ProgressSnapshot> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|f| f())
    }

    /// Keeps the run's last counters (the run's client and runtime are stopping).
    pub fn freeze(&self) {
        if let Some(last) = self.snapshot() {
            self.set(Box::new(move || last));
        }
    }
}

/// Whether this run puts prompt and response text on its spans (`--trace-content` or
/// `observability.trace_content`): a setting of the run, carried by its runner settings,
/// so two runs of one process may differ.
pub fn trace_content(config: &Config, opts: &ObserveOptions) -> bool {
    opts.trace_content || config.observability.trace_content
}

/// Starts OTLP export when an endpoint is configured (first run of the process only).
pub(crate) fn start_export(config: &Config) -> anyhow::Result<()> {
    if EXPORTER.get().is_some() {
        return Ok(());
    }
    let settings = OtlpSettings::resolve(&config.observability, &|k| std::env::var(k).ok())?;
    let Some(settings) = settings else {
        return Ok(());
    };
    match otlp::install(&settings) {
        Ok(guard) => {
            let _ = EXPORTER.set(guard);
            Ok(())
        }
        // Another part of the process (a test harness) exports already.
        Err(otlp::OtlpError::AlreadyInstalled) => Ok(()),
        Err(otlp::OtlpError::NoSubscriber) => {
            tracing::warn!(endpoint = %settings.endpoint,
                "spans are not exported: the process installed its own tracing subscriber");
            Ok(())
        }
        Err(e) => Err(e).context(format!("OTLP export ({})", settings.source)),
    }
}

/// Sends the spans the exporter still holds (bounded: an unreachable collector costs at
/// most a few seconds); nothing without an exporter.
pub(crate) async fn flush_export() {
    if let Some(guard) = EXPORTER.get() {
        guard.flush().await;
    }
}

/// Starts OTLP export configured by the `OTEL_*` variables alone (benchmarks); true if
/// spans are exported.
pub fn export_from_env() -> anyhow::Result<bool> {
    let config = Config::default();
    start_export(&config)?;
    Ok(span_ext::exporting())
}

impl RunObserver {
    /// Starts export (if configured), the metrics endpoint (if asked for) and the progress
    /// display (`status_every`: how often plain status lines are printed; `None`: quiet).
    pub async fn start(
        config: &Config,
        opts: &ObserveOptions,
        sources: Sources,
        status_every: Option<Duration>,
    ) -> anyhow::Result<Self> {
        start_export(config)?;
        let run_span = tracing::info_span!(parent: None, "run",
            tmas.problems.total = span_ext::int(sources.problems_total),
            tmas.iterations = i64::from(sources.iterations),
            tmas.method = ?config.method.name);
        let sources = Arc::new(sources);
        let metrics = match opts.metrics_addr.or(config.observability.metrics_addr) {
            Some(addr) => {
                let s = sources.clone();
                let refresh: Refresh = Arc::new(move || refresh_gauges(&s));
                Some(
                    MetricsServer::start(addr, refresh)
                        .await
                        .context("starting the metrics endpoint (--metrics-addr)")?,
                )
            }
            None => None,
        };
        let mode = match (opts.quiet, opts.progress_every.or(status_every)) {
            (true, _) | (false, None) => ProgressMode::Off,
            (false, Some(every)) => ProgressMode::for_stderr(false, every, &opts.console),
        };
        let s = sources.clone();
        let progress = ProgressDisplay::start(mode, Box::new(move || snapshot(&s)));
        Ok(Self {
            run_span,
            metrics,
            progress,
            sources,
        })
    }

    /// This run's `tmas_pass_at_1` estimate, for whoever judges its problems.
    pub fn pass_at_1(&self) -> Arc<PassAt1Gauge> {
        self.sources.pass_at_1.clone()
    }

    /// Publishes this run's counters in `slot` (for a display of several runs).
    pub fn publish(&self, slot: &ProgressSlot) {
        let s = self.sources.clone();
        slot.set(Box::new(move || snapshot(&s)));
    }

    /// The run's span: problems link to it (each problem is its own trace).
    pub fn run_span(&self) -> tracing::Span {
        self.run_span.clone()
    }

    /// Address of the metrics endpoint, if one is served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// Stops the display and the metrics endpoint, ends the run span and flushes the
    /// exporter (bounded: an unreachable collector costs at most a few seconds).
    pub async fn finish(self) {
        self.progress.finish().await;
        if let Some(metrics) = self.metrics {
            metrics.stop().await;
        }
        drop(self.run_span);
        if let Some(guard) = EXPORTER.get() {
            guard.flush().await;
        }
    }
}

/// One run's `tmas_pass_at_1` estimate: (sum of per-problem final-iteration Pass@1,
/// problems judged), candidates counted by the run's [`FailedCandidates`] rule.
#[derive(Debug, Default)]
pub struct PassAt1Gauge {
    acc: Mutex<(f64, u64)>,
    failed: FailedCandidates,
}

impl PassAt1Gauge {
    /// A gauge counting a failed candidate by `failed` (`judge.failed_candidates`).
    pub fn new(failed: FailedCandidates) -> Self {
        Self {
            acc: Mutex::default(),
            failed,
        }
    }

    /// Updates the estimate with a judged problem: the share of its last iteration's
    /// candidates judged correct (a failed candidate as the rule says:
    /// [`counted_score`]), averaged over the problems judged so far.
    pub fn on_problem_judged(&self, record: &ProblemRecord) {
        let Some(last) = record.judgments.last().filter(|c| !c.is_empty()) else {
            return;
        };
        let counted: Vec<f64> = last
            .iter()
            .filter_map(|j| counted_score(j.as_ref(), self.failed))
            .collect();
        let rate = if counted.is_empty() {
            0.0
        } else {
            counted.iter().sum::<f64>() / counted.len() as f64
        };
        let mut acc = self.acc.lock().unwrap_or_else(|p| p.into_inner());
        acc.0 += rate;
        acc.1 += 1;
        metrics::gauge!("tmas_pass_at_1").set(acc.0 / acc.1 as f64);
    }

    /// The estimate and the problems it covers (`None` before the first is judged).
    pub fn value(&self) -> Option<(f64, u64)> {
        let acc = *self.acc.lock().unwrap_or_else(|p| p.into_inner());
        (acc.1 > 0).then(|| (acc.0 / acc.1 as f64, acc.1))
    }
}

fn snapshot(s: &Sources) -> ProgressSnapshot {
    let stats = s.stats.snapshot();
    let client = s.client.snapshot();
    ProgressSnapshot {
        problems_total: s.problems_total,
        problems_done: stats.problems_succeeded,
        problems_failed: stats.problems_failed,
        iterations_total: s.problems_total * u64::from(s.iterations),
        iterations_done: stats.iterations_done,
        calls_in_flight: client.global_in_flight as u64,
        calls_done: stats.roles.iter().map(|r| r.done + r.failed).sum(),
        tokens_out: client.endpoints.iter().map(|e| e.output_tokens).sum(),
        errors: client.endpoints.iter().map(|e| e.errors).sum(),
        retries: client.endpoints.iter().map(|e| e.retries).sum(),
        calls_replayed: (s.replayed)(),
        problems_judged: s.judge.problems_judged.load(Ordering::Relaxed),
        judge_calls_done: s.judge.calls_done.load(Ordering::Relaxed),
        judge_verdicts_reused: s.judge.verdicts_reused.load(Ordering::Relaxed),
        iterations_judged: s.judge.iterations_judged.load(Ordering::Relaxed),
        judge_calls_per_problem: s.judge_calls_per_problem,
        pass_at_1: s.pass_at_1.value(),
    }
}

/// Gauges mirroring live state, set right before each scrape.
fn refresh_gauges(s: &Sources) {
    use metrics::{counter, gauge};
    let client = s.client.snapshot();
    for e in &client.endpoints {
        let ep = e.name.to_string();
        gauge!("tmas_calls_in_flight", "endpoint" => ep.clone()).set(e.in_flight as f64);
        gauge!("tmas_calls_queued", "endpoint" => ep.clone()).set(e.queued as f64);
        gauge!("tmas_endpoint_max_in_flight", "endpoint" => ep.clone()).set(e.max_in_flight as f64);
        // Circuit breaker: 1 closed (endpoint healthy), 0 open.
        gauge!("tmas_endpoint_up", "endpoint" => ep.clone()).set(f64::from(u8::from(e.healthy)));
        counter!("tmas_breaker_trips_total", "endpoint" => ep.clone()).absolute(e.breaker_trips);
        counter!("tmas_http_attempts_total", "endpoint" => ep).absolute(e.calls);
    }
    gauge!("tmas_calls_in_flight_global").set(client.global_in_flight as f64);
    gauge!("tmas_global_max_in_flight").set(client.global_max_in_flight as f64);
    let stats = s.stats.snapshot();
    for r in &stats.roles {
        let role = r.role.to_string();
        gauge!("tmas_role_calls_in_flight", "role" => role.clone()).set(r.in_flight as f64);
        gauge!("tmas_role_calls_queued", "role" => role.clone()).set(r.queued as f64);
        counter!("tmas_role_calls_done_total", "role" => role.clone()).absolute(r.done);
        counter!("tmas_role_calls_failed_total", "role" => role).absolute(r.failed);
    }
    gauge!("tmas_problems_total").set(s.problems_total as f64);
    gauge!("tmas_problems_done").set(stats.problems_succeeded as f64);
    gauge!("tmas_problems_failed").set(stats.problems_failed as f64);
    gauge!("tmas_problems_active").set(stats.active_problems as f64);
    gauge!("tmas_iterations_total").set((s.problems_total * u64::from(s.iterations)) as f64);
    gauge!("tmas_iterations_done").set(stats.iterations_done as f64);
}

/// The end-of-run accounting as gauges: `tmas_run_calls_lost{role, endpoint, kind}` over
/// every session of the run and `tmas_run_problems{state}`.
pub fn on_accounting(accounting: &super::accounting::Accounting) {
    use metrics::gauge;
    for l in &accounting.lost {
        gauge!("tmas_run_calls_lost",
            "role" => l.role.clone(),
            "endpoint" => l.endpoint.clone().unwrap_or_default(),
            "kind" => l.kind.as_str())
        .set(l.calls as f64);
    }
    let states = [
        ("complete", accounting.problems_complete),
        ("degraded", accounting.problems_degraded.len()),
        ("failed", accounting.problems_failed.len()),
        ("unfinished", accounting.problems_unfinished),
    ];
    for (state, n) in states {
        gauge!("tmas_run_problems", "state" => state).set(n as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::judge::JudgeRecord;
    use crate::method::{CallCounts, ProblemInput, StopReason, TmasOutcome};

    /// A record whose last iteration has one correct candidate and one failed one.
    fn half_failed() -> ProblemRecord {
        ProblemRecord {
            problem_id: "p".into(),
            question: "q".into(),
            reference_answer: "3".into(),
            outcome: TmasOutcome {
                problem: ProblemInput {
                    id: "p".into(),
                    question: "q".into(),
                },
                iterations: Vec::new(),
                stop: StopReason::Completed,
                experience: Vec::new(),
                guidelines: Vec::new(),
                calls: CallCounts::default(),
                released: Vec::new(),
            },
            judgments: vec![vec![Some(JudgeRecord::from_reply("3", "\\boxed{3}")), None]],
        }
    }

    #[test]
    fn the_live_estimate_counts_failed_candidates_by_the_runs_rule() {
        let wrong = PassAt1Gauge::new(FailedCandidates::Wrong);
        wrong.on_problem_judged(&half_failed());
        assert_eq!(wrong.value(), Some((0.5, 1)));
        let excluded = PassAt1Gauge::new(FailedCandidates::Excluded);
        excluded.on_problem_judged(&half_failed());
        assert_eq!(excluded.value(), Some((1.0, 1)));
    }
}
