//! `tmas bench eval --runs N`: the same benchmark N times, each in its own `tmas`
//! process, then the median and range of the figures that matter.
//!
//! On a shared 2-core machine identical runs differ by ±5 % in CPU per call
//! (docs/benchmarks.md), so a single run cannot tell a 3 % change from noise. Separate
//! processes keep every run's CPU time and peak RSS its own: in one process the
//! allocator's retained memory and the high-water mark would carry over from run to run.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{EvalBenchArgs, EvalBenchResult};

/// Median and range of one figure over the runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values (a figure the platform cannot measure).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        let (&min, &max) = (v.first()?, v.last()?);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Some(Spread { median, min, max })
    }
}

/// The figures of N runs side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    pub runs: usize,
    pub wall_s: Option<Spread>,
    pub calls_per_s: Option<Spread>,
    pub slot_utilization: Option<Spread>,
    pub wall_over_bound: Option<Spread>,
    pub cpu_s_per_1k_calls: Option<Spread>,
    pub store_writer_cpu_s: Option<Spread>,
    pub peak_rss_mib: Option<Spread>,
    /// The scheduling model's utilization for the workload (the same in every run: a mean
    /// over its own draws) and the share of it each run kept.
    #[serde(default)]
    pub model_utilization: Option<Spread>,
    #[serde(default)]
    pub share_of_model_ceiling: Option<Spread>,
    /// With `--judge`: wall with the judge ÷ without, the judge endpoint's busy share of
    /// its cap while judge work waited, judge calls sent ÷ asked.
    #[serde(default)]
    pub judge_wall_ratio: Option<Spread>,
    #[serde(default)]
    pub judge_busy_share: Option<Spread>,
    /// The busy share counting judge work as waiting from its iteration's end (a lower
    /// bound), and the mean time from a judge call's ask to its send.
    #[serde(default)]
    pub judge_busy_share_from_iteration_end: Option<Spread>,
    #[serde(default)]
    pub judge_ask_to_send_ms: Option<Spread>,
    #[serde(default)]
    pub judge_sent_over_asked: Option<Spread>,
}

impl EvalSummary {
    pub fn of(results: &[EvalBenchResult]) -> EvalSummary {
        let spread =
            |f: fn(&EvalBenchResult) -> Option<f64>| Spread::of(results.iter().filter_map(f));
        EvalSummary {
            runs: results.len(),
            wall_s: spread(|r| Some(r.wall_s)),
            calls_per_s: spread(|r| Some(r.calls_per_s)),
            slot_utilization: spread(|r| Some(r.slot_utilization)),
            wall_over_bound: spread(|r| Some(r.wall_over_bound)),
            cpu_s_per_1k_calls: spread(|r| Some(r.cpu_s_per_1k_calls)),
            store_writer_cpu_s: spread(|r| r.store_writer_cpu_s),
            peak_rss_mib: spread(|r| Some(r.peak_rss_mib)),
            model_utilization: spread(|r| r.model_utilization),
            share_of_model_ceiling: spread(|r| {
                r.model_utilization
                    .filter(|m| *m > 0.0)
                    .map(|m| r.slot_utilization / m)
            }),
            judge_wall_ratio: spread(|r| r.judge.as_ref().map(|j| j.wall_ratio)),
            judge_busy_share: spread(|r| r.judge.as_ref().map(|j| j.busy_share_while_waiting)),
            judge_busy_share_from_iteration_end: spread(|r| {
                r.judge.as_ref().map(|j| j.busy_share_from_iteration_end)
            }),
            judge_ask_to_send_ms: spread(|r| r.judge.as_ref().map(|j| j.mean_ask_to_send_ms)),
            judge_sent_over_asked: spread(|r| r.judge.as_ref().map(|j| j.sent_over_asked)),
        }
    }
}

/// The arguments of one run's child process: this process's own, without the options
/// that only the parent acts on or sets per run (`--runs`, `--settle-secs`, `--no-write`,
/// `--result-json`, `--seed`, `--seed-per-run`); the caller adds `--no-write`, the child's
/// `--result-json` and its `--seed`.
pub fn child_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    const WITH_VALUE: [&str; 4] = ["--runs", "--settle-secs", "--result-json", "--seed"];
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if WITH_VALUE.contains(&text.as_ref()) {
            // The option's value is the next argument: drop both.
            args.next();
            continue;
        }
        let dropped = text == "--no-write"
            || text == "--seed-per-run"
            || WITH_VALUE
                .iter()
                .any(|o| text.starts_with(&format!("{o}=")));
        if !dropped {
            out.push(arg);
        }
    }
    out
}

