//! `tmas bench eval`: the whole engine (`tmas run`'s code path, run store on) against a
//! simulator in a separate process, at evaluation scale.
//!
//! The engine runs in this process, so its CPU time and peak RSS are this process's own
//! ([`crate::resources`]); the simulator is a `tmas sim-server` child whose `/sim/stats`
//! gives the serving time summed over calls (`busy_seconds`, request arrival → response
//! end) and the peak number of requests it saw at once. From those:
//!
//! - slot utilization = busy_seconds ÷ (in-flight cap × wall time);
//! - lower bound on wall time = max(busy_seconds ÷ cap, longest per-problem dependency
//!   chain). The chain is computed from the latencies the client measured for each call
//!   (kept in the run store): per iteration, the slowest candidate's solution → slowest
//!   verification → summary, then the slower of the experience and guideline calls. With
//!   `fixed:L` that is 4·L per iteration.
//!
//! The LLM judge is off (rule check only), so every call counted is a method call. With
//! `--judge` the same workload runs twice, without the judge and then with it on its own
//! simulated endpoint ([`judge`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

use super::sim_process::SimProcess;
use crate::config::{AdmissionKind, CallPriority, Config, EndpointConfig};
use crate::engine::{self, RunRequest};
use crate::eval::dataset::{DatasetSpec, load_dataset};
use crate::resources;
use chain::{LastProblem, chain_figures};
use tmas_actors::runner::RunnerSettings;
use tmas_client::Routing;

pub(crate) mod chain;
pub(crate) mod judge;
pub(crate) mod repeat;

/// Routing of the endpoint group (`[routing]`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum EvalRouting {
    LeastLoad,
    PrefixAffinity,
}

impl EvalRouting {
    fn routing(self) -> Routing {
        match self {
            EvalRouting::LeastLoad => Routing::LeastLoad,
            EvalRouting::PrefixAffinity => Routing::PrefixAffinity,
        }
    }
}

/// Knobs of the evaluation benchmark.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalBenchArgs {
    #[command(flatten)]
    pub workload: super::WorkloadArgs,
    /// Cap on calls in flight (global, endpoint and every role pool).
    #[arg(long = "max-in-flight", value_name = "N", default_value_t = 800)]
    pub in_flight: usize,
    /// Admission policy.
    #[arg(long, value_enum, default_value_t = AdmissionKind::WorkConserving)]
    pub admission: AdmissionKind,
    /// Window of the fixed policy (released: 100).
    #[arg(long, default_value_t = 100)]
    pub max_concurrent_problems: usize,
    /// Bound of the work-conserving policy (default: 2 × --max-concurrent-problems).
    #[arg(long)]
    pub max_active_problems: Option<usize>,
    /// Which waiting call gets a free slot (`run.call_priority`, docs/configuration.md).
    #[arg(long, value_enum, default_value_t = CallPriority::LeastProgressFirst)]
    pub call_priority: CallPriority,
    /// Simulator latency: `fixed:200ms` or `lognormal:200ms:1.0`.
    #[arg(long, default_value = "fixed:200ms")]
    pub latency: String,
    /// Solution reply size in bytes (the simulator pads to it).
    #[arg(long, default_value_t = 40_000)]
    pub solution_bytes: usize,
    /// Summary reply size in bytes.
    #[arg(long, default_value_t = 4_000)]
    pub summary_bytes: usize,
    /// Seed of the run and the simulator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulator processes, each one endpoint of the group every role uses; the cap is
    /// split evenly between them (each endpoint's `max_in_flight`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub endpoints: u16,
    /// How the group routes calls over the endpoints.
    #[arg(long, value_enum, default_value_t = EvalRouting::LeastLoad)]
    pub routing: EvalRouting,
    /// Serve with the simulator's server model: a TOML file of `[server_model]` keys
    /// (docs/simulator.md); `--latency` then does not apply.
    #[arg(long, value_name = "FILE")]
    pub server_model: Option<PathBuf>,
    /// Worker threads of the simulator child (default: as many as the engine's runtime
    /// has, which the global `--worker-threads` sets).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub sim_worker_threads: Option<u16>,
    /// Keep the run directory (store, results) here instead of deleting a temporary one.
    #[arg(long = "out", value_name = "DIR")]
    pub keep_run: Option<PathBuf>,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
    /// Run the benchmark this many times, each in its own process, and print the median
    /// and range of its figures (one run's CPU varies by ±5 % on a busy 2-core machine).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub runs: u16,
    /// Pause between runs (after a sync), so the previous run's disk writeback and load
    /// settle. 65 s because ext4 without a journal skips inodes freed in the last 60 s
    /// when it creates a file: right after a run deleted its ~2,600 files, the next run's
    /// file creations scanned past them, up to ~4 % of its CPU (docs/performance-log.md).
    #[arg(long, default_value_t = 65, value_name = "SECS")]
    pub settle_secs: u64,
    /// With `--runs N`, run k uses seed `--seed + k − 1`: the median is then over N latency
    /// draws, as the scheduling model's ceiling is a mean over draws. Without it every run
    /// repeats the same draw, so the runs differ only by timing noise (at P = 200 with
    /// long-tailed latency one draw's utilization lies anywhere in ~0.62–0.85 of the model).
    #[arg(long)]
    pub seed_per_run: bool,
    /// Run the workload without the LLM judge, then with it (R = `--judge-repeats`,
    /// `judge.reuse` on) on a simulated endpoint of its own, and report wall with ÷
    /// without, the judge endpoint's busy share of its cap while judge work waited, and
    /// judge calls sent ÷ asked. The run's global cap is `--in-flight` plus the judge's.
    #[arg(long)]
    pub judge: bool,
    /// The judge endpoint's `max_in_flight` (with `--judge`).
    #[arg(long, default_value_t = 200)]
    pub judge_in_flight: usize,
    /// R, judge calls per candidate (with `--judge`).
    #[arg(long, default_value_t = 4)]
    pub judge_repeats: u32,
    /// Also write this run's result here (used by `--runs` for its child processes).
    #[arg(long, value_name = "FILE", hide = true)]
    pub result_json: Option<PathBuf>,
}

