//! `tmas bench soak`: the same run on simulators in separate processes, clean and under
//! scripted fault schedules, and a check that each run under faults lost nothing and gave
//! exactly the clean run's results.
//!
//! Every run uses two endpoints in one group (two `tmas sim-server` children, each with
//! half the cap). A run under faults adds, by scenario (`--scenario`, several allowed):
//! - `overload`: the simulators together serve `--capacity` requests at once (below the
//!   cap), queue up to `--queue-factor` × that, and answer the rest 503 + `Retry-After`,
//!   as vLLM/SGLang with a bounded queue;
//! - `overload-timeout`: plus `request_timeout_secs = --request-timeout-secs`, which the
//!   longest generations exceed;
//! - `full`: plus each simulator SIGKILLed and restarted on its port every `--kill-every`
//!   seconds (down `--down-secs`), 3 % HTTP 500, 2 % dropped connections, 0.5 % hung
//!   requests, 1 % malformed bodies.
//!
//! and sets the endpoints' concurrency limits one of the ways of `--limit-policy` (several
//! allowed): AIMD or the gradient, each endpoint told half the cap, or the simulators'
//! capacities declared (the best fixed limit). Each of `--runs` repetitions runs the clean
//! run once, then every scenario × limit, each compared call by call with that
//! repetition's clean run. The clean run is the reference for both answers and wall time:
//! no capacity, no faults, AIMD at half the cap per endpoint (it never moves without
//! overload), whatever `--limit-policy` says.
//!
//! It prints, per scenario × limit, the median and range over the repetitions of the wall
//! time and its ratios (to the clean run, and to the time the servers' capacity allows the
//! clean run's work), the calls lost, whether every answer and table matched in every
//! run, the faults injected by kind, the client's retries, the share of calls answered 503
//! and the limits the client settled on; it fails (exit 1) if any repetition lost a call,
//! differed, or exceeded the cap.

use std::path::Path;

use anyhow::Context;
use serde_json::json;

use one_run::{Faults, RunSpec, one_run};
use report::{Repetition, Shape, SoakReport, VariantRun};

pub(crate) mod chaos;
pub(crate) mod compare;
mod gauge;
mod one_run;
pub(crate) mod report;

/// What a run under faults adds to the clean run.
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

/// How the endpoints' concurrency limits are set in a run under faults.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SoakLimit {
    /// `resilience.limit = "aimd"`, each endpoint told half the cap as `max_in_flight`.
    Aimd,
    /// `resilience.limit = "gradient"`, each endpoint told half the cap.
    Gradient,
    /// Each endpoint told its simulator's capacity as `max_in_flight` (AIMD, which then
    /// never moves): the best fixed limit, to compare an adaptive one with.
    Declared,
}

impl SoakLimit {
    pub fn algorithm(self) -> tmas_client::LimitAlgorithm {
        match self {
            SoakLimit::Gradient => tmas_client::LimitAlgorithm::Gradient,
            SoakLimit::Aimd | SoakLimit::Declared => tmas_client::LimitAlgorithm::Aimd,
        }
    }
}

/// The name a value enum has on the command line.
fn cli_name(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cli_name(self))
    }
}

impl std::fmt::Display for SoakLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cli_name(self))
    }
}

/// One run under faults: a scenario and a way of setting the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Variant {
    pub scenario: Scenario,
    pub limit: SoakLimit,
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, limit {}", self.scenario, self.limit)
    }
}

