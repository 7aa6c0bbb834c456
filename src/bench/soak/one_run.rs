//! One engine run of the soak against two simulator processes: clean (no capacity, no
//! faults, AIMD at half the cap per endpoint, which never moves without overload) or under
//! one scenario's faults with one way of setting the limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::chaos::{self, Restartable, SimTotals};
use super::gauge;
use super::report::{LimitFigures, RunFigures};
use super::{Scenario, SoakArgs, SoakLimit, capacities};
use crate::config::{Config, EndpointConfig};
use crate::engine::{self, RunRequest};
use crate::eval::dataset::{DatasetSpec, load_dataset};

/// The two simulators' fault flags for the full scenario.
const FULL_FAULTS: [(&str, &str); 4] = [
    ("--fault-500", "0.03"),
    ("--fault-drop", "0.02"),
    ("--fault-hang", "0.005"),
    ("--fault-malformed", "0.01"),
];

/// What a run under faults adds to the clean run.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub scenario: Scenario,
    pub limit: SoakLimit,
    /// Requests both simulators serve at once, together.
    pub capacity: usize,
}

/// One run: the soak's knobs, the seed of this repetition, and the faults if any.
pub struct RunSpec<'a> {
    pub args: &'a SoakArgs,
    pub seed: u64,
    pub dataset: &'a Path,
    pub dir: &'a Path,
    pub faults: Option<Faults>,
}

/// What one run left: its figures, its run store and its Pass@1 table.
pub struct Measured {
    pub figures: RunFigures,
    pub db: PathBuf,
    pub table: serde_json::Value,
    /// Effective limit per endpoint, from 1 s samples of the client's gauge.
    pub limits: BTreeMap<String, LimitFigures>,
}

/// Runs the engine against two fresh simulators (killed and restarted by the schedule
/// in the full scenario); `metrics`, when the process has a recorder, samples the limits.
pub async fn one_run(
    spec: RunSpec<'_>,
    metrics: Option<&gauge::Handle>,
) -> anyhow::Result<Measured> {
    let (args, dir) = (spec.args, spec.dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut sim_args: Vec<String> = vec![
        "--latency".into(),
        args.latency.clone(),
        "--sim-seed".into(),
        spec.seed.to_string(),
        "--dataset".into(),
        spec.dataset.display().to_string(),
        "--worker-threads".into(),
        "1".into(),
    ];
    let mut per_sim: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    if let Some(f) = spec.faults {
        for (extra, c) in per_sim.iter_mut().zip(capacities(args, f.capacity)) {
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
        if f.scenario == Scenario::Full {
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
    let config = soak_config(args, spec.seed, &sims, spec.faults, dir)?;
    let dataset = load_dataset(&DatasetSpec::new(spec.dataset))?;
    for s in &sims {
        s.reset().await?;
    }
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    if spec.faults.is_some_and(|f| f.scenario == Scenario::Full) {
        for (i, s) in sims.iter().enumerate() {
            tasks.push(tokio::spawn(chaos::kill_loop(
                s.clone(),
                args.kill_every,
                Duration::from_secs_f64(args.down_secs),
                spec.seed.wrapping_mul(31).wrapping_add(i as u64),
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
                for (ep, v) in gauge::limits(&h) {
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
    let last = metrics.map(gauge::limits).unwrap_or_default();
    let mut totals = SimTotals::default();
    for s in &sims {
        totals.merge(&s.finish().await);
    }
    let result = outcome.context("running the engine")?;
    let table = serde_json::to_value(&result.table).context("serializing the Pass@1 table")?;
    Ok(Measured {
        figures: RunFigures {
            wall_s: wall,
            problems_done: result.problems_done,
            problems_failed: result.problems_failed.len(),
            calls_sent: result.calls_sent,
            sims: totals,
        },
        db: run_dir.join(crate::store::DB_FILE),
        table,
        limits: limit_figures(&samples, &last),
    })
}

/// Median and minimum of each endpoint's samples, and its last value.
fn limit_figures(
    samples: &BTreeMap<String, Vec<f64>>,
    last: &BTreeMap<String, f64>,
) -> BTreeMap<String, LimitFigures> {
    samples
        .iter()
        .map(|(ep, s)| {
            let mut sorted = s.clone();
            sorted.sort_by(f64::total_cmp);
            let figures = LimitFigures {
                median: sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
                min: sorted.first().copied().unwrap_or(f64::NAN),
                last: last.get(ep).copied().unwrap_or(f64::NAN),
            };
            (ep.clone(), figures)
        })
        .collect()
}

/// Two endpoints (`sim-a`, `sim-b`) in the default group, each with half the cap (or, for
/// [`SoakLimit::Declared`], its simulator's capacity); judge off; roles as large as the cap.
fn soak_config(
    args: &SoakArgs,
    seed: u64,
    sims: &[Arc<Restartable>; 2],
    faults: Option<Faults>,
    dir: &Path,
) -> anyhow::Result<Config> {
    let cap = args.in_flight;
    let timeout = match faults.map(|f| f.scenario) {
        Some(Scenario::OverloadTimeout | Scenario::Full) => args.request_timeout_secs,
        _ => 3600,
    };
    let declared = faults
        .filter(|f| f.limit == SoakLimit::Declared)
        .map(|f| capacities(args, f.capacity));
    let mut config = Config::default();
    config.run.seed = seed;
    config.run.max_in_flight = cap;
    config.run.out_dir = dir.to_path_buf();
    config.method.n = args.n;
    config.method.m = args.m;
    config.method.iterations = args.iterations;
    config.judge.enabled = false;
    config.resilience.probe_interval_secs = args.probe_interval_secs;
    config.resilience.limit = faults.map_or_else(Default::default, |f| f.limit.algorithm());
    for (i, (name, sim)) in ["sim-a", "sim-b"].iter().zip(sims).enumerate() {
        let mut endpoint = EndpointConfig::new(sim.base_url(), "tmas-sim");
        endpoint.max_in_flight = declared.map_or(cap.div_ceil(2), |d| d[i].min(cap.div_ceil(2)));
        endpoint.request_timeout_secs = timeout;
        endpoint.stream_idle_timeout_secs = timeout;
        endpoint.stream = args.stream;
        endpoint.context_window = 16_777_216;
        config.endpoints.insert((*name).into(), endpoint);
    }
    for &role in config.method.roles() {
        let r = &mut config.roles[role];
        r.max_tokens = 65_536;
        r.pool_size = Some(cap);
    }
    super::super::validated(config, "tmas bench soak config")
}
