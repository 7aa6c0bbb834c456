//! `tmas bench schedule`: the scheduling ceiling of `tmas bench eval`'s workload.
//!
//! Runs the zero-overhead model ([`model`]) for every admission policy × call priority ×
//! gate order, over several latency draws, and prints the mean utilization and wall ÷
//! bound of each. A figure here is what a policy reaches when the orchestrator costs
//! nothing; `tmas bench eval` then shows how much of it the real engine keeps.

pub(crate) mod model;

use anyhow::Context;
use tmas_actors::runner::{Admission, AdmissionBounds, AdmissionKind, CallPriority};

use super::WorkloadArgs;
use crate::sim::latency::LatencyModel;
use model::{CallOrder, Gate, Outcome, Scenario, simulate};

/// Knobs of the scheduling model (the workload of `tmas bench eval`).
#[derive(Debug, Clone, clap::Args)]
pub struct ScheduleBenchArgs {
    #[command(flatten)]
    pub workload: super::WorkloadArgs,
    /// Cap on calls in flight (global, and every role pool's workers).
    #[arg(long = "max-in-flight", value_name = "N", default_value_t = 800)]
    pub in_flight: usize,
    /// Window of the fixed policy (released: 100).
    #[arg(long, default_value_t = 100)]
    pub max_concurrent_problems: usize,
    /// Bound of the work-conserving policy (default: 2 × --max-concurrent-problems).
    #[arg(long)]
    pub max_active_problems: Option<usize>,
    /// Call latency: `fixed:200ms` or `lognormal:200ms:1.0`.
    #[arg(long, default_value = "lognormal:200ms:1.0")]
    pub latency: String,
    /// σ of a per-problem difficulty scaling every latency of a problem (the simulator's
    /// server model draws output lengths this way); 0 = independent draws per call.
    #[arg(long, default_value_t = 0.0)]
    pub difficulty_sigma: f64,
    /// Latency draws to average over (seeds 1..=K).
    #[arg(long = "latency-draws", value_name = "K", default_value_t = 5)]
    pub seeds: u64,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
}

/// One policy's figures, averaged over the draws.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyFigures {
    pub admission: &'static str,
    pub call_priority: &'static str,
    pub gate: Gate,
    pub utilization: f64,
    pub wall_over_bound: f64,
    pub wall_secs: f64,
    /// Per draw.
    pub outcomes: Vec<Outcome>,
}

/// What `tmas bench schedule` prints and writes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScheduleBenchResult {
    pub problems: usize,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    pub in_flight: usize,
    pub max_concurrent_problems: usize,
    pub max_active_problems: usize,
    pub latency: String,
    pub difficulty_sigma: f64,
    pub seeds: u64,
    /// Mean over draws of busy ÷ (cap × max(busy ÷ cap, longest chain)): the most any
    /// schedule could reach.
    pub best_utilization: f64,
    pub policies: Vec<PolicyFigures>,
}

/// Every runtime call priority, then the oracle.
const PRIORITIES: [CallOrder; 4] = [
    CallOrder::Runtime(CallPriority::OldestProblemFirst),
    CallOrder::Runtime(CallPriority::LeastProgressFirst),
    CallOrder::Runtime(CallPriority::LatencyAware),
    // Not a runtime policy: what knowing every latency in advance would buy.
    CallOrder::CriticalPath,
];

/// The name printed and written for a call order.
fn order_name(order: CallOrder) -> &'static str {
    match order {
        CallOrder::Runtime(p) => p.as_str(),
        CallOrder::CriticalPath => "critical-path (oracle)",
    }
}

