//! Helpers shared by the end-to-end tests of `tmas run` (tests/run_*.rs): a simulator the
//! test owns (so it can read the simulator's counters and recorded prompts), a config
//! pointing at it, a synthetic dataset, one engine run, and readers for the run directory.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tmas::config::{CliOverride, Config, load_str};
use tmas::engine::run_dir::{ProblemRecord, RunDir};
use tmas::engine::{RunRequest, RunResult, run};
use tmas::eval::dataset::{Dataset, DatasetFormat, Problem};
use tmas::sim::{RecordedRequest, SimOptions, SimServer};

/// Markers of the built-in solution templates (config/prompts/), used to tell which
/// prompt a recorded request got. `prompt_markers_are_in_the_templates` checks them.
pub const EXPLORE_MARKER: &str = "## Strategies to avoid";
pub const REFINE_MARKER: &str = "## Earlier attempts";
pub const EXPERIENCE_MARKER: &str = "## Experience from earlier attempts";

/// Requests the simulator keeps for inspection: more than any test here makes.
pub const RECORD_ALL: usize = 100_000;

/// A simulator with no latency, no faults, every request recorded, and `seed`.
pub fn sim_options(seed: u64) -> SimOptions {
    SimOptions {
        seed,
        record_requests: RECORD_ALL,
        ..SimOptions::default()
    }
}

/// `n` problems with integer answers (the simulator's task model and the rule judge both
/// handle them exactly).
pub fn dataset(n: usize) -> Dataset {
    let problems = (0..n)
        .map(|i| Problem {
            id: format!("p{i:02}"),
            question: format!(
                "Problem {i}: find the number of admissible configurations of size {}.",
                i + 3
            ),
            answer: (1000 + 37 * i).to_string(),
            reference_solution: None,
            grading_guidelines: None,
        })
        .collect();
    Dataset {
        path: PathBuf::from("synthetic.jsonl"),
        format: DatasetFormat::Jsonl,
        problems,
        skipped: Vec::new(),
    }
}

/// Starts `opts` on a free loopback port with the dataset's answers.
pub async fn start_sim(opts: SimOptions, dataset: &Dataset) -> SimServer {
    let answers = dataset
        .problems
        .iter()
        .map(|p| (p.id.clone(), p.answer.clone()))
        .collect();
    let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
    SimServer::start(opts, addr, Some(answers))
        .await
        .expect("the simulator starts on loopback")
}

/// A config whose only endpoint is `base_url`, LLM judge off, short backoffs; then
/// `overrides` (`key=value`, TOML values) in order.
pub fn config(base_url: &str, overrides: &[&str]) -> Config {
    let text = format!(
        r#"
[run]
seed = 11
max_concurrent_problems = 8
max_in_flight = 64

[method]
n = 3
m = 2
iterations = 3
epsilon = 0.3

[judge]
enabled = false
repeats = 1

[endpoints.sim]
base_url = "{base_url}"
model = "tmas-sim"
max_in_flight = 64
request_timeout_secs = 60
stream_idle_timeout_secs = 30

[resilience]
backoff_min_ms = 5
backoff_max_ms = 50
probe_interval_secs = 1
outage_budget_secs = 30
"#
    );
    let overrides: Vec<CliOverride> = overrides.iter().map(|s| CliOverride::set(*s)).collect();
    match load_str(&text, "run-test.toml", &[], &overrides) {
        Ok(c) => c,
        Err(e) => panic!("test config is invalid: {e}"),
    }
}

/// Runs the engine to the end into `dir`.
pub async fn run_engine(config: Config, dataset: Dataset, dir: &Path) -> RunResult {
    run(RunRequest {
        config,
        config_source: PathBuf::from("run-test.toml"),
        dataset,
        run_dir: dir.to_path_buf(),
        env: Vec::new(),
        status_every: None,
        preflight: false,
        observe: Default::default(),
    })
    .await
    .expect("the run completes")
}

/// Everything one test run leaves behind.
pub struct Finished {
    pub result: RunResult,
    pub records: Vec<ProblemRecord>,
    pub sim: tmas::sim::SimStats,
    pub dir: tempfile::TempDir,
}