/// Knobs of the soak.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Intended length of the clean run in minutes; sizes the workload (unless --problems).
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Fault schedules to run against each clean run (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Full])]
    pub scenario: Vec<Scenario>,
    /// How the endpoints' limits are set under faults (comma-separated or repeated):
    /// `aimd` or `gradient` (`resilience.limit`, each endpoint told half the cap), or
    /// `declared` (each endpoint told its simulator's capacity: the best fixed limit).
    #[arg(long = "limit-policy", value_enum, value_delimiter = ',', default_values_t = [SoakLimit::Aimd])]
    pub limit: Vec<SoakLimit>,
    /// Repetitions: each runs the clean run once and then every scenario × limit; the
    /// summary gives the median and range of each figure over them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub runs: u16,
    /// With --runs N, repetition k uses seed --seed + k − 1 (other latency draws, other
    /// faults); without it every repetition repeats the same draw.
    #[arg(long)]
    pub seed_per_run: bool,
    /// Problems in the synthetic dataset (default: from --minutes).
    #[arg(long)]
    pub problems: Option<usize>,
    /// N: candidates per iteration.
    #[arg(long = "candidates", value_name = "N", default_value_t = 8)]
    pub n: u32,
    /// M: verifications per candidate.
    #[arg(long = "verifications", value_name = "M", default_value_t = 4)]
    pub m: u32,
    /// T: iterations per problem.
    #[arg(long, default_value_t = 4)]
    pub iterations: u32,
    /// Cap on calls in flight (global; each endpoint gets half).
    #[arg(long = "max-in-flight", value_name = "N", default_value_t = 200)]
    pub in_flight: usize,
    /// Simulator latency.
    #[arg(long, default_value = "lognormal:1000ms:1.0")]
    pub latency: String,
    /// Requests both simulators serve at once, together (default: 3/4 of --max-in-flight).
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
    /// Health-probe interval of the client, in seconds, fractions allowed
    /// (`resilience.probe_interval_secs`).
    #[arg(long, default_value_t = 1.0, value_parser = parse_probe_interval)]
    pub probe_interval_secs: f64,
    /// Stream the completions (server-sent events).
    #[arg(long)]
    pub stream: bool,
    /// Seed of the runs, the simulators and the kill schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep every run directory here (`rep-K/clean`, `rep-K/SCENARIO-LIMIT`) instead of
    /// deleting a temporary one.
    #[arg(long = "out", value_name = "DIR")]
    pub keep_runs: Option<std::path::PathBuf>,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
}