pub fn run(args: ScheduleBenchArgs) -> anyhow::Result<ScheduleBenchResult> {
    let latency: LatencyModel = args
        .latency
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--latency: {e}"))?;
    args.workload.validate()?;
    anyhow::ensure!(args.in_flight > 0, "--max-in-flight must be at least 1");
    anyhow::ensure!(args.seeds > 0, "--latency-draws must be at least 1");
    anyhow::ensure!(
        (0.0..=3.0).contains(&args.difficulty_sigma),
        "--difficulty-sigma must be within 0..=3"
    );
    anyhow::ensure!(
        args.max_concurrent_problems > 0,
        "--max-concurrent-problems must be at least 1"
    );
    let max_active = args
        .max_active_problems
        .unwrap_or(args.max_concurrent_problems.saturating_mul(2));
    anyhow::ensure!(max_active > 0, "--max-active-problems must be at least 1");
    let bounds = AdmissionBounds {
        max_concurrent_problems: args.max_concurrent_problems,
        max_active_problems: max_active,
        target_in_flight: args.in_flight,
    };
    let mut policies = Vec::new();
    for kind in AdmissionKind::ALL {
        let admission = Admission::of_kind(kind, bounds);
        for priority in PRIORITIES {
            for gate in [Gate::Fifo, Gate::Priority] {
                let policy = Policy {
                    in_flight: args.in_flight,
                    admission,
                    priority,
                    gate,
                    latency,
                    difficulty_sigma: args.difficulty_sigma,
                };
                let outcomes = draws(&args.workload, &policy, args.seeds);
                let mean = |f: fn(&Outcome) -> f64| mean_of(&outcomes, f);
                policies.push(PolicyFigures {
                    admission: kind.as_str(),
                    call_priority: order_name(priority),
                    gate,
                    utilization: mean(|o| o.utilization),
                    wall_over_bound: mean(|o| o.wall_over_bound),
                    wall_secs: mean(|o| o.wall_secs),
                    outcomes,
                });
            }
        }
    }
    let result = ScheduleBenchResult {
        problems: args.workload.problems,
        n: args.workload.n,
        m: args.workload.m,
        iterations: args.workload.iterations,
        in_flight: args.in_flight,
        max_concurrent_problems: args.max_concurrent_problems,
        max_active_problems: max_active,
        latency: latency.to_string(),
        difficulty_sigma: args.difficulty_sigma,
        seeds: args.seeds,
        // Every policy meets the same latencies (each drawn from its call's identity), so
        // any policy's draws serve.
        best_utilization: policies
            .last()
            .map_or(0.0, |p| mean_of(&p.outcomes, |o| o.best_utilization)),
        policies,
    };
    print(&result);
    if !args.no_write {
        let value = serde_json::to_value(&result).context("encoding the result")?;
        let path = super::write_result("schedule", &value)?;
        println!("written to {}", path.display());
    }
    Ok(result)
}

/// How a run is scheduled: everything of a [`Scenario`] but the workload and the seed.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub in_flight: usize,
    pub admission: Admission,
    pub priority: CallOrder,
    pub gate: Gate,
    pub latency: LatencyModel,
    pub difficulty_sigma: f64,
}

/// The model's outcomes for latency draws (seeds) 1..=`seeds`.
pub fn draws(workload: &WorkloadArgs, policy: &Policy, seeds: u64) -> Vec<Outcome> {
    (1..=seeds)
        .map(|seed| {
            simulate(&Scenario {
                problems: workload.problems,
                n: workload.n,
                m: workload.m,
                iterations: workload.iterations,
                cap: policy.in_flight,
                // Every role pool has as many workers as the cap (as in `bench eval`).
                pool_size: policy.in_flight,
                admission: policy.admission,
                priority: policy.priority,
                gate: policy.gate,
                latency: policy.latency,
                difficulty_sigma: policy.difficulty_sigma,
                seed,
            })
        })
        .collect()
}

/// Mean of one figure over draws (0 when there are none).
pub fn mean_of(outcomes: &[Outcome], f: impl Fn(&Outcome) -> f64) -> f64 {
    if outcomes.is_empty() {
        return 0.0;
    }
    outcomes.iter().map(f).sum::<f64>() / outcomes.len() as f64
}

fn print(r: &ScheduleBenchResult) {
    println!(
        "tmas bench schedule (zero-overhead model): P={} N={} M={} T={}, in-flight {}, window {}, max active {}, latency {}, difficulty σ {}, {} draws",
        r.problems,
        r.n,
        r.m,
        r.iterations,
        r.in_flight,
        r.max_concurrent_problems,
        r.max_active_problems,
        r.latency,
        r.difficulty_sigma,
        r.seeds
    );
    println!(
        "  best any schedule can reach: utilization {:.3} (busy ÷ (cap × max(busy ÷ cap, longest chain)))",
        r.best_utilization
    );
    println!(
        "  {:<16} {:<23} {:<9} {:>11} {:>10} {:>9}",
        "admission", "call priority", "gate", "utilization", "wall/bound", "wall"
    );
    for p in &r.policies {
        let gate = match p.gate {
            Gate::Fifo => "fifo",
            Gate::Priority => "priority",
        };
        println!(
            "  {:<16} {:<23} {:<9} {:>11.3} {:>10.3} {:>8.2}s",
            p.admission, p.call_priority, gate, p.utilization, p.wall_over_bound, p.wall_secs
        );
    }
}
