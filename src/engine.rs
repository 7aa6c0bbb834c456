//! `tmas run`: wires config, dataset, prompts, the model client (and the embedded
//! simulator when asked for), the actor runtime, the run store and judging into one
//! evaluation — fresh ([`run`], [`run_with`]) or resumed ([`resume`]).
//!
//! - [`plan`]: what a fresh or resumed run will do (config check, problems left).
//! - [`results`]: storing and writing finished problems with their judgments.
//! - [`outputs`]: the run's outputs at the end (`results.jsonl`, Pass@1), rebuilt from what
//!   this process wrote and, for earlier sessions' problems, from the store.
//! - [`endpoints`]: the model client and the embedded simulator.
//! - [`judging`]: the rule check and the LLM judge over an iteration's candidates;
//!   [`judge_desk`]: each iteration judged as it completes, beside the later ones;
//!   [`judge_session`]: the LLM judge of a config file outside a run.
//! - [`method_jobs`]: the per-problem jobs of the configured method (TMAS or a baseline).
//! - [`experiment`]: `tmas experiment`, variants run together and compared.
//! - [`shared_cap`]: an in-flight cap shared by the runs of one process.
//! - [`run_dir`]: the files a run writes.
//! - [`shutdown`]: SIGINT/SIGTERM handling for `tmas run`.
//!
//! Every model call goes through the store executor ([`crate::store::executor`]): a call
//! already stored is replayed, a new one is committed before the strategy sees it. So a
//! run killed at any moment resumes without re-sending anything that finished, and ends
//! exactly where an uninterrupted run would. Each iteration is judged as soon as it
//! completes, and each problem stored as soon as it finishes.

pub(crate) mod accounting;
pub mod endpoints;
pub(crate) mod experiment;
pub(crate) mod judge_desk;
pub(crate) mod judge_gate;
pub(crate) mod judge_session;
pub(crate) mod judging;
pub(crate) mod merge;
pub(crate) mod method_jobs;
pub mod observe; // spans, metrics endpoint, progress display
pub(crate) mod outputs;
pub(crate) mod plan;
pub(crate) mod preflight;
pub mod rejudge;
pub(crate) mod results;
pub mod run_dir;
pub(crate) mod shared_cap;
pub(crate) mod shutdown;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use accounting::Accounting;
use anyhow::Context;
use tmas_actors::runner::ProblemJob;
use tmas_actors::runner::{Admission, AdmissionBounds, RoleSettings, Runner, RunnerSettings};
use tmas_actors::strategy::CallExecutor;
use tmas_client::{ModelClient, PermanentStop};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::eval::dataset::{Dataset, Problem};
use crate::eval::pass_at_1::PassAt1Table;
use crate::method::TmasOutcome;
use crate::store::bank_files::JsonFileSink;
use crate::store::executor::{ExecutorCounts, StoreExecutor};
use crate::store::sink::StoreBankSink;
use crate::store::{Fact, RunStore};

use crate::store::schema::META_STATUS;
use endpoints::Endpoints;
use judging::{JudgeSetup, LlmJudge};
use outputs::rebuild_outputs;
use plan::Plan;
pub use plan::RequestedConfig;
use results::ResultWriter;
use run_dir::FailedProblem;

/// What to run (a fresh run).
pub struct RunRequest {
    pub config: Config,
    /// Where the config came from (recorded in `run.json`).
    pub config_source: PathBuf,
    pub dataset: Dataset,
    pub run_dir: PathBuf,
    /// The environment API keys are resolved from.
    pub env: Vec<(String, String)>,
    /// Print a status line this often (None: never).
    pub status_every: Option<Duration>,
    /// Check every endpoint in use before anything is created ([`preflight`]).
    pub preflight: bool,
    /// The command line's observability flags (metrics address, quiet, …).
    pub observe: observe::ObserveOptions,
}

