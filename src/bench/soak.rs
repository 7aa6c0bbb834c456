//! `tmas bench soak`: the same run twice on simulators in separate processes, once clean
//! and once under a scripted fault schedule, and a check that the second lost nothing and
//! gave exactly the first one's results.
//!
//! Both runs use two endpoints in one group (two `tmas sim-server` children, each with
//! half the cap). The run under faults adds, by scenario:
//! - `overload`: the simulators together serve `--capacity` requests at once (below the
//!   cap) and answer the rest 503 + `Retry-After`, as vLLM/SGLang with a bounded queue;
//! - `overload-timeout`: plus `request_timeout_secs = --request-timeout-secs`, which the
//!   longest generations exceed;
//! - `full`: plus each simulator SIGKILLed and restarted on its port every `--kill-every`
//!   seconds (down `--down-secs`), 3 % HTTP 500, 2 % dropped connections, 0.5 % hung
//!   requests, 1 % malformed bodies.
//!
//! It prints the faults injected by kind, the client's retries, the concurrency limits the
//! AIMD settled on, the calls lost, the wall-time ratios and whether every call's answer
//! matches; it fails (exit 1) if anything was lost or differs, or the cap was exceeded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, EndpointConfig};
use crate::engine::{self, RunRequest};
use crate::eval::dataset::{DatasetSpec, load_dataset};
use chaos::{Restartable, SimTotals};
use compare::Comparison;

pub mod chaos;
pub mod compare;

/// What the run under faults adds to the clean run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Server capacity below the cap, the rest answered 503 + Retry-After.
    Overload,
    /// Overload, plus a request timeout some long generations exceed.
    OverloadTimeout,
    /// Overload and the timeout, plus kills and restarts, 500s, drops, hangs, bad bodies.
    Full,
}

/// Knobs of the soak.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Intended length of the clean run in minutes; sizes the workload (unless --problems).
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    #[arg(long, value_enum, default_value_t = Scenario::Full)]
    pub scenario: Scenario,
    /// Problems in the synthetic dataset (default: from --minutes).
    #[arg(long)]
    pub problems: Option<usize>,
    /// N: candidates per iteration.
    #[arg(long, default_value_t = 8)]
    pub n: u32,
    /// M: verifications per candidate.
    #[arg(long, default_value_t = 4)]
    pub m: u32,
    /// T: iterations per problem.
    #[arg(long, default_value_t = 4)]
    pub iterations: u32,
    /// Cap on calls in flight (global; each endpoint gets half).
    #[arg(long, default_value_t = 200)]
    pub in_flight: usize,
    /// Simulator latency.
    #[arg(long, default_value = "lognormal:1000ms:1.0")]
    pub latency: String,
    /// Requests both simulators serve at once, together (default: 3/4 of --in-flight).
    #[arg(long)]
    pub capacity: Option<usize>,
    /// Share of --capacity served by the first simulator (the second serves the rest):
    /// endpoints of unequal capacity.
    #[arg(long, default_value_t = 0.5)]
    pub capacity_split: f64,
    /// Each simulator queues up to this many times its capacity before answering 503 (its
    /// latency grows with the queue, as on vLLM/SGLang); 0 = refuse at once.
    #[arg(long, default_value_t = 0.0)]
    pub queue_factor: f64,
    /// The client's concurrency limit: `aimd` or `gradient` (`resilience.limit`).
    #[arg(long, default_value = "aimd", value_parser = parse_limit)]
    pub limit: tmas_actors::client::LimitAlgorithm,
    /// Tell each endpoint its simulator's capacity (`max_in_flight` = that capacity, in the
    /// run under faults): the best fixed limit, to compare an adaptive one with.
    #[arg(long)]
    pub declare_capacity: bool,
    /// `Retry-After` seconds sent with the overload 503.
    #[arg(long, default_value_t = 1)]
    pub retry_after_secs: u64,
    /// `request_timeout_secs` of the endpoints in the overload-timeout and full scenarios.
    #[arg(long, default_value_t = 8)]
    pub request_timeout_secs: u64,
    /// Seconds between kills of each simulator, drawn uniformly in MIN..MAX.
    #[arg(long, default_value = "30..60", value_parser = parse_range)]
    pub kill_every: (f64, f64),
    /// Seconds a killed simulator stays down.
    #[arg(long, default_value_t = 3.0)]
    pub down_secs: f64,
    /// Health-probe interval of the client, in seconds (`resilience.probe_interval_secs`).
    #[arg(long, default_value_t = 1)]
    pub probe_interval_secs: u64,
    /// Stream the completions (server-sent events).
    #[arg(long)]
    pub stream: bool,
    /// Seed of the runs, the simulators and the kill schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep both run directories here instead of deleting a temporary one.
    #[arg(long, value_name = "DIR")]
    pub keep_runs: Option<PathBuf>,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
}