/// Figures of one evaluation-benchmark run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EvalBenchResult {
    pub problems: usize,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    pub in_flight: usize,
    pub admission: AdmissionKind,
    pub max_concurrent_problems: usize,
    pub max_active_problems: usize,
    pub call_priority: CallPriority,
    pub latency: String,
    /// Seed of the run and the simulator (absent in results written before it was kept).
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default = "one")]
    pub endpoints: u16,
    #[serde(default = "least_load")]
    pub routing: EvalRouting,
    /// The server model's parameters, when it served.
    #[serde(default)]
    pub server_model: Option<crate::sim::server_model::ServerModelOptions>,
    /// Server model, summed over the endpoints: prompt tokens, those served from the
    /// prefix cache, those prefilled, their ratio, the deepest queue and the 503s of a
    /// full queue.
    #[serde(default)]
    pub prefix: Option<PrefixFigures>,
    /// Requests each endpoint received (load balance: max ÷ mean).
    #[serde(default)]
    pub endpoint_requests: Vec<u64>,
    /// Worker threads of the engine's runtime and of the simulator child.
    pub engine_worker_threads: usize,
    pub sim_worker_threads: usize,
    pub solution_bytes: usize,
    pub summary_bytes: usize,
    pub problems_done: usize,
    pub problems_failed: usize,
    pub wall_s: f64,
    /// Calls the engine sent (all roles, the judge's with `--judge`).
    pub calls: u64,
    /// Chat-completion requests the simulator received (retries included).
    pub sim_requests: u64,
    pub calls_per_s: f64,
    /// Serving time summed over calls, measured by the simulator.
    pub busy_s: f64,
    pub slot_utilization: f64,
    /// busy_s ÷ cap.
    pub bound_capacity_s: f64,
    /// Longest per-problem dependency chain (client-measured call latencies).
    pub bound_chain_s: f64,
    pub lower_bound_s: f64,
    pub wall_over_bound: f64,
    /// `tmas bench schedule`'s utilization for this workload and policy at zero
    /// orchestrator cost (mean of [`MODEL_DRAWS`] latency draws): the ceiling of the
    /// scheduling alone. `None` when the latency model could not be read.
    pub model_utilization: Option<f64>,
    /// The same model with the same admission, ordering calls by their true remaining
    /// critical path (known only to the model) at a priority gate: what foresight of every
    /// latency would add to the ceiling above.
    pub model_oracle_utilization: Option<f64>,
    /// The problem that finished last: start, end and own chain (what it waited for
    /// slots is end − start − chain).
    pub last_problem: Option<LastProblem>,
    pub cpu_s: f64,
    /// Of `cpu_s`, what the run store's writer thread used (SQLite, chunking and hashing
    /// prompts, file writes). `None` off Linux.
    pub store_writer_cpu_s: Option<f64>,
    pub cpu_s_per_1k_calls: f64,
    pub peak_rss_mib: f64,
    pub sim_peak_in_flight: u64,
    pub store_mib: f64,
    /// The simulator child's CPU seconds during the run (it shares the machine's cores).
    pub sim_cpu_s: Option<f64>,
    /// 1-minute load average at the start and the end (measurements above ~1.5 on this
    /// 2-core machine are unreliable).
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    /// With `--judge`: the judge's figures (the rest are the run with the judge).
    #[serde(default)]
    pub judge: Option<judge::JudgeFigures>,
}

