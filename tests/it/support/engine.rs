//! Helpers shared by the end-to-end tests of `tmas run` (tests/run_*.rs): a simulator the
//! test owns (so it can read the simulator's counters and recorded prompts), a config
//! pointing at it, a synthetic dataset, one engine run, and readers for the run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tmas::config::{CliOverride, Config, load_str};
use tmas::engine::run_dir::{ProblemRecord, RunDir};
use tmas::engine::{RunRequest, RunResult, run};
use tmas::eval::dataset::{Dataset, DatasetFormat, Problem};
use tmas::sim::{RecordedRequest, SimOptions, SimServer};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

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
    crate::support::sim::start_with(opts, Some(answers)).await
}

/// The TOML of a config whose only endpoint is `base_url`, LLM judge off, short backoffs.
fn config_text(base_url: &str) -> String {
    format!(
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
    )
}

/// [`config_text`] loaded, then `overrides` (`key=value`, TOML values) in order.
pub fn config(base_url: &str, overrides: &[&str]) -> Config {
    let text = config_text(base_url);
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

/// What a `tmas run` child process left behind (see [`run_process_on_sim`]).
pub struct FinishedProcess {
    /// The child's log lines.
    pub stderr: String,
    pub records: Vec<ProblemRecord>,
    pub sim: tmas::sim::SimStats,
    /// Keeps the run directory until the test ends.
    pub _dir: tempfile::TempDir,
}

/// A `tmas run` child process against a simulator the test owns (see
/// [`spawn_process_on_sim`]).
pub struct ProcessRun {
    child: tokio::process::Child,
    sim: SimServer,
    /// The child's stderr so far (read continuously, so the child never blocks on it).
    stderr: Arc<Mutex<String>>,
    /// Woken for each stderr line.
    lines: Arc<Notify>,
    reader: tokio::task::JoinHandle<()>,
    run_dir: PathBuf,
    problems: usize,
    dir: tempfile::TempDir,
}

/// Like [`run_on_sim`], but the run is a `tmas run` child process (config and dataset
/// written to a temporary directory) with log filter `log`. For runs that install
/// process-wide state (the OTLP exporter, the metrics recorder): the other tests of this
/// binary run engines in this process at the same time, whose spans and metrics would
/// mix with theirs.
pub async fn spawn_process_on_sim(
    opts: SimOptions,
    dataset: Dataset,
    overrides: &[&str],
    log: &str,
) -> ProcessRun {
    let sim = start_sim(opts, &dataset).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, config_text(&sim.base_url())).expect("config written");
    let data = dir.path().join("dataset.jsonl");
    let rows: Vec<String> = dataset
        .problems
        .iter()
        .map(|p| {
            serde_json::json!({"problem_id": p.id, "question": p.question, "answer": p.answer})
                .to_string()
        })
        .collect();
    std::fs::write(&data, rows.join("\n")).expect("dataset written");
    let run_dir = dir.path().join("run");
    let mut cmd = tokio::process::Command::new(crate::support::cli::BIN);
    cmd.args(["--log", log, "run", "-c"])
        .arg(&config)
        .arg("--dataset")
        .arg(&data)
        .arg("--out")
        .arg(&run_dir)
        .args(["--progress-every", "0", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for o in overrides {
        cmd.args(["--set", o]);
    }
    // The caller's `TMAS_*` and `OTEL_*` variables would override the config.
    for (key, _) in std::env::vars() {
        if key.starts_with("TMAS_") || key.starts_with("OTEL_") {
            cmd.env_remove(key);
        }
    }
    let mut child = cmd.spawn().expect("the tmas binary starts");
    let pipe = child.stderr.take().expect("piped stderr");
    let stderr = Arc::new(Mutex::new(String::new()));
    let lines = Arc::new(Notify::new());
    let (text, woken) = (stderr.clone(), lines.clone());
    let reader = tokio::spawn(async move {
        let mut pipe = tokio::io::BufReader::new(pipe).lines();
        while let Ok(Some(line)) = pipe.next_line().await {
            let mut t = text.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
            drop(t);
            woken.notify_waiters();
        }
        woken.notify_waiters();
    });
    ProcessRun {
        child,
        sim,
        stderr,
        lines,
        reader,
        run_dir,
        problems: dataset.problems.len(),
        dir,
    }
}

impl ProcessRun {
    /// The first stderr line containing `needle`, once the child printed it (the test
    /// fails if the child ends first).
    pub async fn line_with(&self, needle: &str) -> String {
        loop {
            let woken = self.lines.notified();
            if let Some(line) = self
                .stderr
                .lock()
                .unwrap()
                .lines()
                .find(|l| l.contains(needle))
            {
                return line.to_owned();
            }
            assert!(
                !self.reader.is_finished(),
                "tmas run ended without printing {needle:?}:\n{}",
                self.stderr.lock().unwrap()
            );
            let _ = tokio::time::timeout(Duration::from_millis(200), woken).await;
        }
    }

    /// Waits for the child to exit successfully, then collects the run directory and the
    /// simulator's counters.
    pub async fn finish(mut self) -> FinishedProcess {
        let status = self.child.wait().await.expect("waiting for tmas run");
        let _ = (&mut self.reader).await;
        let stats = self.sim.stats();
        self.sim.shutdown().await;
        let stderr = std::mem::take(&mut *self.stderr.lock().unwrap());
        assert!(status.success(), "tmas run failed ({status:?}):\n{stderr}");
        let records = RunDir::open(&self.run_dir)
            .and_then(|d| d.read_problems())
            .expect("problem records are readable");
        assert_eq!(records.len(), self.problems, "one record per problem");
        FinishedProcess {
            stderr,
            records,
            sim: stats,
            _dir: self.dir,
        }
    }
}

/// [`spawn_process_on_sim`] to the end.
pub async fn run_process_on_sim(
    opts: SimOptions,
    dataset: Dataset,
    overrides: &[&str],
    log: &str,
) -> FinishedProcess {
    spawn_process_on_sim(opts, dataset, overrides, log)
        .await
        .finish()
        .await
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
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    // `<bank>-itT.json` after iteration T; `<bank>-vN.json` without one.
                    (n.starts_with(&format!("{bank}-it")) || n.starts_with(&format!("{bank}-v")))
                        && n.ends_with(".json")
                })
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
    for v in &out {
        assert_eq!(
            (v.problem.as_str(), v.bank.as_str()),
            (problem, bank),
            "a version file names its own problem and bank"
        );
    }
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