/// What to resume.
pub struct ResumeRequest {
    pub run_dir: PathBuf,
    pub config: RequestedConfig,
    /// Resume even though result-affecting settings differ.
    pub force: bool,
    /// Replay stored failed calls as failures instead of sending them again.
    pub keep_failed: bool,
    pub env: Vec<(String, String)>,
    pub status_every: Option<Duration>,
    /// Check every endpoint in use before the run starts ([`preflight`]).
    pub preflight: bool,
    /// The command line's observability flags (metrics address, quiet, …).
    pub observe: observe::ObserveOptions,
}

/// Outside control of a running run.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    /// Cancel to stop gracefully: no new calls, calls in flight get
    /// `run.shutdown_grace_secs` to finish and be stored, then the run ends interrupted.
    pub stop: CancellationToken,
    /// A cap on calls in flight shared with other runs of this process (experiments);
    /// `None`: only this run's `run.max_in_flight` applies.
    pub shared_in_flight: Option<Arc<tokio::sync::Semaphore>>,
    /// Model clients (and an embedded simulator) shared with other runs of this process
    /// (experiments): one cap, limit and breaker per endpoint across the runs. `None`:
    /// this run starts and stops its own.
    pub shared_endpoints: Option<Arc<endpoints::SharedEndpoints>>,
    /// Where this run publishes its progress counters for a display of several runs
    /// (experiments); `None`: only its own display.
    pub progress: Option<Arc<observe::ProgressSlot>>,
}

/// How a run ended.
#[derive(Debug)]
pub struct RunResult {
    pub run_dir: PathBuf,
    /// Pass@1 over every problem finished so far (this and earlier sessions).
    pub table: PassAt1Table,
    pub problems_done: usize,
    pub problems_failed: Vec<FailedProblem>,
    /// Problems neither done nor failed, in dataset order: not in `table` (resume them).
    pub unfinished: Vec<String>,
    pub wall_seconds: f64,
    /// Stopped before every problem finished (signal or store failure): resume it.
    pub interrupted: bool,
    /// Calls answered from the store in this process.
    pub calls_replayed: u64,
    /// Calls sent to endpoints in this process.
    pub calls_sent: u64,
    /// Lost calls and each problem's state, over every session of the run.
    pub accounting: Accounting,
    /// Set when the run stopped because an endpoint kept answering with permanent errors.
    pub permanent_stop: Option<PermanentStop>,
    /// CPU seconds the run store's writer thread used (Linux only).
    pub store_writer_cpu_s: Option<f64>,
}

/// Runs the evaluation to the end and writes the run directory.
pub async fn run(request: RunRequest) -> anyhow::Result<RunResult> {
    run_with(request, RunControl::default()).await
}

/// [`run`] with outside control (graceful stop).
pub async fn run_with(request: RunRequest, control: RunControl) -> anyhow::Result<RunResult> {
    let RunRequest {
        config,
        config_source,
        dataset,
        run_dir,
        env,
        status_every,
        preflight: check_endpoints,
        observe,
    } = request;
    // Every start-up check before the run directory exists: a failure, or a signal while
    // the check waits for an endpoint, leaves nothing behind that would block the same
    // `--out`.
    preflight::check_local(&config, &env, observe.metrics_addr, Some(&run_dir))?;
    if check_endpoints {
        check_endpoints_until_stopped(&config, &env, &observe, &control).await?;
    }
    if control.stop.is_cancelled() {
        return Err(shutdown::StoppedBeforeStart.into());
    }
    let plan = plan::fresh(config, &config_source, &dataset, &run_dir).await?;
    execute(plan, env, observe, status_every, control).await
}

/// The start-up check of the endpoints, ended by a stop ([`shutdown::StoppedBeforeStart`]).
async fn check_endpoints_until_stopped(
    config: &Config,
    env: &[(String, String)],
    observe: &observe::ObserveOptions,
    control: &RunControl,
) -> anyhow::Result<()> {
    let lines = tmas_observability::WaitLines::for_stderr(observe.quiet, &observe.console);
    shutdown::until_stopped(
        &control.stop,
        preflight::check_endpoints(config, env, &lines),
    )
    .await??;
    Ok(())
}