fn parse_limit(text: &str) -> Result<tmas_actors::client::LimitAlgorithm, String> {
    serde_json::from_value(json!(text))
        .map_err(|_| format!("expected aimd or gradient, got `{text}`"))
}

/// Each simulator's capacity: `--capacity` split by `--capacity-split` (at least 1 each).
fn capacities(args: &SoakArgs, capacity: usize) -> [usize; 2] {
    let a =
        ((capacity as f64 * args.capacity_split).round() as usize).clamp(1, capacity.max(2) - 1);
    [a, capacity.saturating_sub(a).max(1)]
}

fn parse_range(text: &str) -> Result<(f64, f64), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("expected MIN..MAX seconds, got `{text}`"))?;
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("`{s}` is not a positive number of seconds"))
    };
    let (a, b) = (num(a)?, num(b)?);
    if a > b {
        return Err(format!("MIN ({a}) exceeds MAX ({b})"));
    }
    Ok((a, b))
}

/// The two simulators' fault flags for the full scenario.
const FULL_FAULTS: [(&str, &str); 4] = [
    ("--fault-500", "0.03"),
    ("--fault-drop", "0.02"),
    ("--fault-hang", "0.005"),
    ("--fault-malformed", "0.01"),
];

/// One run's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunFigures {
    pub wall_s: f64,
    pub problems_done: usize,
    pub problems_failed: usize,
    pub calls_sent: u64,
    pub sims: SimTotals,
}

/// The soak's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakResult {
    pub scenario: Scenario,
    pub problems: usize,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    pub in_flight: usize,
    pub capacity: usize,
    pub limit: tmas_actors::client::LimitAlgorithm,
    /// Each simulator's share of `capacity`.
    pub capacities: [usize; 2],
    pub queue_factor: f64,
    pub declare_capacity: bool,
    pub latency: String,
    pub clean: RunFigures,
    pub faulty: RunFigures,
    pub comparison: Comparison,
    /// Pass@1 tables equal (serialized form).
    pub tables_identical: bool,
    /// Effective concurrency limit per endpoint: (median of 1 s samples, minimum, final).
    pub limits: BTreeMap<String, (f64, f64, f64)>,
    /// Faulty wall ÷ clean wall.
    pub wall_ratio: f64,
    /// What the server's capacity allows: max(clean wall, busy seconds ÷ capacity).
    pub capacity_bound_s: f64,
    pub wall_over_capacity_bound: f64,
    pub cap_exceeded: bool,
}

impl SoakResult {
    /// Nothing lost, every answer and the table identical, the cap respected.
    pub fn passed(&self) -> bool {
        self.comparison.identical()
            && self.tables_identical
            && !self.cap_exceeded
            && self.faulty.problems_failed == 0
            && self.clean.problems_failed == 0
            && self.faulty.problems_done == self.problems
            && self.clean.problems_done == self.problems
    }
}

/// Calls one problem makes: per iteration N solutions, N·M verifications, N summaries,
/// and the two bank updates.
fn calls_per_problem(a: &SoakArgs) -> u64 {
    u64::from(a.iterations) * (u64::from(a.n) * (u64::from(a.m) + 2) + 2)
}