/// The server model's counters over every endpoint of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrefixFigures {
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub prefill_tokens_computed: u64,
    pub hit_rate: f64,
    /// Of the refine and verification calls (which quote a shared context) alone.
    #[serde(default)]
    pub shared_context_prompt_tokens: u64,
    #[serde(default)]
    pub shared_context_hit_rate: f64,
    pub peak_queue_depth: u64,
    pub rejected_queue_full: u64,
}

fn one() -> u16 {
    1
}

fn least_load() -> EvalRouting {
    EvalRouting::LeastLoad
}

/// Latency draws the scheduling model averages over.
pub const MODEL_DRAWS: u64 = 5;

/// The zero-overhead model's utilization for this run's workload and the admission and
/// call priority the engine derived from its config, then with the oracle's call order
/// under the same admission.
fn model_ceilings(args: &EvalBenchArgs, settings: &RunnerSettings) -> Option<(f64, f64)> {
    use super::schedule::model::{CallOrder, Gate};
    let policy = super::schedule::Policy {
        in_flight: args.in_flight,
        admission: settings.admission,
        priority: CallOrder::Runtime(settings.priority),
        // The model client's global cap is a FIFO semaphore.
        gate: Gate::Fifo,
        latency: args.latency.parse().ok()?,
        difficulty_sigma: 0.0,
    };
    let oracle = super::schedule::Policy {
        priority: CallOrder::CriticalPath,
        // The oracle's best gate (docs/benchmarks.md).
        gate: Gate::Priority,
        ..policy
    };
    let utilization = |policy: &super::schedule::Policy| {
        let outcomes = super::schedule::draws(&args.workload, policy, MODEL_DRAWS);
        super::schedule::mean_of(&outcomes, |o| o.utilization)
    };
    Some((utilization(&policy), utilization(&oracle)))
}

/// Runs the benchmark (`--runs` times) and prints its figures; the results of every run.
pub async fn run(args: EvalBenchArgs) -> anyhow::Result<Vec<EvalBenchResult>> {
    args.workload.validate()?;
    if args.runs > 1 {
        let results = repeat::run_repeated(&args).await?;
        if !args.no_write {
            let summary = repeat::EvalSummary::of(&results);
            let path =
                super::write_result("eval", &json!({ "runs": results, "summary": summary }))?;
            println!("written to {}", path.display());
        }
        return Ok(results);
    }
    run_once(args).await.map(|r| vec![r])
}

/// One run in this process.
async fn run_once(args: EvalBenchArgs) -> anyhow::Result<EvalBenchResult> {
    anyhow::ensure!(args.in_flight > 0, "--max-in-flight must be at least 1");
    let max_active = args
        .max_active_problems
        .unwrap_or(args.max_concurrent_problems.saturating_mul(2));

    let (work, temporary) = match &args.keep_run {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "tmas-bench-eval-{}-{}",
                std::process::id(),
                unix_secs()
            )),
            true,
        ),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let outcome = if args.judge {
        with_and_without_judge(&args, max_active, &work).await
    } else {
        run_in(&args, max_active, &work, false).await
    };
    if temporary && let Err(e) = std::fs::remove_dir_all(&work) {
        eprintln!("warning: cannot remove {}: {e}", work.display());
    }
    let result = outcome?;
    print_result(&result);
    if let Some(path) = &args.result_json {
        super::write_json(path, &result)?;
    }
    if !args.no_write {
        let path = super::write_result("eval", &json!(result))?;
        println!("written to {}", path.display());
    }
    Ok(result)
}

/// The workload without the judge (in `work/without`), then with it (`work/with`): the
/// second run's figures with the judge's.
async fn with_and_without_judge(
    args: &EvalBenchArgs,
    max_active: usize,
    work: &Path,
) -> anyhow::Result<EvalBenchResult> {
    let (without, with) = (work.join("without"), work.join("with"));
    for dir in [&without, &with] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let reference = run_in(args, max_active, &without, false).await?;
    println!("without the judge: {:.1} s", reference.wall_s);
    let mut result = run_in(args, max_active, &with, true).await?;
    let db = with.join("run").join(crate::store::DB_FILE);
    let busy = judge::busy_while_waiting(&db, args.judge_in_flight)?;
    let calls = result
        .judge
        .as_ref()
        .map_or((0, 0), |j| (j.calls_asked, j.calls_sent));
    result.judge = Some(judge::JudgeFigures {
        in_flight: args.judge_in_flight,
        repeats: args.judge_repeats,
        wall_without_s: reference.wall_s,
        wall_ratio: result.wall_s / reference.wall_s,
        waiting_s: busy.waiting_s,
        busy_share_while_waiting: busy.share,
        waiting_from_iteration_end_s: busy.waiting_from_iteration_end_s,
        busy_share_from_iteration_end: busy.share_from_iteration_end,
        mean_ask_to_send_ms: busy.mean_ask_to_send_ms,
        calls_asked: calls.0,
        calls_sent: calls.1,
        sent_over_asked: if calls.0 > 0 {
            calls.1 as f64 / calls.0 as f64
        } else {
            f64::NAN
        },
    });
    Ok(result)
}