/// Resumes the run in `request.run_dir`: finished calls are replayed from its store,
/// finished problems are kept, and the rest runs (to `method.iterations` in total).
pub async fn resume(request: ResumeRequest, control: RunControl) -> anyhow::Result<RunResult> {
    let plan = plan::resume(
        &request.run_dir,
        request.config,
        request.force,
        request.keep_failed,
    )
    .await?;
    preflight::check_local(
        &plan.config,
        &request.env,
        request.observe.metrics_addr,
        None,
    )?;
    if request.preflight {
        check_endpoints_until_stopped(&plan.config, &request.env, &request.observe, &control)
            .await?;
    }
    if control.stop.is_cancelled() {
        return Err(shutdown::StoppedBeforeStart.into());
    }
    execute(
        plan,
        request.env,
        request.observe,
        request.status_every,
        control,
    )
    .await
}

/// Stops the runner's admission and the executor once `control.stop` is cancelled, the
/// store fails or an endpoint keeps answering with permanent errors (`permanent`);
/// returns a token cancelled at that moment.
fn watch_stop(
    control: &RunControl,
    store: &RunStore,
    permanent: CancellationToken,
    admission: CancellationToken,
    executor: CancellationToken,
) -> CancellationToken {
    let stopped = CancellationToken::new();
    let (stop, failed, out) = (control.stop.clone(), store.failed(), stopped.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = failed.cancelled() => {}
            _ = permanent.cancelled() => {}
        }
        admission.cancel();
        executor.cancel();
        out.cancel();
    });
    stopped
}

/// The judge's sender: `sender` behind a [`judge_gate::JudgeGate`] over the judge group's
/// endpoints (their summed `max_in_flight` is the most judge calls at once).
fn judge_gate(
    config: &Config,
    client: &ModelClient,
    sender: Arc<dyn CallExecutor>,
) -> Arc<dyn CallExecutor> {
    let endpoints: Vec<Arc<str>> = config
        .role_endpoints(crate::role::Role::Judge)
        .into_iter()
        .map(Arc::from)
        .collect();
    let capacity = endpoints
        .iter()
        .filter_map(|name| config.endpoints.get(&**name))
        .map(|e| e.max_in_flight)
        .sum();
    let shared = config.method.roles().iter().any(|&role| {
        config
            .role_endpoints(role)
            .iter()
            .any(|e| endpoints.iter().any(|j| **j == **e))
    });
    let room = judge_gate::ClientRoom {
        client: client.clone(),
        endpoints,
        shared,
    };
    Arc::new(judge_gate::JudgeGate::new(sender, capacity, Arc::new(room)))
}

/// Cancels `judge_stop` `grace` after the run is asked to stop: until then problems
/// whose calls all finished are still judged, then the judge's calls in flight are cut.
fn stop_judging_after(stopped: &CancellationToken, grace: Duration, judge_stop: CancellationToken) {
    let stopped = stopped.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = stopped.cancelled() => tokio::time::sleep(grace).await,
            // The run ended on its own: nothing to cut (the task just ends).
            _ = judge_stop.cancelled() => return,
        }
        judge_stop.cancel();
    });
}

/// A run [`start`]ed: what [`drive`] runs and what [`finish`] closes.
struct Session {
    running: Running,
    closing: Closing,
}

/// The runtime and the tasks around it, used up by [`drive`].
struct Running {
    runner: Runner,
    jobs: Vec<ProblemJob<TmasOutcome>>,
    /// Finished problems, to the writer task.
    done_tx: mpsc::UnboundedSender<results::Finished>,
    writer: JoinHandle<anyhow::Result<results::Written>>,
    observer: observe::RunObserver,
    /// Cancelled when the run is asked to stop (signal, store failure, permanent errors).
    stopped: CancellationToken,
    /// How long calls in flight may still finish after a stop.
    grace: Duration,
    /// Where a display of several runs reads this run's counters (`tmas experiment`).
    progress: Option<Arc<observe::ProgressSlot>>,
    /// Stops the judge's calls (cancelled once the writer is done, or after the grace).
    judge_stop: CancellationToken,
    /// Where iterations are judged; the end waits for the judging it set aside.
    desk: Arc<judge_desk::JudgeDesk>,
    /// `--quiet`: no line about the stop beyond the signal's.
    quiet: bool,
}