/// Runs the benchmark `args.runs` times, each as a child `tmas` process (output shown as
/// it comes), `args.settle_secs` apart, and prints the summary.
pub async fn run_repeated(args: &EvalBenchArgs) -> anyhow::Result<Vec<EvalBenchResult>> {
    anyhow::ensure!(
        args.keep_run.is_none(),
        "--out keeps one run's directory: use it with --runs 1"
    );
    let exe = std::env::current_exe().context("cannot find the tmas executable")?;
    let base = child_args(std::env::args_os().skip(1));
    let scratch = std::env::temp_dir().join(format!(
        "tmas-bench-eval-runs-{}-{}",
        std::process::id(),
        super::unix_secs()
    ));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let results = run_children(args, &exe, &base, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let results = results?;
    print_summary(&EvalSummary::of(&results));
    Ok(results)
}

async fn run_children(
    args: &EvalBenchArgs,
    exe: &Path,
    base: &[OsString],
    scratch: &Path,
) -> anyhow::Result<Vec<EvalBenchResult>> {
    let mut results = Vec::with_capacity(usize::from(args.runs));
    for i in 1..=args.runs {
        if i > 1 {
            // Writes back what the previous run left dirty (its deleted run directory
            // included), then lets the load average settle. On ext4 without a journal a
            // new file skips inodes freed less than 60 s ago, or 360 s while their inode
            // table block is still dirty: without the sync and the pause, each run's ~2,600
            // file creations paid for the previous run's deletions
            // (docs/performance-log.md).
            // sync(2) blocks until the writeback is done: off the async runtime.
            // SAFETY: sync(2) takes no arguments and cannot fail.
            tokio::task::spawn_blocking(|| unsafe { libc::sync() })
                .await
                .context("sync before the next run")?;
            tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
        }
        let seed = if args.seed_per_run {
            args.seed.saturating_add(u64::from(i - 1))
        } else {
            args.seed
        };
        println!("== run {i} of {} (seed {seed})", args.runs);
        let path = scratch.join(format!("run-{i}.json"));
        let status = tokio::process::Command::new(exe)
            .args(base)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--no-write")
            .arg("--result-json")
            .arg(&path)
            .status()
            .await
            .with_context(|| format!("cannot start run {i} ({})", exe.display()))?;
        // A run that failed its correctness checks still wrote its figures.
        let result = read_result(&path).with_context(|| {
            format!("run {i} of {} ended with {status} and no result", args.runs)
        })?;
        results.push(result);
    }
    Ok(results)
}

fn read_result(path: &Path) -> anyhow::Result<EvalBenchResult> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a result", path.display()))
}

fn print_summary(s: &EvalSummary) {
    println!(
        "tmas bench eval: {} runs, each in its own process: median (min – max)",
        s.runs
    );
    let row = |name: &str, spread: Option<Spread>, digits: usize, target: &str| {
        if let Some(Spread { median, min, max }) = spread {
            println!("  {name:<18} {median:.digits$}  ({min:.digits$} – {max:.digits$}){target}");
        }
    };
    row("wall time s", s.wall_s, 2, "");
    row("calls/s", s.calls_per_s, 1, "");
    row(
        "slot utilization",
        s.slot_utilization,
        3,
        "  target >= 0.90 fixed; lognormal >= 0.95 × ceiling, >= 0.85 at P = 500",
    );
    row("model ceiling", s.model_utilization, 3, "");
    row("share of ceiling", s.share_of_model_ceiling, 3, "");
    row("wall / bound", s.wall_over_bound, 3, "  target <= 1.15");
    row(
        "CPU-s / 1k calls",
        s.cpu_s_per_1k_calls,
        3,
        "  target <= 0.22",
    );
    row("store writer CPU-s", s.store_writer_cpu_s, 1, "");
    row(
        "peak RSS MiB",
        s.peak_rss_mib,
        1,
        "  target <= 614 at 800 in flight, <= 1536 at 10,000",
    );
    row(
        "judge wall ratio",
        s.judge_wall_ratio,
        3,
        "  target <= 1.05",
    );
    row(
        "judge busy share",
        s.judge_busy_share,
        3,
        "  target >= 0.90",
    );
    row(
        "judge busy from it. end",
        s.judge_busy_share_from_iteration_end,
        3,
        "  (a lower bound)",
    );
    row("judge ask→send ms", s.judge_ask_to_send_ms, 1, "");
    row("judge sent/asked", s.judge_sent_over_asked, 3, "");
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn spread_is_median_min_max_and_skips_nan() {
        assert_eq!(Spread::of([]), None);
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(
            Spread::of([4.0, 1.0, f64::NAN, 2.0, 3.0]),
            Some(Spread {
                median: 2.5,
                min: 1.0,
                max: 4.0
            })
        );
    }

    #[test]
    fn child_args_drop_what_only_the_parent_acts_on() {
        let args = [
            "--worker-threads",
            "2",
            "bench",
            "eval",
            "--runs",
            "3",
            "--latency",
            "lognormal:200ms:1.0",
            "--no-write",
            "--settle-secs=0",
            "--result-json",
            "/x.json",
            "--runs=5",
            "--seed",
            "7",
            "--seed-per-run",
            "--seed=8",
            "--problems",
            "10",
        ]
        .map(OsString::from);
        let kept: Vec<OsString> = child_args(args);
        let expected = [
            "--worker-threads",
            "2",
            "bench",
            "eval",
            "--latency",
            "lognormal:200ms:1.0",
            "--problems",
            "10",
        ]
        .map(OsStr::new);
        assert_eq!(kept, expected);
    }
}