/// Problems for a clean run of about `--minutes`: the cap's throughput at the latency's
/// mean, at the ~60 % slot utilization dependency chains leave at this size.
fn problems_for(a: &SoakArgs) -> anyhow::Result<usize> {
    if let Some(p) = a.problems {
        anyhow::ensure!(p > 0, "--problems must be at least 1");
        return Ok(p);
    }
    let model: crate::sim::LatencyModel = a
        .latency
        .parse()
        .map_err(|e| anyhow::anyhow!("--latency: {e}"))?;
    let mean = model.mean().as_secs_f64().max(0.001);
    let calls = a.minutes * 60.0 * a.in_flight as f64 / mean * 0.6;
    Ok(((calls / calls_per_problem(a) as f64).ceil() as usize).max(1))
}

pub async fn run(args: SoakArgs) -> anyhow::Result<SoakResult> {
    anyhow::ensure!(args.in_flight >= 2, "--in-flight must be at least 2");
    anyhow::ensure!(args.minutes > 0.0, "--minutes must be positive");
    anyhow::ensure!(
        args.capacity_split > 0.0 && args.capacity_split < 1.0,
        "--capacity-split must be within (0, 1)"
    );
    anyhow::ensure!(
        args.queue_factor.is_finite() && args.queue_factor >= 0.0,
        "--queue-factor must be 0 or more"
    );
    let capacity = args.capacity.unwrap_or(args.in_flight * 3 / 4).max(2);
    let problems = problems_for(&args)?;
    let metrics = tmas_observability::prometheus::recorder().ok();
    let (work, temporary) = match &args.keep_runs {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tmas-bench-soak-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let outcome = run_in(&args, problems, capacity, &work, metrics).await;
    if temporary && let Err(e) = std::fs::remove_dir_all(&work) {
        eprintln!("warning: cannot remove {}: {e}", work.display());
    }
    let result = outcome?;
    print_result(&result);
    if !args.no_write {
        let path = super::write_result("soak", &json!(result))?;
        println!("written to {}", path.display());
    }
    Ok(result)
}

async fn run_in(
    args: &SoakArgs,
    problems: usize,
    capacity: usize,
    work: &Path,
    metrics: Option<metrics_handle::Handle>,
) -> anyhow::Result<SoakResult> {
    let dataset_path = work.join("dataset.jsonl");
    super::eval::write_dataset(&dataset_path, problems)?;
    println!(
        "tmas bench soak: {problems} problems × {} calls, scenario {:?}; clean run first",
        calls_per_problem(args),
        args.scenario
    );
    let (clean, clean_db, clean_table) =
        one_run(args, &dataset_path, &work.join("clean"), None, None).await?;
    println!(
        "  clean run: {:.1} s; now the run under faults",
        clean.wall_s
    );
    let (faulty, faulty_db, faulty_table) = one_run(
        args,
        &dataset_path,
        &work.join("faulty"),
        Some(capacity),
        metrics.as_ref(),
    )
    .await?;
    let comparison = compare::compare(
        &compare::read_calls(&clean_db)?,
        &compare::read_calls(&faulty_db)?,
    );
    let capacity_bound = clean.wall_s.max(faulty.sims.busy_seconds / capacity as f64);
    let limits = faulty_limits(&faulty, metrics.as_ref());
    Ok(SoakResult {
        scenario: args.scenario,
        problems,
        n: args.n,
        m: args.m,
        iterations: args.iterations,
        in_flight: args.in_flight,
        capacity,
        latency: args.latency.clone(),
        tables_identical: clean_table == faulty_table,
        wall_ratio: faulty.wall_s / clean.wall_s,
        capacity_bound_s: capacity_bound,
        wall_over_capacity_bound: faulty.wall_s / capacity_bound,
        // Each simulator has half the cap.
        // Queued requests are in flight for the client too (the sum of the two peaks is an
        // upper bound of what a simulator held at once).
        cap_exceeded: clean.sims.peak_in_flight as usize > args.in_flight.div_ceil(2)
            || (faulty.sims.peak_in_flight + faulty.sims.peak_queued) as usize
                > args.in_flight.div_ceil(2),
        limit: args.limit,
        capacities: capacities(args, capacity),
        queue_factor: args.queue_factor,
        declare_capacity: args.declare_capacity,
        limits,
        clean: strip_limits(clean),
        faulty: strip_limits(faulty),
        comparison,
    })
}

/// A run's figures plus the limit samples taken during it (moved out by [`faulty_limits`]).
struct Measured {
    figures: RunFigures,
    samples: BTreeMap<String, Vec<f64>>,
}

impl std::ops::Deref for Measured {
    type Target = RunFigures;
    fn deref(&self) -> &RunFigures {
        &self.figures
    }
}

fn strip_limits(m: Measured) -> RunFigures {
    m.figures
}

fn faulty_limits(
    m: &Measured,
    metrics: Option<&metrics_handle::Handle>,
) -> BTreeMap<String, (f64, f64, f64)> {
    let last = metrics.map(metrics_handle::limits).unwrap_or_default();
    m.samples
        .iter()
        .map(|(ep, s)| {
            let mut sorted = s.clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
            let min = sorted.first().copied().unwrap_or(f64::NAN);
            let fin = last.get(ep).copied().unwrap_or(f64::NAN);
            (ep.clone(), (median, min, fin))
        })
        .collect()
}

/// One engine run against two simulators; `capacity` set = the run under faults.
async fn one_run(
    args: &SoakArgs,
    dataset_path: &Path,
    dir: &Path,
    capacity: Option<usize>,
    metrics: Option<&metrics_handle::Handle>,
) -> anyhow::Result<(Measured, PathBuf, serde_json::Value)> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut sim_args: Vec<String> = vec![
        "--latency".into(),
        args.latency.clone(),
        "--seed".into(),
        args.seed.to_string(),
        "--dataset".into(),
        dataset_path.display().to_string(),
        "--worker-threads".into(),
        "1".into(),
    ];
    let mut per_sim: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    if let Some(cap) = capacity {
        for (extra, c) in per_sim.iter_mut().zip(capacities(args, cap)) {
            extra.extend([
                "--max-concurrency".into(),
                c.to_string(),
                "--max-queue".into(),
                ((c as f64 * args.queue_factor).round() as usize).to_string(),
            ]);
        }
        sim_args.extend([
            "--overload-status".into(),
            "503".into(),
            "--retry-after-secs".into(),
            args.retry_after_secs.to_string(),
        ]);
        if args.scenario == Scenario::Full {
            for (flag, rate) in FULL_FAULTS {
                sim_args.extend([flag.to_string(), rate.to_string()]);
            }
        }
    }
    let [a_extra, b_extra] = per_sim;
    let sims = [
        Restartable::spawn([sim_args.clone(), a_extra].concat(), 1_000_000).await?,
        Restartable::spawn([sim_args, b_extra].concat(), 2_000_000).await?,
    ];
    let timeout = match (capacity, args.scenario) {
        (Some(_), Scenario::OverloadTimeout | Scenario::Full) => args.request_timeout_secs,
        _ => 3600,
    };
    let declared = capacity
        .filter(|_| args.declare_capacity)
        .map(|cap| capacities(args, cap));
    let config = soak_config(args, &sims, timeout, declared, dir)?;
    let dataset = load_dataset(&DatasetSpec::new(dataset_path))?;
    for s in &sims {
        s.reset().await?;
    }
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    if capacity.is_some() && args.scenario == Scenario::Full {
        for (i, s) in sims.iter().enumerate() {
            tasks.push(tokio::spawn(chaos::kill_loop(
                s.clone(),
                args.kill_every,
                Duration::from_secs_f64(args.down_secs),
                args.seed.wrapping_mul(31).wrapping_add(i as u64),
                stop.clone(),
            )));
        }
    }
    let sampler = metrics.cloned().map(|h| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return samples,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                for (ep, v) in metrics_handle::limits(&h) {
                    samples.entry(ep).or_default().push(v);
                }
            }
        })
    });
    let run_dir = dir.join("run");
    let started = Instant::now();
    let outcome = engine::run(RunRequest {
        config,
        config_source: PathBuf::from("(tmas bench soak)"),
        dataset,
        run_dir: run_dir.clone(),
        env: Vec::new(),
        status_every: None,
        // The simulators are up (spawned above); a preflight probe could itself draw an
        // injected fault.
        preflight: false,
        observe: engine::observe::ObserveOptions::quiet(),
    })
    .await;
    let wall = started.elapsed().as_secs_f64();
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    let samples = match sampler {
        Some(t) => t.await.unwrap_or_default(),
        None => BTreeMap::new(),
    };
    let mut totals = SimTotals::default();
    for s in &sims {
        totals.merge(&s.finish().await);
    }
    let result = outcome.context("running the engine")?;
    let table = serde_json::to_value(&result.table).context("serializing the Pass@1 table")?;
    Ok((
        Measured {
            figures: RunFigures {
                wall_s: wall,
                problems_done: result.problems_done,
                problems_failed: result.problems_failed.len(),
                calls_sent: result.calls_sent,
                sims: totals,
            },
            samples,
        },
        run_dir.join(crate::store::DB_FILE),
        table,
    ))
}