/// What [`finish`] needs to write the outputs and close the store.
struct Closing {
    started: Instant,
    config_source: String,
    dataset_label: String,
    dir: run_dir::RunDir,
    store: RunStore,
    iterations: u32,
    client: ModelClient,
    /// The endpoints this run started (none when it shares another run's).
    own_endpoints: Option<Endpoints>,
    counts: Arc<ExecutorCounts>,
    stopped: CancellationToken,
}

/// What [`drive`] leaves for [`finish`].
struct Driven {
    written: results::Written,
    /// Every admitted problem ended before the shutdown grace period ran out.
    finished_in_time: bool,
}

async fn execute(
    plan: Plan,
    env: Vec<(String, String)>,
    options: observe::ObserveOptions,
    status_every: Option<Duration>,
    control: RunControl,
) -> anyhow::Result<RunResult> {
    let Session { running, closing } = start(plan, env, &options, status_every, &control).await?;
    let driven = drive(running).await?;
    finish(closing, driven).await
}

/// Starts the endpoints, the store executor, the actor runtime, the observer and the
/// result writer for a planned run.
async fn start(
    plan: Plan,
    env: Vec<(String, String)>,
    options: &observe::ObserveOptions,
    status_every: Option<Duration>,
    control: &RunControl,
) -> anyhow::Result<Session> {
    let started = Instant::now();
    let Plan {
        mut config,
        config_source,
        dataset_label,
        dir,
        store,
        prompts,
        selection,
        to_run,
        resumed,
        resend_failed,
    } = plan;
    let iterations = config.method.iterations;
    if resumed && !options.quiet {
        eprintln!(
            "resuming {}: {} of {} to run, T={iterations}",
            dir.root.display(),
            to_run.len(),
            crate::text::count_of(selection.len(), "problem")
        );
    }

    // The embedded simulator knows the selection's answers so its task model is consistent.
    let answers = selection
        .iter()
        .map(|p| (p.problem_id.clone(), p.reference_answer.clone()))
        .collect();
    let (client, own_endpoints) = match &control.shared_endpoints {
        Some(shared) => (shared.client_for(&mut config, &env).await?, None),
        None => {
            let endpoints = Endpoints::start(&mut config, &env, Some(answers)).await?;
            (endpoints.client.clone(), Some(endpoints))
        }
    };
    dir.write_config(
        &config
            .to_toml_string()
            .context("serializing the resolved config")?,
    )?;

    let prompts = Arc::new(prompts);
    let jobs = method_jobs::JobFactory::new(&config, prompts.clone());
    // Calls go to the endpoints through the client, or through an in-flight cap shared
    // with other runs of this process (`tmas experiment`).
    let sender: Arc<dyn CallExecutor> = match &control.shared_in_flight {
        Some(permits) => Arc::new(shared_cap::SharedCap::new(
            Arc::new(client.clone()),
            permits.clone(),
        )),
        None => Arc::new(client.clone()),
    };
    // Keys looked up in the store: a call not among them is sent. Without
    // `--keep-failed` only answered calls are, so stored failures are sent again.
    // The judge's calls go through a gate that keeps them out of the method's way.
    let judge_sender = judge_gate(&config, &client, sender.clone());
    let store_executor = if resend_failed {
        let (answered, failed) = store
            .read(|r| Ok((r.answered_call_keys()?, r.failed_calls()?)))
            .await?;
        if !failed.is_empty() {
            eprintln!(
                "sending {} stored as failures again (--keep-failed replays them as failures)",
                crate::text::count_of(failed.len(), "call")
            );
        }
        StoreExecutor::new(sender, store.clone(), answered).with_failures_to_resend(failed)
    } else {
        let stored = store.read(|r| r.call_keys()).await?;
        StoreExecutor::new(sender, store.clone(), stored)
    };
    // The judge's calls stop later than the method's: a problem whose calls all
    // finished before a stop is still judged and stored during the grace period.
    let judge_stop = CancellationToken::new();
    let judge_executor: Arc<dyn CallExecutor> =
        Arc::new(store_executor.sibling_via(judge_sender, judge_stop.clone()));
    let store_executor = Arc::new(store_executor);
    let counts = store_executor.counts();
    let executor: Arc<dyn CallExecutor> = store_executor.clone();

    let judge = JudgeSetup {
        llm: config.judge.enabled.then(|| {
            LlmJudge::of_config(
                &config,
                judge_executor,
                prompts.clone(),
                config.judge.policy,
                config.judge.input,
            )
        }),
        progress: Arc::default(),
        proof: !config.method.no_proof,
    };

    let mut settings = runner_settings(&config);
    settings.trace_content = observe::trace_content(&config, options);
    let stopped = watch_stop(
        control,
        &store,
        client.permanent_stop(),
        settings.cancel.clone(),
        store_executor.stopping(),
    );
    let grace = Duration::from_secs(config.run.shutdown_grace_secs);
    stop_judging_after(&stopped, grace, judge_stop.clone());
    let sink = StoreBankSink {
        // The store holds every version; resume restores files a power cut damaged.
        json: JsonFileSink::unsynced(dir.banks_dir()),
        store: store.clone(),
    };
    let runner =
        Runner::new(settings, executor, Arc::new(sink)).context("configuring the actor runtime")?;
    // Progress display, metrics endpoint and the run span.
    let observer = observe::RunObserver::start(
        &config,
        options,
        observe::Sources {
            pass_at_1: Arc::new(observe::PassAt1Gauge::new(config.judge.failed_candidates)),
            stats: runner.stats(),
            client: client.clone(),
            replayed: {
                let counts = counts.clone();
                Arc::new(move || counts.replayed.load(Ordering::Relaxed))
            },
            problems_total: to_run.len() as u64,
            iterations,
            judge: judge.progress.clone(),
            judge_calls_per_problem: observe::judge_calls_per_problem(&config),
        },
        status_every,
    )
    .await?;
    if let Some(slot) = &control.progress {
        observer.publish(slot);
    }

    // Finished problems go to a writer task that judges and stores them while the runner
    // goes on; `on_done` itself must not block the runtime.
    let problems: HashMap<String, Problem> =
        to_run.iter().map(|p| (p.id.clone(), p.clone())).collect();
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    // Each iteration is judged as its strategy completes it, beside the later ones.
    // With reuse, a question an earlier session asked is answered by its stored call.
    let asked = if config.judge.enabled && config.judge.reuse {
        judging::JudgeReuse::seed(store.read(|r| r.answered_judge_calls()).await?)
    } else {
        judging::JudgeReuse::default()
    };
    let desk = Arc::new(judge_desk::JudgeDesk::new(
        judge,
        asked,
        to_run.iter().cloned(),
        store.clone(),
    ));
    let watcher: Arc<dyn crate::method::IterationWatcher> = desk.clone();
    let writer = tokio::spawn(
        ResultWriter {
            problems: Arc::new(problems),
            desk: desk.clone(),
            dir: dir.clone(),
            store: store.clone(),
            taint: store_executor.taint_view(),
            stale: store_executor.stale_failures(),
            iterations,
            pass_at_1: observer.pass_at_1(),
        }
        .run(done_rx),
    );

    let jobs = to_run.iter().map(|p| jobs.job(p, Some(&watcher))).collect();
    Ok(Session {
        running: Running {
            runner,
            jobs,
            done_tx,
            writer,
            observer,
            stopped: stopped.clone(),
            grace,
            progress: control.progress.clone(),
            judge_stop,
            desk,
            quiet: options.quiet,
        },
        closing: Closing {
            started,
            config_source,
            dataset_label,
            dir,
            store,
            iterations,
            client,
            own_endpoints,
            counts,
            stopped,
        },
    })
}

