//! Whole runs compared with each other: the same seed gives the same branch choices and
//! results; on the simulator's task model Pass@1 rises over the iterations and is higher
//! with the experience bank than without it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::engine::{
    Finished, config, dataset, run_engine, run_on_sim, sim_options, start_sim,
};
use serde_json::Value;
use tmas::sim::{LatencyModel, SimOptions};

/// Keys whose values depend on timing, not on the method's choices.
fn is_timing_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "latency",
        "seconds",
        "elapsed",
        "duration",
        "_ms",
        "timestamp",
    ]
    .iter()
    .any(|t| k.contains(t))
}

fn strip_timing(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !is_timing_key(k));
            map.values_mut().for_each(strip_timing);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_timing),
        _ => {}
    }
}

/// Problem records (timing stripped) by problem id.
fn records(done: &Finished) -> BTreeMap<String, Value> {
    done.records
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).expect("record serializes");
            strip_timing(&mut v);
            (r.problem_id.clone(), v)
        })
        .collect()
}

/// Every stored bank version, by path relative to `banks/`.
fn banks(root: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let banks = root.join("banks");
    for problem in std::fs::read_dir(&banks).expect("banks/ exists").flatten() {
        for file in std::fs::read_dir(problem.path())
            .expect("bank dir")
            .flatten()
        {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "json") {
                let bytes = std::fs::read(&path).expect("bank file");
                let v: Value = serde_json::from_slice(&bytes).expect("bank JSON");
                let rel = path.strip_prefix(&banks).expect("under banks/");
                out.insert(rel.display().to_string(), v);
            }
        }
    }
    out
}

/// (problem, iteration, candidate) → (branch, mode).
fn branches(done: &Finished) -> Vec<(String, u32, u32, String)> {
    let mut out = Vec::new();
    for r in &done.records {
        for it in &r.outcome.iterations {
            for c in &it.candidates {
                out.push((
                    r.problem_id.clone(),
                    it.iteration,
                    c.index,
                    format!("{:?}/{:?}", c.branch, c.mode),
                ));
            }
        }
    }
    out.sort();
    out
}

fn jittery_sim(seed: u64) -> SimOptions {
    // Small random latencies so calls complete in a different order in each run.
    SimOptions {
        latency: LatencyModel::LogNormal {
            median: Duration::from_millis(1),
            sigma: 0.5,
        },
        ..sim_options(seed)
    }
}