/// Two endpoints (`sim-a`, `sim-b`) in the default group, each with half the cap; judge
/// off; roles as large as the cap.
fn soak_config(
    args: &SoakArgs,
    sims: &[Arc<Restartable>; 2],
    request_timeout_secs: u64,
    declared: Option<[usize; 2]>,
    dir: &Path,
) -> anyhow::Result<Config> {
    let cap = args.in_flight;
    let mut config = Config::default();
    config.run.seed = args.seed;
    config.run.max_in_flight = cap;
    config.run.out_dir = dir.to_path_buf();
    config.method.n = args.n;
    config.method.m = args.m;
    config.method.iterations = args.iterations;
    config.judge.enabled = false;
    config.resilience.probe_interval_secs = args.probe_interval_secs;
    config.resilience.limit = args.limit;
    for (i, (name, sim)) in ["sim-a", "sim-b"].iter().zip(sims).enumerate() {
        let mut endpoint = EndpointConfig::new(sim.base_url(), "tmas-sim");
        endpoint.max_in_flight = declared.map_or(cap.div_ceil(2), |d| d[i].min(cap.div_ceil(2)));
        endpoint.request_timeout_secs = request_timeout_secs;
        endpoint.stream_idle_timeout_secs = request_timeout_secs;
        endpoint.stream = args.stream;
        endpoint.context_window = 16_777_216;
        config.endpoints.insert((*name).into(), endpoint);
    }
    for role in super::TMAS_ROLES {
        let r = config.roles.get_mut(role);
        r.max_tokens = 65_536;
        r.pool_size = Some(cap);
    }
    super::validated(config, "tmas bench soak config")
}