async fn run_in(
    args: &EvalBenchArgs,
    max_active: usize,
    work: &Path,
    with_judge: bool,
) -> anyhow::Result<EvalBenchResult> {
    let dataset_path = work.join("dataset.jsonl");
    write_dataset(&dataset_path, args.workload.problems)?;
    let dataset = load_dataset(&DatasetSpec::new(&dataset_path))?;
    let run_dir = work.join("run");
    anyhow::ensure!(
        !run_dir.exists(),
        "{} already exists: give --out a new directory",
        run_dir.display()
    );

    let engine_worker_threads = tokio::runtime::Handle::current().metrics().num_workers();
    let sim_worker_threads = args
        .sim_worker_threads
        .map_or(engine_worker_threads, usize::from);
    let mut sim_args = vec![
        "--worker-threads".into(),
        sim_worker_threads.to_string(),
        "--latency".into(),
        args.latency.clone(),
        "--solution-bytes".into(),
        args.solution_bytes.to_string(),
        "--summary-bytes".into(),
        args.summary_bytes.to_string(),
        "--sim-seed".into(),
        args.seed.to_string(),
        "--dataset".into(),
        dataset_path.display().to_string(),
    ];
    let server_model = match &args.server_model {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--server-model: cannot read {}", path.display()))?;
            let model: crate::sim::server_model::ServerModelOptions = toml::from_str(&text)
                .with_context(|| format!("--server-model: {}", path.display()))?;
            model
                .validate()
                .map_err(|e| anyhow::anyhow!("--server-model {}: {e}", path.display()))?;
            let options = work.join("sim-options.toml");
            let table = toml::to_string(&crate::sim::SimOptions {
                server_model: Some(model.clone()),
                ..Default::default()
            })
            .context("encoding the simulator options")?;
            std::fs::write(&options, table)
                .with_context(|| format!("cannot write {}", options.display()))?;
            sim_args.push("--options".into());
            sim_args.push(options.display().to_string());
            Some(model)
        }
    };
    let mut sims = Vec::with_capacity(usize::from(args.endpoints));
    for _ in 0..args.endpoints {
        sims.push(SimProcess::spawn(&sim_args).await?);
    }
    let urls: Vec<String> = sims.iter().map(|s| s.base_url.clone()).collect();
    let judge_sim = if with_judge {
        Some(SimProcess::spawn(&sim_args).await?)
    } else {
        None
    };
    let judge_url = judge_sim.as_ref().map(|s| s.base_url.as_str());
    let config = bench_config(args, max_active, &urls, judge_url, work)?;
    let settings = engine::runner_settings(&config);

    for sim in &sims {
        sim.reset().await?;
    }
    let sim_cpu = || -> Option<f64> {
        sims.iter()
            .map(|s| s.pid().and_then(process_cpu_seconds))
            .sum::<Option<f64>>()
    };
    let sim_cpu0 = sim_cpu();
    let load_before = load_average();
    let (started, cpu0) = (Instant::now(), resources::cpu_seconds());
    let outcome = engine::run(RunRequest {
        config,
        config_source: PathBuf::from("(tmas bench eval)"),
        dataset,
        run_dir: run_dir.clone(),
        env: Vec::new(),
        status_every: None,
        preflight: false,
        observe: engine::observe::ObserveOptions::quiet(),
    })
    .await;
    let (wall, cpu) = (
        started.elapsed().as_secs_f64(),
        resources::cpu_seconds() - cpu0,
    );
    let load_after = load_average();
    let mut all_stats = Vec::with_capacity(sims.len());
    for sim in &sims {
        all_stats.push(sim.stats().await);
    }
    let sim_cpu = match (sim_cpu0, sim_cpu()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    for sim in sims {
        sim.stop().await;
    }
    if let Some(sim) = judge_sim {
        sim.stop().await;
    }
    let result = outcome.context("running the engine")?;
    let all_stats = all_stats.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let field = |v: &serde_json::Value, k: &str| v.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let sum = |k: &str| all_stats.iter().map(|s| field(s, k)).sum::<f64>();
    let busy = sum("busy_seconds");
    let endpoint_requests: Vec<u64> = all_stats
        .iter()
        .map(|s| field(s, "requests_total") as u64)
        .collect();
    let prefix = server_model.as_ref().map(|_| {
        let model = |k: &str| -> Vec<f64> {
            all_stats
                .iter()
                .map(|s| s.get("server_model").map_or(0.0, |m| field(m, k)))
                .collect()
        };
        let total = |k: &str| model(k).iter().sum::<f64>() as u64;
        let (prompt, cached) = (total("prompt_tokens"), total("cached_prompt_tokens"));
        let (shared, shared_cached) = (
            total("shared_context_prompt_tokens"),
            total("shared_context_cached_tokens"),
        );
        // Cached share of a token count (0 without tokens).
        let share = |cached: u64, of: u64| {
            if of > 0 {
                cached as f64 / of as f64
            } else {
                0.0
            }
        };
        PrefixFigures {
            shared_context_prompt_tokens: shared,
            shared_context_hit_rate: share(shared_cached, shared),
            prompt_tokens: prompt,
            cached_prompt_tokens: cached,
            prefill_tokens_computed: total("prefill_tokens_computed"),
            hit_rate: share(cached, prompt),
            peak_queue_depth: model("peak_queue_depth").into_iter().fold(0.0, f64::max) as u64,
            rejected_queue_full: total("rejected_queue_full"),
        }
    });
    let db = run_dir.join(crate::store::DB_FILE);
    let (chain, last_problem) = chain_figures(&db)?;
    let store_bytes = std::fs::metadata(&db).map_or(0, |m| m.len())
        + std::fs::metadata(db.with_extension("sqlite-wal")).map_or(0, |m| m.len());

    let cap = args.in_flight as f64;
    let calls = result.calls_sent;
    let bound_capacity = busy / cap;
    let lower_bound = bound_capacity.max(chain);
    // After the measurement, so the model's CPU is outside it.
    let ceilings = model_ceilings(args, &settings);
    Ok(EvalBenchResult {
        problems: args.workload.problems,
        n: args.workload.n,
        m: args.workload.m,
        iterations: args.workload.iterations,
        in_flight: args.in_flight,
        admission: args.admission,
        max_concurrent_problems: args.max_concurrent_problems,
        max_active_problems: max_active,
        call_priority: args.call_priority,
        latency: args.latency.clone(),
        seed: Some(args.seed),
        endpoints: args.endpoints,
        routing: args.routing,
        server_model,
        prefix,
        endpoint_requests,
        engine_worker_threads,
        sim_worker_threads,
        solution_bytes: args.solution_bytes,
        summary_bytes: args.summary_bytes,
        problems_done: result.problems_done,
        problems_failed: result.problems_failed.len(),
        wall_s: wall,
        calls,
        sim_requests: sum("requests_total") as u64,
        calls_per_s: calls as f64 / wall,
        busy_s: busy,
        slot_utilization: busy / (cap * wall),
        bound_capacity_s: bound_capacity,
        bound_chain_s: chain,
        lower_bound_s: lower_bound,
        wall_over_bound: wall / lower_bound,
        model_utilization: ceilings.map(|(online, _)| online),
        model_oracle_utilization: ceilings.map(|(_, oracle)| oracle),
        last_problem,
        cpu_s: cpu,
        // None where the platform cannot measure a thread's CPU (only Linux can).
        store_writer_cpu_s: result.store_writer_cpu_s.filter(|s| *s > 0.0),
        cpu_s_per_1k_calls: if calls > 0 {
            cpu / calls as f64 * 1000.0
        } else {
            f64::NAN
        },
        peak_rss_mib: resources::peak_rss_bytes().map_or(f64::NAN, |b| b as f64 / MIB),
        sim_peak_in_flight: all_stats
            .iter()
            .map(|s| field(s, "peak_in_flight") as u64)
            .sum(),
        store_mib: store_bytes as f64 / MIB,
        sim_cpu_s: sim_cpu,
        load_before,
        load_after,
        // The calls only; the caller adds the rest ([`with_and_without_judge`]).
        judge: with_judge.then_some(judge::JudgeFigures {
            in_flight: args.judge_in_flight,
            repeats: args.judge_repeats,
            wall_without_s: f64::NAN,
            wall_ratio: f64::NAN,
            waiting_s: f64::NAN,
            busy_share_while_waiting: f64::NAN,
            waiting_from_iteration_end_s: f64::NAN,
            busy_share_from_iteration_end: f64::NAN,
            mean_ask_to_send_ms: f64::NAN,
            calls_asked: result.accounting.judge.verdicts,
            calls_sent: result.accounting.judge.calls,
            sent_over_asked: f64::NAN,
        }),
    })
}

