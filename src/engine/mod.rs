//! `tmas run`: wires config, dataset, prompts, the model client (and the embedded
//! simulator when asked for), the actor runtime and judging into one evaluation.
//!
//! - [`tally`]: token usage per role.
//! - [`judging`]: the rule check and the LLM judge over a finished problem.
//! - [`run_dir`]: the files a run writes.
//!
//! Each problem is judged and written as soon as it finishes, so an interrupted run keeps
//! every finished problem on disk.

pub mod judging;
pub mod run_dir;
pub mod tally;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tmas_actors::bank::{BankInit, JsonFileSink};
use tmas_actors::client::ModelClient;
use tmas_actors::runner::{
    Admission as RuntimeAdmission, JobPriority, ProblemJob, RoleSettings, Runner, RunnerSettings,
};
use tmas_actors::strategy::{CallExecutor, Strategy};
use tokio::sync::mpsc;

use crate::config::schema::Admission;
use crate::config::{Config, Role};
use crate::eval::dataset::{Dataset, Problem};
use crate::eval::pass_at_1::{PassAt1Builder, PassAt1Table};
use crate::method::{
    ProblemInput, PromptSet, TmasOutcome, TmasParams, TmasStrategy, tmas_merge_policies,
};
use crate::sim::SimServer;

use judging::{JudgeSetup, LlmJudge};
use run_dir::{FailedProblem, ProblemRecord, RunDir, RunSummaryFile};
use tally::{TallyingExecutor, UsageTally};

/// What to run.
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
}

/// How a run ended.
#[derive(Debug)]
pub struct RunResult {
    pub run_dir: PathBuf,
    pub table: PassAt1Table,
    pub problems_done: usize,
    pub problems_failed: Vec<FailedProblem>,
    pub wall_seconds: f64,
}

/// Runs the evaluation to the end and writes the run directory.
pub async fn run(request: RunRequest) -> anyhow::Result<RunResult> {
    let RunRequest {
        mut config,
        config_source,
        dataset,
        run_dir,
        env,
        status_every,
    } = request;
    let started = Instant::now();
    let dir = RunDir::create(&run_dir)?;

    // The embedded simulator knows the dataset's answers so its task model is consistent.
    let sim = if config.uses_embedded_sim() {
        let answers = dataset
            .problems
            .iter()
            .map(|p| (p.id.clone(), p.answer.clone()))
            .collect();
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let sim = SimServer::start(config.simulator.clone(), addr, Some(answers))
            .await
            .context("starting the embedded simulator")?;
        config.with_embedded_base_url(&sim.base_url());
        tracing::info!(url = %sim.base_url(), "embedded simulator started");
        Some(sim)
    } else {
        None
    };
    dir.write_config(
        &config
            .to_toml_string()
            .context("serializing the resolved config")?,
    )?;

    let prompts =
        Arc::new(PromptSet::load(&config.prompt_overrides()).context("loading prompt templates")?);
    let params = Arc::new(config.tmas_params());
    let client_config = config
        .client_config(&env)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let client = ModelClient::start(client_config)
        .await
        .context("starting the model client")?;
    let tally = UsageTally::default();
    let executor: Arc<dyn CallExecutor> = Arc::new(TallyingExecutor {
        inner: Arc::new(client.clone()),
        tally: tally.clone(),
    });

    let judge = JudgeSetup {
        llm: config.judge.enabled.then(|| LlmJudge {
            executor: executor.clone(),
            group: Config::client_group(Role::Judge).into(),
            sampling: config.role(Role::Judge).sampling(),
            repeats: config.judge.repeats as usize,
            policy: config.judge.policy,
            prompts: prompts.clone(),
        }),
    };

    let runner = Runner::new(
        runner_settings(&config),
        executor,
        Arc::new(JsonFileSink::new(dir.banks_dir())),
    )
    .context("configuring the actor runtime")?;
    let stats = runner.stats();
    let status_task = status_every.map(|every| {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let s = stats.snapshot();
                let calls_done: u64 = s.roles.iter().map(|r| r.done + r.failed).sum();
                eprintln!(
                    "[{:>6.0}s] problems: {} active, {} done, {} failed | calls: {} outstanding, {} done",
                    started.elapsed().as_secs_f64(),
                    s.active_problems,
                    s.problems_succeeded,
                    s.problems_failed,
                    stats.outstanding_calls(),
                    calls_done
                );
            }
        })
    });

    // Finished problems go to a writer task that judges and stores them while the runner
    // goes on; `on_done` itself must not block the runtime.
    let problems: HashMap<String, Problem> = dataset
        .problems
        .iter()
        .map(|p| (p.id.clone(), p.clone()))
        .collect();
    let problems = Arc::new(problems);
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_results(
        done_rx,
        problems.clone(),
        judge,
        dir.clone(),
        params.iterations,
    ));

    let jobs = dataset
        .problems
        .iter()
        .map(|p| problem_job(p, &params, &prompts));
    let summary = runner
        .run(jobs, move |report| {
            let _ = done_tx.send((
                report.problem.to_string(),
                report.result.map_err(|e| e.to_string()),
            ));
        })
        .await
        .context("running problems")?;
    if let Some(task) = status_task {
        task.abort();
    }
    let written = writer.await.context("result writer task failed")??;

    client.shutdown().await;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }

    let wall_seconds = started.elapsed().as_secs_f64();
    let table = written.builder.build();
    dir.write_pass_at_1(&table)?;
    let status = if summary.stopped_early {
        "stopped"
    } else {
        "completed"
    };
    dir.write_summary(&RunSummaryFile {
        status: status.into(),
        config_file: config_source.display().to_string(),
        dataset: dataset.path.display().to_string(),
        problems_total: dataset.problems.len(),
        problems_done: written.done,
        problems_failed: written.failed.clone(),
        iterations: params.iterations,
        wall_seconds,
        usage_by_role: tally.snapshot(),
        final_pass_at_1: table.final_pass_at_1(),
    })?;
    Ok(RunResult {
        run_dir: dir.root,
        table,
        problems_done: written.done,
        problems_failed: written.failed,
        wall_seconds,
    })
}