/// Reading the client's metrics (the process-wide Prometheus recorder).
mod metrics_handle {
    use std::collections::BTreeMap;

    pub type Handle = metrics_exporter_prometheus::PrometheusHandle;

    /// `tmas_endpoint_concurrency_limit` by endpoint.
    pub fn limits(h: &Handle) -> BTreeMap<String, f64> {
        gauge(&h.render(), "tmas_endpoint_concurrency_limit")
    }

    /// The values of a gauge with an `endpoint` label in Prometheus text format.
    pub fn gauge(text: &str, name: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
                continue;
            };
            let Some((labels, value)) = rest.split_once('}') else {
                continue;
            };
            let Some(ep) = labels
                .split(',')
                .find_map(|l| l.trim().strip_prefix("endpoint=\""))
                .and_then(|v| v.strip_suffix('"'))
            else {
                continue;
            };
            if let Ok(v) = value.trim().parse::<f64>() {
                out.insert(ep.to_string(), v);
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn reads_a_labelled_gauge() {
            let text = "# TYPE tmas_endpoint_concurrency_limit gauge\n\
                tmas_endpoint_concurrency_limit{endpoint=\"sim-a\"} 137\n\
                tmas_endpoint_concurrency_limit_other{endpoint=\"x\"} 1\n\
                tmas_endpoint_concurrency_limit{endpoint=\"sim-b\"} 92.5\n";
            let g = super::gauge(text, "tmas_endpoint_concurrency_limit");
            assert_eq!(g.len(), 2);
            assert_eq!(g["sim-a"], 137.0);
            assert_eq!(g["sim-b"], 92.5);
        }
    }
}