/// Runs the problems until they are done or a stop's grace period is over, then waits for
/// the writer to judge and store the last ones and stops the observer.
async fn drive(running: Running) -> anyhow::Result<Driven> {
    let Running {
        runner,
        jobs,
        done_tx,
        writer,
        observer,
        stopped,
        grace,
        progress,
        judge_stop,
        desk,
        quiet,
    } = running;
    let run = runner.run(jobs, move |report| {
        let _ = done_tx.send(results::Finished {
            problem: report.problem.to_string(),
            result: report.result.map_err(|e| e.to_string()),
            span: report.span,
        });
    });
    // Each problem's span (the root of its own trace) links to the run span.
    let run = tracing::Instrument::instrument(run, observer.run_span());
    let grace_over = async {
        stopped.cancelled().await;
        if !quiet {
            eprintln!(
                "stopping: no new calls; up to {} s for the calls in flight and for judging the \
                 problems already solved (signal again to abort)",
                grace.as_secs()
            );
        }
        tokio::time::sleep(grace).await;
    };
    let finished_in_time = tokio::select! {
        summary = run => { summary.context("running problems")?; true }
        _ = grace_over => {
            // Not a failure: a resume makes those calls.
            tracing::info!("shutdown grace period over; calls still in flight are abandoned");
            false
        }
    };
    // The display stays up while the last problems are judged, and the completed
    // iterations of problems left unfinished (their verdicts are kept for a resume).
    let written = writer.await.context("result writer task failed");
    desk.settle().await;
    judge_stop.cancel();
    if let Some(slot) = &progress {
        slot.freeze();
    }
    observer.finish().await;
    Ok(Driven {
        written: written??,
        finished_in_time,
    })
}