impl SoakArgs {
    /// Every scenario × limit asked for, each once, in the order given.
    pub fn variants(&self) -> Vec<Variant> {
        let mut out: Vec<Variant> = Vec::new();
        for &scenario in &self.scenario {
            for &limit in &self.limit {
                let v = Variant { scenario, limit };
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    }
}

/// Each simulator's capacity: `--capacity` split by `--capacity-split` (at least 1 each).
fn capacities(args: &SoakArgs, capacity: usize) -> [usize; 2] {
    let a =
        ((capacity as f64 * args.capacity_split).round() as usize).clamp(1, capacity.max(2) - 1);
    [a, capacity.saturating_sub(a).max(1)]
}

fn parse_probe_interval(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of seconds, got `{text}`"))?;
    match crate::config::schema::probe_interval_problem(secs) {
        Some(problem) => Err(problem),
        None => Ok(secs),
    }
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

pub async fn run(args: SoakArgs) -> anyhow::Result<SoakReport> {
    anyhow::ensure!(args.in_flight >= 2, "--max-in-flight must be at least 2");
    anyhow::ensure!(args.minutes > 0.0, "--minutes must be positive");
    anyhow::ensure!(
        args.capacity_split > 0.0 && args.capacity_split < 1.0,
        "--capacity-split must be within (0, 1)"
    );
    anyhow::ensure!(
        args.queue_factor.is_finite() && args.queue_factor >= 0.0,
        "--queue-factor must be 0 or more"
    );
    let variants = args.variants();
    anyhow::ensure!(
        !variants.is_empty(),
        "--scenario and --limit-policy need at least one value each"
    );
    let capacity = args.capacity.unwrap_or(args.in_flight * 3 / 4).max(2);
    let shape = Shape {
        problems: problems_for(&args)?,
        calls_per_problem: calls_per_problem(&args),
        n: args.n,
        m: args.m,
        iterations: args.iterations,
        in_flight: args.in_flight,
        capacity,
        capacities: capacities(&args, capacity),
        queue_factor: args.queue_factor,
        latency: args.latency.clone(),
    };
    let metrics = tmas_observability::prometheus::recorder().ok();
    let (work, temporary) = match &args.keep_runs {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tmas-bench-soak-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let outcome = repetitions(&args, &variants, &shape, &work, metrics.as_ref()).await;
    if temporary && let Err(e) = std::fs::remove_dir_all(&work) {
        eprintln!("warning: cannot remove {}: {e}", work.display());
    }
    let report = SoakReport::new(shape, outcome?);
    report::print(&report);
    if !args.no_write {
        let path = super::write_result("soak", &json!(report))?;
        println!("written to {}", path.display());
    }
    Ok(report)
}

fn run_spec<'a>(
    args: &'a SoakArgs,
    seed: u64,
    dataset: &'a Path,
    dir: &'a Path,
    faults: Option<Faults>,
) -> RunSpec<'a> {
    RunSpec {
        args,
        seed,
        dataset,
        dir,
        faults,
    }
}

/// Each repetition: the clean run, then every variant against it.
async fn repetitions(
    args: &SoakArgs,
    variants: &[Variant],
    shape: &Shape,
    work: &Path,
    metrics: Option<&gauge::Handle>,
) -> anyhow::Result<Vec<Repetition>> {
    let dataset = work.join("dataset.jsonl");
    super::eval::write_dataset(&dataset, shape.problems)?;
    let mut out = Vec::new();
    for k in 1..=u64::from(args.runs) {
        let seed = if args.seed_per_run {
            args.seed.wrapping_add(k - 1)
        } else {
            args.seed
        };
        let rep = work.join(format!("rep-{k}"));
        println!(
            "tmas bench soak: repetition {k} of {} (seed {seed}): {} problems × {} calls; clean run first",
            args.runs, shape.problems, shape.calls_per_problem
        );
        let clean_dir = rep.join("clean");
        let clean = one_run(run_spec(args, seed, &dataset, &clean_dir, None), metrics).await?;
        println!("  clean run: {:.1} s", clean.figures.wall_s);
        let clean_calls = compare::read_calls(&clean.db)?;
        let kills = compare::KillWindows {
            shortest_s: args.kill_every.0,
            longest_s: args.kill_every.1,
        };
        if let Some(longest) = compare::longest_generation_s(&clean_calls)
            && longest > kills.longest_s
            && variants.iter().any(|v| v.scenario == Scenario::Full)
        {
            println!(
                "  note: the clean run's longest generation took {longest:.1} s, longer than an endpoint stays up under --kill-every {}..{}: under the full schedule such calls cannot be answered (kill less often than the longest generation to test recovery alone)",
                kills.shortest_s, kills.longest_s
            );
        }
        let mut runs = Vec::new();
        for &variant in variants {
            let dir = rep.join(format!("{}-{}", variant.scenario, variant.limit));
            let faults = Faults {
                scenario: variant.scenario,
                limit: variant.limit,
                capacity: shape.capacity,
            };
            let faulty =
                one_run(run_spec(args, seed, &dataset, &dir, Some(faults)), metrics).await?;
            let comparison = compare::compare(
                &clean_calls,
                &compare::read_calls(&faulty.db)?,
                (variant.scenario == Scenario::Full).then_some(kills),
            );
            let run = VariantRun::new(
                variant,
                &clean.figures,
                faulty.figures,
                comparison,
                clean.table == faulty.table,
                faulty.limits,
                shape,
            );
            report::print_progress(&run, shape.problems);
            runs.push(run);
        }
        out.push(Repetition {
            seed,
            clean: clean.figures,
            variants: runs,
        });
    }
    Ok(out)
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
    fn probe_intervals_take_fractions_within_the_configs_bounds() {
        assert_eq!(parse_probe_interval("0.25"), Ok(0.25));
        assert_eq!(parse_probe_interval("2"), Ok(2.0));
        for bad in ["0", "0.01", "-1", "7200", "NaN", "soon"] {
            assert!(parse_probe_interval(bad).is_err(), "{bad}");
        }
    }

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: SoakArgs,
    }

    #[test]
    fn scenarios_and_limits_combine_into_variants_each_once_in_order() {
        use clap::Parser;
        let w = Wrap::try_parse_from(["x"]).unwrap();
        assert_eq!(
            w.args.variants(),
            [Variant {
                scenario: Scenario::Full,
                limit: SoakLimit::Aimd
            }]
        );
        let w = Wrap::try_parse_from([
            "x",
            "--scenario",
            "overload,full",
            "--scenario",
            "overload",
            "--limit-policy",
            "gradient,declared",
        ])
        .unwrap();
        let got: Vec<String> = w.args.variants().iter().map(|v| v.to_string()).collect();
        assert_eq!(
            got,
            [
                "overload, limit gradient",
                "overload, limit declared",
                "full, limit gradient",
                "full, limit declared"
            ]
        );
        assert!(Wrap::try_parse_from(["x", "--scenario", "overload,nope"]).is_err());
        assert!(Wrap::try_parse_from(["x", "--runs", "0"]).is_err());
        assert_eq!(
            SoakLimit::Declared.algorithm(),
            tmas_client::LimitAlgorithm::Aimd
        );
    }

    #[test]
    fn the_workload_is_sized_from_the_minutes() {
        use clap::Parser;
        let w = Wrap::try_parse_from(["x"]).unwrap();
        assert_eq!(calls_per_problem(&w.args), 200);
        // 10 min × 200 slots ÷ 1.65 s mean latency × 0.6 ÷ 200 calls ≈ 219 problems.
        let p = problems_for(&w.args).unwrap();
        assert!((200..240).contains(&p), "{p}");
        let w = Wrap::try_parse_from(["x", "--problems", "3"]).unwrap();
        assert_eq!(problems_for(&w.args).unwrap(), 3);
    }
}