const MIB: f64 = 1024.0 * 1024.0;

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The 1-minute load average, if `/proc/loadavg` is readable.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// User + system CPU seconds of process `pid` (`/proc/PID/stat` fields 14 and 15).
fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its `)`.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) / ticks as f64)
}

/// Writes `problems` synthetic problems (id, a question of a few hundred bytes, an
/// integer answer) as JSONL.
pub(crate) fn write_dataset(path: &Path, problems: usize) -> anyhow::Result<()> {
    let mut text = String::with_capacity(problems * 400);
    for i in 0..problems {
        let row = json!({
            "problem_id": format!("bench-{i:05}"),
            "question": format!(
                "Problem {i}. Let a_1 = {a} and a_(k+1) = a_k^2 - a_k + 1 for k >= 1. \
                 Find the remainder when a_1 a_2 ... a_{n} is divided by 1000, and justify \
                 every step of the argument. Give the final answer as an integer.",
                a = i % 7 + 2,
                n = i % 50 + 10,
            ),
            "answer": ((i * 7919) % 1000).to_string(),
        });
        text.push_str(&row.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The engine's config for this benchmark: one endpoint (the simulator child) with the
/// cap as its `max_in_flight`, every role pool as large as the cap, a context window large
/// enough for ~350 KB refine prompts; judge off, or with `judge_url` on that endpoint of
/// its own (group `judge`, `--judge-in-flight` its cap, added to the global cap).
fn bench_config(
    args: &EvalBenchArgs,
    max_active: usize,
    base_urls: &[String],
    judge_url: Option<&str>,
    work: &Path,
) -> anyhow::Result<Config> {
    let cap = args.in_flight;
    let per_endpoint = cap.div_ceil(base_urls.len().max(1));
    let mut config = Config::default();
    config.run.seed = args.seed;
    config.run.max_concurrent_problems = args.max_concurrent_problems;
    config.run.max_active_problems = Some(max_active);
    config.run.max_in_flight = cap;
    config.run.admission = args.admission;
    config.run.call_priority = args.call_priority;
    config.run.out_dir = work.to_path_buf();
    config.method.n = args.workload.n;
    config.method.m = args.workload.m;
    config.method.iterations = args.workload.iterations;
    config.judge.enabled = false;
    config
        .routing
        .insert("default".into(), args.routing.routing());
    for (i, base_url) in base_urls.iter().enumerate() {
        // The first endpoint keeps the name `sim` (one-endpoint results compare).
        let name = if i == 0 {
            "sim".to_string()
        } else {
            format!("sim{i}")
        };
        let mut sim = EndpointConfig::new(base_url.clone(), "tmas-sim");
        sim.max_in_flight = per_endpoint;
        sim.request_timeout_secs = 3600;
        sim.context_window = 16_777_216;
        config.endpoints.insert(name, sim);
    }
    if let Some(url) = judge_url {
        let methods: Vec<String> = config.endpoints.keys().cloned().collect();
        let mut judge = EndpointConfig::new(url.to_owned(), "tmas-sim");
        judge.max_in_flight = args.judge_in_flight;
        judge.request_timeout_secs = 3600;
        judge.context_window = 16_777_216;
        config.endpoints.insert("judge".into(), judge);
        config.groups.insert("default".into(), methods);
        config.groups.insert("judge".into(), vec!["judge".into()]);
        config.roles[crate::role::Role::Judge].group = "judge".into();
        config.judge.enabled = true;
        config.judge.repeats = args.judge_repeats;
        config.run.max_in_flight = cap + args.judge_in_flight;
    }
    for &role in config.method.roles() {
        // max_tokens only has to let the padded replies through (the simulator cuts a
        // reply at max_tokens × 4 bytes).
        let r = &mut config.roles[role];
        r.max_tokens = 65_536;
        r.pool_size = Some(cap);
    }
    super::validated(config, "tmas bench eval config")
}

fn print_result(r: &EvalBenchResult) {
    let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.2}"));
    println!(
        "tmas bench eval: P={} N={} M={} T={}, in-flight {}, admission {} (window {}, max active {}), {}, latency {}, solution {} B, summary {} B",
        r.problems,
        r.n,
        r.m,
        r.iterations,
        r.in_flight,
        r.admission,
        r.max_concurrent_problems,
        r.max_active_problems,
        r.call_priority,
        r.latency,
        r.solution_bytes,
        r.summary_bytes
    );
    let routing = clap::ValueEnum::to_possible_value(&r.routing)
        .map_or_else(String::new, |v| v.get_name().to_owned());
    if let Some(m) = &r.server_model {
        println!(
            "  server model     {} endpoint(s), {routing}; prefill {} tok/s, decode {} us/token + {} us/running, max running {}, queue {}, KV {} tokens, difficulty σ {}, speedup {}",
            r.endpoints,
            m.prefill_tokens_per_s,
            m.decode_us_per_token,
            m.decode_us_per_running,
            m.max_running,
            m.queue_capacity,
            m.kv_cache_tokens,
            m.difficulty_sigma,
            m.speedup
        );
    } else if r.endpoints > 1 {
        println!("  endpoints        {}, {routing}", r.endpoints);
    }
    if let Some(p) = &r.prefix {
        println!(
            "  prefix cache     {:.3} of {} prompt tokens cached ({:.3} of the {} of refine and verification calls); {} prefilled; peak queue {}; {} rejected (queue full)",
            p.hit_rate,
            p.prompt_tokens,
            p.shared_context_hit_rate,
            p.shared_context_prompt_tokens,
            p.prefill_tokens_computed,
            p.peak_queue_depth,
            p.rejected_queue_full
        );
    }
    if r.endpoint_requests.len() > 1 {
        let mean =
            r.endpoint_requests.iter().sum::<u64>() as f64 / r.endpoint_requests.len() as f64;
        let max = r.endpoint_requests.iter().copied().max().unwrap_or(0) as f64;
        println!(
            "  endpoint load    requests {:?}: max ÷ mean {:.3}",
            r.endpoint_requests,
            if mean > 0.0 { max / mean } else { 0.0 }
        );
    }
    println!(
        "  worker threads   {} engine, {} simulator",
        r.engine_worker_threads, r.sim_worker_threads
    );
    println!(
        "  problems         {} done, {} failed",
        r.problems_done, r.problems_failed
    );
    println!("  wall time        {:.2} s", r.wall_s);
    println!(
        "  calls            {} ({} at the simulator)",
        r.calls, r.sim_requests
    );
    println!("  calls/s          {:.1}", r.calls_per_s);
    println!(
        "  slot utilization {:.3}  (busy {:.1} s ÷ (cap × wall); target >= 0.90 fixed; lognormal >= 0.95 × model ceiling, >= 0.85 at P = 500)",
        r.slot_utilization, r.busy_s
    );
    println!(
        "  lower bound      {:.2} s  (max of busy ÷ cap {:.2} s, longest chain {:.2} s)",
        r.lower_bound_s, r.bound_capacity_s, r.bound_chain_s
    );
    println!(
        "  wall / bound     {:.3}  (target <= 1.15)",
        r.wall_over_bound
    );
    if let Some(model) = r.model_utilization {
        println!(
            "  model ceiling    {model:.3}  (this policy at zero cost, tmas bench schedule, {MODEL_DRAWS} draws; this run keeps {:.0} %)",
            100.0 * r.slot_utilization / model
        );
    }
    if let Some(oracle) = r.model_oracle_utilization {
        println!(
            "  model oracle     {oracle:.3}  (same admission, calls ordered by their true remaining chain: what knowing latencies in advance would add)"
        );
    }
    if let Some(p) = &r.last_problem {
        println!(
            "  last problem     {}: started at {:.1} s, ended at {:.1} s, own chain {:.1} s, waited {:.1} s",
            p.problem,
            p.start_s,
            p.end_s,
            p.chain_s,
            p.waited_s()
        );
    }
    println!(
        "  CPU-s / 1k calls {:.3}  ({:.1} CPU-s; target <= 0.22, run store included)",
        r.cpu_s_per_1k_calls, r.cpu_s
    );
    if let Some(store) = r.store_writer_cpu_s {
        let share = if r.cpu_s > 0.0 { store / r.cpu_s } else { 0.0 };
        println!(
            "    of which      {store:.1} s run store writer thread ({:.0} %), {:.1} s the rest",
            share * 100.0,
            r.cpu_s - store
        );
    }
    println!(
        "  peak RSS         {:.1} MiB  (target <= 614 at 800 in flight, <= 1536 at 10,000)",
        r.peak_rss_mib
    );
    super::print_sim_peak(r.sim_peak_in_flight, r.in_flight);
    println!("  run store        {:.1} MiB", r.store_mib);
    if let Some(cpu) = r.sim_cpu_s {
        println!("  simulator CPU    {cpu:.1} s  (same cores as the orchestrator)");
    }
    println!(
        "  load average     {} before, {} after (above ~1.5 the figures are unreliable)",
        load(r.load_before),
        load(r.load_after)
    );
    if let Some(j) = &r.judge {
        print_judge(j);
    }
}

fn print_judge(j: &judge::JudgeFigures) {
    println!(
        "  judge            R = {} on its own endpoint, cap {}: wall {:.3} × without ({:.1} s)  (target <= 1.05)",
        j.repeats, j.in_flight, j.wall_ratio, j.wall_without_s
    );
    println!(
        "  judge busy       {:.3} of its cap while judge work waited ({:.1} s from each call's ask)  (target >= 0.9)",
        j.busy_share_while_waiting, j.waiting_s
    );
    println!(
        "  judge busy       {:.3} counting a call as waiting from its iteration's end ({:.1} s; a lower bound); ask to send {:.1} ms on average",
        j.busy_share_from_iteration_end, j.waiting_from_iteration_end_s, j.mean_ask_to_send_ms
    );
    println!(
        "  judge calls      {} sent of {} asked ({:.3}; judge.reuse)",
        j.calls_sent, j.calls_asked, j.sent_over_asked
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_this_process_is_read_from_proc() {
        let cpu = process_cpu_seconds(std::process::id()).expect("/proc on Linux");
        assert!((0.0..1e6).contains(&cpu), "{cpu}");
        assert!(process_cpu_seconds(u32::MAX).is_none());
    }

    #[test]
    fn config_routes_every_role_to_the_simulator_with_the_cap() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: EvalBenchArgs,
        }
        let w =
            Wrap::try_parse_from(["x", "--max-in-flight", "64", "--admission", "fixed"]).unwrap();
        let dir = std::env::temp_dir();
        let c = bench_config(&w.args, 250, &["http://127.0.0.1:9/v1".into()], None, &dir).unwrap();
        assert_eq!(c.run.max_in_flight, 64);
        assert_eq!(c.run.admission, crate::config::AdmissionKind::Fixed);
        assert_eq!(
            c.run.call_priority,
            crate::config::CallPriority::LeastProgressFirst
        );
        assert_eq!(c.run.max_active_problems, Some(250));
        // Every runtime order is selectable, under the names config files use.
        let w = Wrap::try_parse_from(["x", "--call-priority", "latency-aware"]).unwrap();
        let aware =
            bench_config(&w.args, 250, &["http://127.0.0.1:9/v1".into()], None, &dir).unwrap();
        assert_eq!(
            aware.run.call_priority,
            crate::config::CallPriority::LatencyAware
        );
        engine::runner_settings(&aware)
            .validate()
            .expect("the runner accepts it");
        assert!(!c.judge.enabled);
        assert_eq!(c.roles[crate::role::Role::Verification].pool_size, Some(64));
        assert_eq!(c.endpoints["sim"].max_in_flight, 64);
        assert_eq!((c.method.n, c.method.m, c.method.iterations), (8, 8, 5));
        assert!(c.routing.is_empty() || c.routing["default"] == tmas_client::Routing::LeastLoad);

        let w =
            Wrap::try_parse_from(["x", "--max-in-flight", "64", "--routing", "prefix-affinity"])
                .unwrap();
        let urls: Vec<String> = (0..4)
            .map(|i| format!("http://127.0.0.1:{}/v1", 9 + i))
            .collect();
        let c = bench_config(&w.args, 250, &urls, None, &dir).unwrap();
        assert_eq!(c.endpoints.len(), 4);
        assert!(c.endpoints.values().all(|e| e.max_in_flight == 16));
        assert_eq!(c.routing["default"], tmas_client::Routing::PrefixAffinity);
    }

    #[test]
    fn with_the_judge_it_has_an_endpoint_of_its_own_and_its_cap_on_top() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: EvalBenchArgs,
        }
        let w = Wrap::try_parse_from([
            "x",
            "--max-in-flight",
            "64",
            "--judge",
            "--judge-in-flight",
            "16",
        ])
        .unwrap();
        let dir = std::env::temp_dir();
        let url = ["http://127.0.0.1:9/v1".to_owned()];
        let c = bench_config(&w.args, 250, &url, Some("http://127.0.0.1:10/v1"), &dir).unwrap();
        assert!(c.judge.enabled && c.judge.reuse);
        assert_eq!(c.judge.repeats, 4);
        assert_eq!(c.run.max_in_flight, 64 + 16);
        assert_eq!(c.role_endpoints(crate::role::Role::Judge), ["judge"]);
        assert_eq!(c.role_endpoints(crate::role::Role::Solution), ["sim"]);
        assert_eq!(c.endpoints["judge"].max_in_flight, 16);
    }
}