const DETERMINISM_RUN: [&str; 5] = [
    "method.epsilon=0.5",
    "method.n=4",
    "method.m=2",
    "method.iterations=3",
    "run.max_concurrent_problems=3",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_with_the_same_seed_make_the_same_choices_and_results() {
    let a = run_on_sim(jittery_sim(31), dataset(5), &DETERMINISM_RUN).await;
    let b = run_on_sim(jittery_sim(31), dataset(5), &DETERMINISM_RUN).await;
    let branches_a = branches(&a);
    assert_eq!(branches_a, branches(&b), "branch choices");
    let (ra, rb) = (records(&a), records(&b));
    assert_eq!(ra.len(), 5);
    for (id, va) in &ra {
        assert_eq!(Some(va), rb.get(id), "problem record {id}");
    }
    assert_eq!(banks(a.dir.path()), banks(b.dir.path()), "bank versions");
    assert_eq!(a.result.table, b.result.table, "Pass@1 table");
    assert_eq!(a.sim.by_role, b.sim.by_role, "calls by role");

    // The comparison can tell runs apart: another run seed changes the choices.
    let mut other_seed: Vec<&str> = DETERMINISM_RUN.to_vec();
    other_seed.push("run.seed=12");
    let c = run_on_sim(jittery_sim(31), dataset(5), &other_seed).await;
    assert_ne!(
        branches_a,
        branches(&c),
        "a different seed draws other branches"
    );
}

/// One run over three simulators serving with the server model (queue, prefix cache,
/// per-problem output lengths), the `default` group routed by `routing`.
async fn run_on_fleet(routing: tmas_client::Routing) -> (Finished, Vec<u64>) {
    let data = dataset(5);
    let opts = SimOptions {
        server_model: Some(tmas::sim::server_model::ServerModelOptions {
            decode_us_per_token: 200.0,
            prefill_tokens_per_s: 1e6,
            max_running: 4,
            speedup: 20.0,
            ..Default::default()
        }),
        ..jittery_sim(31)
    };
    let mut sims = Vec::new();
    for _ in 0..3 {
        sims.push(start_sim(opts.clone(), &data).await);
    }
    let mut cfg = config(&sims[0].base_url(), &DETERMINISM_RUN);
    let first = cfg.endpoints["sim"].clone();
    let mut names = vec!["sim".to_string()];
    for (i, sim) in sims.iter().enumerate().skip(1) {
        let name = format!("sim{i}");
        let mut e = first.clone();
        e.base_url = sim.base_url();
        cfg.endpoints.insert(name.clone(), e);
        names.push(name);
    }
    cfg.groups.insert("default".into(), names);
    cfg.routing.insert("default".into(), routing);
    cfg.validate().expect("fleet config is valid");
    let dir = tempfile::tempdir().expect("temporary directory");
    let result = run_engine(cfg, data, dir.path()).await;
    let mut per_endpoint = Vec::new();
    let mut by_role = BTreeMap::new();
    for sim in sims {
        let stats = sim.stats();
        per_endpoint.push(stats.requests_total);
        for (role, n) in &stats.by_role {
            *by_role.entry(role.clone()).or_insert(0) += n;
        }
        assert!(stats.server_model.is_some(), "server model stats");
        sim.shutdown().await;
    }
    assert!(
        result.problems_failed.is_empty(),
        "{:?}",
        result.problems_failed
    );
    let records = tmas::engine::run_dir::RunDir::open(dir.path())
        .and_then(|d| d.read_problems())
        .expect("problem records are readable");
    let sim = tmas::sim::SimStats {
        by_role,
        ..Default::default()
    };
    (
        Finished {
            result,
            records,
            sim,
            dir,
        },
        per_endpoint,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_never_changes_results_on_a_fleet_of_server_models() {
    use tmas_client::Routing;
    let (a, spread_a) = run_on_fleet(Routing::LeastLoad).await;
    let (b, spread_b) = run_on_fleet(Routing::PrefixAffinity).await;
    assert_eq!(branches(&a), branches(&b), "branch choices");
    let (ra, rb) = (records(&a), records(&b));
    assert_eq!(ra.len(), 5);
    for (id, va) in &ra {
        assert_eq!(Some(va), rb.get(id), "problem record {id}");
    }
    assert_eq!(banks(a.dir.path()), banks(b.dir.path()), "bank versions");
    assert_eq!(a.result.table, b.result.table, "Pass@1 table");
    assert_eq!(a.sim.by_role, b.sim.by_role, "calls by role");
    // Both runs used the whole fleet.
    for spread in [spread_a, spread_b] {
        assert!(spread.iter().filter(|n| **n > 0).count() >= 2, "{spread:?}");
    }
}

/// The same seed under every call order the runtime offers (and both admissions) gives
/// the same choices and results: a priority decides when a call runs, never what it is.
/// The in-flight cap of 4 keeps calls waiting in the pools, where the order applies, and
/// the long-tailed latencies give the latency-aware order problems of unequal length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_order_never_changes_results() {
    use tmas::config::{AdmissionKind, CallPriority};
    let sim = || SimOptions {
        latency: LatencyModel::LogNormal {
            median: Duration::from_millis(3),
            sigma: 1.0,
        },
        ..sim_options(31)
    };
    let run = |admission: AdmissionKind, priority: CallPriority| {
        let mut overrides: Vec<String> = DETERMINISM_RUN.iter().map(|s| s.to_string()).collect();
        overrides.push("run.max_in_flight=4".into());
        overrides.push(format!("run.admission={admission}"));
        overrides.push(format!("run.call_priority={priority}"));
        async move {
            let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
            let done = run_on_sim(sim(), dataset(5), &overrides).await;
            let config = std::fs::read_to_string(done.dir.path().join("config.toml"))
                .expect("resolved config written");
            assert!(
                config.contains(&format!("call_priority = \"{priority}\"")),
                "the run used {priority}:\n{config}"
            );
            done
        }
    };
    let base = run(AdmissionKind::Fixed, CallPriority::LeastProgressFirst).await;
    let (ra, branches_a) = (records(&base), branches(&base));
    assert_eq!(ra.len(), 5);
    for priority in CallPriority::ALL {
        let other = run(AdmissionKind::WorkConserving, priority).await;
        assert_eq!(branches_a, branches(&other), "{priority}: branch choices");
        let rb = records(&other);
        for (id, va) in &ra {
            assert_eq!(Some(va), rb.get(id), "{priority}: problem record {id}");
        }
        assert_eq!(
            banks(base.dir.path()),
            banks(other.dir.path()),
            "{priority}: bank versions"
        );
        assert_eq!(
            base.result.table, other.result.table,
            "{priority}: Pass@1 table"
        );
        assert_eq!(
            base.sim.by_role, other.sim.by_role,
            "{priority}: calls by role"
        );
    }
}

/// Pass@1 per iteration of one run.
fn curve(done: &Finished) -> Vec<f64> {
    done.result.table.rows.iter().map(|r| r.pass_at_1).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Enough problems and candidates that the margins below hold for any seed: over run
/// and simulator seeds 1..=10 the smallest rise was 0.27, the smallest gap at the last
/// iteration 0.18 and over iterations 1..T 0.16 (each run takes a few seconds).
const QUALITY_PROBLEMS: usize = 48;
const QUALITY_RUN: [&str; 5] = [
    "method.epsilon=0.2",
    "method.n=6",
    "method.m=2",
    "method.iterations=5",
    "run.max_concurrent_problems=24",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_at_1_rises_and_the_experience_bank_helps() {
    let with = run_on_sim(sim_options(41), dataset(QUALITY_PROBLEMS), &QUALITY_RUN).await;
    let mut ablated: Vec<&str> = QUALITY_RUN.to_vec();
    ablated.push("method.use_experience=false");
    let without = run_on_sim(sim_options(41), dataset(QUALITY_PROBLEMS), &ablated).await;
    assert_eq!(
        without.sim.by_role.get("experience").copied().unwrap_or(0),
        0,
        "the ablation makes no experience call"
    );

    let (cw, co) = (curve(&with), curve(&without));
    eprintln!("Pass@1 with experience:    {cw:.3?}");
    eprintln!("Pass@1 without experience: {co:.3?}");
    assert_eq!(cw.len(), 5);
    assert_eq!(co.len(), 5);
    let last = cw.len() - 1;
    assert!(
        cw[last] >= cw[0] + 0.15,
        "Pass@1 rises from iteration 0 to the last: {cw:.3?}"
    );
    assert!(
        cw[last] >= co[last] + 0.10,
        "the experience bank helps at the last iteration: {cw:.3?} vs {co:.3?}"
    );
    assert!(
        mean(&cw[1..]) >= mean(&co[1..]) + 0.10,
        "and over iterations 1..T: {cw:.3?} vs {co:.3?}"
    );
}