/// Stops the endpoints, commits what is queued, rebuilds the outputs, writes `run.json`
/// and closes the store.
async fn finish(closing: Closing, driven: Driven) -> anyhow::Result<RunResult> {
    let Closing {
        started,
        config_source,
        dataset_label,
        dir,
        store,
        iterations,
        client,
        own_endpoints,
        counts,
        stopped,
    } = closing;
    let Driven {
        mut written,
        finished_in_time,
    } = driven;
    let permanent_stop = client.permanent_stop_reason();

    if let Some(endpoints) = own_endpoints {
        endpoints.shutdown().await;
    }
    // Everything in flight has been stored or abandoned; commit what is queued.
    let flushed = store.flush().await;
    if let Some(failure) = store.failure() {
        anyhow::bail!(
            "run store {}: {failure}\nnothing already stored is lost; fix the cause and resume with: tmas run --resume {}",
            store.path().display(),
            dir.root.display()
        );
    }
    flushed.map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;

    let outputs = rebuild_outputs(
        &store,
        &dir,
        iterations,
        std::mem::take(&mut written.outputs),
    )
    .await?;
    // Anything neither done nor failed is left for a resume (stopped by a signal or by
    // permanent errors, or left unstored because a call of it could not be completed or
    // stored).
    let left = outputs.accounting.problems_unfinished;
    let interrupted = left > 0;
    if interrupted {
        tracing::info!(
            left,
            stop_requested = stopped.is_cancelled(),
            finished_in_time,
            unstored = written.interrupted,
            "run ends with problems left"
        );
    }
    let status = if permanent_stop.is_some() {
        "stopped"
    } else if interrupted {
        "interrupted"
    } else if outputs.accounting.is_clean() {
        "completed"
    } else {
        "degraded"
    };
    observe::on_accounting(&outputs.accounting);
    let wall_seconds = started.elapsed().as_secs_f64();
    let mut summary = outputs.summary(
        status,
        config_source,
        dataset_label,
        iterations,
        wall_seconds,
    );
    summary.stopped_by = permanent_stop.as_ref().map(|p| {
        format!(
            "endpoint `{}` answered {} calls in a row with a permanent error; the last: {}",
            p.endpoint, p.consecutive, p.error
        )
    });
    dir.write_summary(&summary)?;
    store.send(Fact::Meta(vec![(META_STATUS.into(), status.into())]));
    store
        .close()
        .await
        .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
    if written.failed.len() != outputs.problems_failed.len() {
        tracing::debug!(
            this_session = written.failed.len(),
            stored = outputs.problems_failed.len(),
            "failed problems"
        );
    }
    Ok(RunResult {
        run_dir: dir.root,
        table: outputs.table,
        problems_done: outputs.problems_done,
        problems_failed: outputs.accounting.problems_failed.clone(),
        unfinished: outputs.unfinished,
        wall_seconds,
        interrupted,
        calls_replayed: counts.replayed.load(Ordering::Relaxed),
        calls_sent: counts.sent.load(Ordering::Relaxed),
        accounting: outputs.accounting,
        permanent_stop,
        store_writer_cpu_s: store.writer_cpu_seconds(),
    })
}