/// Starts a simulator with `opts`, runs `config` (built against it with `overrides`)
/// over `dataset`, and collects the run directory and the simulator's counters.
pub async fn run_on_sim(opts: SimOptions, dataset: Dataset, overrides: &[&str]) -> Finished {
    let sim = start_sim(opts, &dataset).await;
    let config = config(&sim.base_url(), overrides);
    let dir = tempfile::tempdir().expect("temporary directory");
    let problems = dataset.problems.len();
    let result = run_engine(config, dataset, dir.path()).await;
    let stats = sim.stats();
    sim.shutdown().await;
    assert!(
        result.problems_failed.is_empty(),
        "problems failed: {:?}",
        result.problems_failed
    );
    assert_eq!(result.problems_done, problems, "every problem finishes");
    let records = RunDir::open(dir.path())
        .and_then(|d| d.read_problems())
        .expect("problem records are readable");
    assert_eq!(records.len(), problems, "one record per problem");
    Finished {
        result,
        records,
        sim: stats,
        dir,
    }
}

/// The `x-tmas-*` header `name` of a recorded request.
pub fn header<'a>(r: &'a RecordedRequest, name: &str) -> &'a str {
    r.headers.get(name).map(String::as_str).unwrap_or("")
}

/// All message texts of a recorded request, joined.
pub fn text(r: &RecordedRequest) -> String {
    r.messages
        .iter()
        .map(|(_, c)| c.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Recorded requests of `role`, keyed by (problem, iteration).
pub fn requests_by_problem_iteration<'a>(
    stats: &'a tmas::sim::SimStats,
    role: &str,
) -> BTreeMap<(String, u32), Vec<&'a RecordedRequest>> {
    let mut out: BTreeMap<(String, u32), Vec<&RecordedRequest>> = BTreeMap::new();
    for r in &stats.recent_requests {
        if header(r, "x-tmas-role") != role {
            continue;
        }
        let iteration = header(r, "x-tmas-iteration")
            .parse()
            .expect("x-tmas-iteration is a number");
        out.entry((header(r, "x-tmas-problem").to_string(), iteration))
            .or_default()
            .push(r);
    }
    out
}

/// One stored bank version (`banks/<problem>/<bank>-vN.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct StoredBank {
    pub problem: String,
    pub bank: String,
    pub version: u32,
    pub iteration: Option<u32>,
    pub items: Vec<String>,
    /// Proposed or existing items the merge policy did not take as proposed.
    #[serde(default)]
    pub rejected: Vec<StoredRejection>,
}

/// One entry of a stored version's `rejected` list.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredRejection {
    pub item: String,
    pub reason: String,
}

/// Every stored version of `bank` for `problem`, in version order.
pub fn bank_versions(run_dir: &Path, problem: &str, bank: &str) -> Vec<StoredBank> {
    let dir = run_dir.join("banks").join(problem);
    let mut out: Vec<StoredBank> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{bank}-v")) && n.ends_with(".json"))
            })
            .map(|p| {
                let bytes = std::fs::read(&p).expect("bank file is readable");
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{} is not a bank version: {e}", p.display()))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort_by_key(|v| v.version);
    for pair in out.windows(2) {
        assert_eq!(
            pair[1].version,
            pair[0].version + 1,
            "{problem}/{bank}: versions are consecutive"
        );
    }
    out
}

/// The bank's items as the solution prompts of `iteration` saw them: the last version
/// produced by an earlier iteration (or the initial content).
pub fn bank_before(versions: &[StoredBank], iteration: u32) -> Vec<String> {
    versions
        .iter()
        .rfind(|v| v.iteration.is_none_or(|i| i < iteration))
        .map(|v| v.items.clone())
        .unwrap_or_default()
}

/// An experience item as the prompt shows it (its `Anchor: ` / `Heuristic: ` prefix is
/// replaced by the section it is listed in).
pub fn experience_body(item: &str) -> &str {
    item.strip_prefix("Anchor: ")
        .or_else(|| item.strip_prefix("Heuristic: "))
        .unwrap_or(item)
        .trim()
}

/// The record of `problem`.
pub fn record<'a>(records: &'a [ProblemRecord], problem: &str) -> &'a ProblemRecord {
    records
        .iter()
        .find(|r| r.problem_id == problem)
        .unwrap_or_else(|| panic!("no record for {problem}"))
}