fn runner_settings(config: &Config) -> RunnerSettings {
    let roles = [
        Role::Solution,
        Role::Verification,
        Role::Summary,
        Role::Experience,
        Role::Guideline,
    ]
    .into_iter()
    .map(|role| {
        let workers = config
            .role(role)
            .pool_size
            .unwrap_or(config.run.max_in_flight);
        RoleSettings::new(role.as_str(), Config::client_group(role), workers.max(1))
    })
    .collect();
    let admission = match config.run.admission {
        Admission::Fixed => RuntimeAdmission::Fixed {
            max_concurrent_problems: config.run.max_concurrent_problems,
        },
        Admission::WorkConserving => RuntimeAdmission::WorkConserving {
            max_active_problems: config.run.effective_max_active_problems(),
            target_in_flight: config.run.max_in_flight,
        },
    };
    let mut settings = RunnerSettings::new(roles).with_admission(admission);
    settings.priority = JobPriority::OldestProblemFirst;
    settings
}

fn problem_job(
    problem: &Problem,
    params: &Arc<TmasParams>,
    prompts: &Arc<PromptSet>,
) -> ProblemJob<TmasOutcome> {
    let input = ProblemInput {
        id: problem.id.as_str().into(),
        question: problem.question.as_str().into(),
    };
    let strategy: Box<dyn Strategy<Output = TmasOutcome>> = Box::new(TmasStrategy::new(
        input,
        params.clone(),
        prompts.clone(),
        Vec::new(),
        Vec::new(),
    ));
    let banks = tmas_merge_policies(params.dedup_threshold)
        .into_iter()
        .map(|(name, policy)| BankInit {
            name,
            items: Vec::new(),
            version: 0,
            policy,
        })
        .collect();
    ProblemJob {
        id: problem.id.as_str().into(),
        strategy,
        banks,
    }
}

struct Written {
    builder: PassAt1Builder,
    done: usize,
    failed: Vec<FailedProblem>,
}

/// Judges and stores each finished problem as it arrives.
async fn write_results(
    mut rx: mpsc::UnboundedReceiver<(String, Result<TmasOutcome, String>)>,
    problems: Arc<HashMap<String, Problem>>,
    judge: JudgeSetup,
    dir: RunDir,
    iterations: u32,
) -> anyhow::Result<Written> {
    let mut builder = PassAt1Builder::new(
        problems
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        iterations as usize,
    );
    let mut done = 0;
    let mut failed = Vec::new();
    let mut judging = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            next = rx.recv() => {
                let Some((id, result)) = next else { break };
                match result {
                    Err(error) => {
                        tracing::error!(problem = %id, "problem failed: {error}");
                        failed.push(FailedProblem { problem_id: id, error });
                    }
                    Ok(outcome) => {
                        let problem = problems.get(&id).cloned().with_context(|| format!("runner reported unknown problem {id}"))?;
                        let judge = judge.clone();
                        judging.spawn(async move {
                            let judgments = judge.judge_outcome(&problem.question, &problem.answer, &outcome).await;
                            ProblemRecord { problem_id: problem.id, question: problem.question, reference_answer: problem.answer, outcome, judgments }
                        });
                    }
                }
            }
            Some(joined) = judging.join_next(), if !judging.is_empty() => {
                store(joined.context("judging task panicked")?, &dir, &mut builder)?;
                done += 1;
            }
        }
    }
    while let Some(joined) = judging.join_next().await {
        store(joined.context("judging task panicked")?, &dir, &mut builder)?;
        done += 1;
    }
    Ok(Written {
        builder,
        done,
        failed,
    })
}

fn store(record: ProblemRecord, dir: &RunDir, builder: &mut PassAt1Builder) -> anyhow::Result<()> {
    for (t, candidates) in record.judgments.iter().enumerate() {
        for judged in candidates.iter().flatten() {
            builder.record(&record.problem_id, t, judged)?;
        }
    }
    dir.write_problem(&record)
}