/// The runner's roles (a pool for each role the method calls), admission and call
/// priority for `config` (also what `tmas bench eval` hands its scheduling model). Text
/// on spans is the run's observer option ([`observe::trace_content`]), set by the caller.
pub fn runner_settings(config: &Config) -> RunnerSettings {
    runner_settings_for_roles(config, config.method.roles().iter().copied())
}

/// [`runner_settings`] with a pool for each of `roles` (a server, whose requests may ask
/// for any method, has one for every role any method calls).
pub fn runner_settings_for_roles(
    config: &Config,
    roles: impl IntoIterator<Item = crate::role::Role>,
) -> RunnerSettings {
    let roles = roles
        .into_iter()
        .map(|role| {
            let workers = config
                .role(role)
                .pool_size
                .unwrap_or(config.run.max_in_flight);
            let settings =
                RoleSettings::new(role.as_str(), Config::client_group(role), workers.max(1));
            if role.runs_beside_previous() {
                settings.beside_previous()
            } else {
                settings
            }
        })
        .collect();
    let admission = Admission::of_kind(
        config.run.admission,
        AdmissionBounds {
            max_concurrent_problems: config.run.max_concurrent_problems,
            max_active_problems: config.run.effective_max_active_problems(),
            target_in_flight: config.run.max_in_flight,
        },
    );
    RunnerSettings::new(roles)
        .with_admission(admission)
        .with_priority(config.run.call_priority)
        .with_iterations(config.method.iterations)
}

#[cfg(test)]
mod tests {
    use tmas_actors::runner::{AdmissionKind, CallPriority};

    use crate::role::Role;

    use super::*;

    #[test]
    fn runner_settings_take_the_configs_policies_as_they_are() {
        let mut config = Config::default();
        config.run.admission = AdmissionKind::WorkConserving;
        config.run.call_priority = CallPriority::LatencyAware;
        config.run.max_in_flight = 64;
        config.run.max_active_problems = Some(7);
        config.method.iterations = 3;
        let s = runner_settings(&config);
        assert_eq!(
            s.admission,
            Admission::WorkConserving {
                max_active_problems: 7,
                target_in_flight: 64
            }
        );
        assert_eq!(s.priority, CallPriority::LatencyAware);
        assert_eq!(s.iterations, Some(3));
        assert!(!s.trace_content, "the observer's option, set by the caller");
        s.validate().expect("valid runner settings");
        // One pool per role TMAS calls, in stage order; only the guideline runs beside the
        // role before it (experience).
        let labels: Vec<&str> = s.roles.iter().map(|r| &*r.role).collect();
        assert_eq!(
            labels,
            [
                "solution",
                "verification",
                "summary",
                "experience",
                "guideline"
            ]
        );
        let beside: Vec<&str> = s
            .roles
            .iter()
            .filter(|r| r.beside_previous)
            .map(|r| &*r.role)
            .collect();
        assert_eq!(beside, [Role::Guideline.as_str()]);
        // A baseline's run has the pools of its own roles only.
        config.method.name = crate::config::MethodName::SelfRefine;
        let labels: Vec<String> = runner_settings(&config)
            .roles
            .iter()
            .map(|r| r.role.to_string())
            .collect();
        assert_eq!(labels, ["solution", "critique"]);
        config.run.admission = AdmissionKind::Fixed;
        assert_eq!(
            runner_settings(&config).admission,
            Admission::Fixed {
                max_concurrent_problems: config.run.max_concurrent_problems
            }
        );
    }
}