fn print_result(r: &SoakResult) {
    println!(
        "tmas bench soak: scenario {:?}, P={} N={} M={} T={}, in-flight {} (2 endpoints), server capacity {}, latency {}",
        r.scenario, r.problems, r.n, r.m, r.iterations, r.in_flight, r.capacity, r.latency
    );
    println!(
        "  limit {:?}{}, simulator capacities {:?}, queue {} × capacity",
        r.limit,
        if r.declare_capacity {
            " (capacities declared as max_in_flight)"
        } else {
            ""
        },
        r.capacities,
        r.queue_factor
    );
    let line = |name: &str, f: &RunFigures| {
        println!(
            "  {name:<7} wall {:.1} s, problems {} done / {} failed, calls {} ({} at the simulators)",
            f.wall_s, f.problems_done, f.problems_failed, f.calls_sent, f.sims.requests
        );
    };
    line("clean", &r.clean);
    line("faults", &r.faulty);
    let faults: Vec<String> = r
        .faulty
        .sims
        .faults
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!(
        "  injected         {}; SIGKILLs {}{}",
        if faults.is_empty() {
            "none".to_string()
        } else {
            faults.join(", ")
        },
        r.faulty.sims.kills,
        if r.faulty.sims.failed_restarts > 0 {
            format!(" ({} restarts FAILED)", r.faulty.sims.failed_restarts)
        } else {
            String::new()
        }
    );
    println!(
        "  client retries   {}; peak queue at a simulator {}",
        r.comparison.retries, r.faulty.sims.peak_queued
    );
    for (ep, (median, min, fin)) in &r.limits {
        println!(
            "  AIMD limit       {ep}: median {median:.0}, min {min:.0}, final {fin:.0} (max {})",
            r.in_flight.div_ceil(2)
        );
    }
    let c = &r.comparison;
    println!(
        "  calls lost       {}{}",
        c.lost_total,
        if c.lost.is_empty() {
            String::new()
        } else {
            format!(" ({:?})", c.lost)
        }
    );
    println!(
        "  answers          {} calls compared: {} differ, {} only in the clean run, {} only under faults{}",
        c.calls,
        c.different,
        c.only_clean,
        c.only_faulty,
        if c.examples.is_empty() {
            String::new()
        } else {
            format!(" (e.g. {})", c.examples.join("; "))
        }
    );
    println!(
        "  Pass@1 table     {}",
        if r.tables_identical {
            "identical"
        } else {
            "DIFFERS"
        }
    );
    println!(
        "  wall ratio       {:.3} of the clean run (target <= 1.5 with every fault)",
        r.wall_ratio
    );
    println!(
        "  capacity bound   {:.1} s (max of clean wall, busy {:.1} s ÷ capacity {}); wall / bound {:.3} (target <= 1.15 with overload only)",
        r.capacity_bound_s, r.faulty.sims.busy_seconds, r.capacity, r.wall_over_capacity_bound
    );
    super::print_sim_peak(
        r.clean
            .sims
            .peak_in_flight
            .max(r.faulty.sims.peak_in_flight),
        r.in_flight.div_ceil(2),
    );
    println!(
        "  verdict          {}",
        if r.passed() { "PASS" } else { "FAIL" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_reject_nonsense() {
        assert_eq!(parse_range("30..60"), Ok((30.0, 60.0)));
        assert_eq!(parse_range("2.5..2.5"), Ok((2.5, 2.5)));
        assert!(parse_range("60..30").is_err());
        assert!(parse_range("30").is_err());
        assert!(parse_range("0..3").is_err());
    }

    #[test]
    fn the_workload_is_sized_from_the_minutes() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: SoakArgs,
        }
        let w = Wrap::try_parse_from(["x"]).unwrap();
        assert_eq!(calls_per_problem(&w.args), 200);
        // 10 min × 200 slots ÷ 1.65 s mean latency × 0.6 ÷ 200 calls ≈ 219 problems.
        let p = problems_for(&w.args).unwrap();
        assert!((200..240).contains(&p), "{p}");
        let w = Wrap::try_parse_from(["x", "--problems", "3"]).unwrap();
        assert_eq!(problems_for(&w.args).unwrap(), 3);
    }
}
