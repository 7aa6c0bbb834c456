//! `tmas select-hard`: the paper's hard-subset selection, reproducibly. It runs k
//! independent samples per problem through the engine (a one-iteration, no-verification
//! run: the `majority-vote` method with `method.k = k`, judged like any run, resumable
//! with `tmas run --resume`), keeps the problems with fewer than c correct samples and
//! draws n of them with a seeded draw. Output: JSONL, one problem a line with its counts
//! (`problem_id`, `question`, `answer`, `correct`, `samples`), usable as a dataset.
//! `--from-run DIR` selects from a finished run without running anything.
//!
//! The sampling run goes where `--run-dir` says, or beside the output file, named after
//! it (`--output data/hard.jsonl` → `data/hard.sampling-run/`), never into the working
//! directory unasked. Everything is checked before it starts: the config, the dataset,
//! the output file's directory and the run directory (new or empty).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::exit::{self, BadInput};
use crate::config::ConfigArgs;
use crate::config::resolve::process_env;
use crate::engine::preflight::StartupError;
use crate::engine::run_dir::RunDir;
use crate::engine::{self, RunControl, RunRequest, shutdown};
use crate::eval::dataset::{DatasetSpec, load_dataset};
use crate::eval::hard_subset::{SampleCount, is_correct, select_hard};
use crate::eval::judge::counted_score;

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "tmas select-hard --config <FILE> --output <FILE> [OPTIONS]\n       \
                            tmas select-hard --from-run <DIR> --output <FILE> [OPTIONS]"
)]
#[command(mut_arg("config", |a| a
    .required(false)
    .required_unless_present("from_run")
    .default_value("-")
    .hide_default_value(true)))]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Independent samples per problem (paper: 8).
    #[arg(short = 'k', long = "samples", default_value_t = 8)]
    pub samples: u32,
    /// Keep problems with fewer than this many correct samples (paper: 2).
    #[arg(long = "below", default_value_t = 2)]
    pub below: u32,
    /// Problems to draw from the hard pool (paper: 50).
    #[arg(long = "take", value_name = "N", default_value_t = 50)]
    pub take: usize,
    /// Seed of the draw of problems from the hard pool (`--seed` seeds the sampling run).
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub selection_seed: u64,
    /// Where to write the subset (JSONL).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// The sampling run's directory (default: beside the output file, named after it:
    /// `--output data/hard.jsonl` → `data/hard.sampling-run/`).
    #[arg(long, value_name = "DIR", conflicts_with = "from_run")]
    pub run_dir: Option<PathBuf>,
    /// Select from this finished sampling run instead of running one.
    #[arg(long, value_name = "DIR")]
    pub from_run: Option<PathBuf>,
    /// Errors, warnings and the result line only: no informational log lines (unless
    /// `--log` asks for them).
    #[arg(long)]
    pub quiet: bool,
    /// Skip the start-up check of the endpoints (`GET /models` and a one-token chat
    /// completion on each endpoint the sampling run uses).
    #[arg(long, conflicts_with = "from_run")]
    pub no_preflight: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Err(problem) = check_output_file(&args.output) {
        eprintln!("error: {problem}");
        eprintln!("nothing was created; fix the above and run again");
        return Ok(ExitCode::from(exit::BAD_INPUT));
    }
    let run_dir = match &args.from_run {
        Some(dir) => dir.clone(),
        None => match sample(&args).await? {
            Ok(dir) => dir,
            Err(code) => return Ok(code),
        },
    };
    let counts = counts(&run_dir)?;
    let picked = select_hard(&counts, args.below, args.take, args.selection_seed);
    let hard = counts.iter().filter(|c| c.correct < args.below).count();
    let mut out = Vec::new();
    for p in &picked {
        serde_json::to_writer(&mut out, p)?;
        out.push(b'\n');
    }
    let mut file = std::fs::File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    file.write_all(&out)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    println!(
        "{} sampled, {hard} with fewer than {} correct; {} drawn (seed {}) → {}",
        crate::text::count_of(counts.len(), "problem"),
        args.below,
        picked.len(),
        args.selection_seed,
        args.output.display()
    );
    if picked.len() < args.take {
        eprintln!(
            "note: only {} hard problems, fewer than the {} asked for",
            picked.len(),
            args.take
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the k samples; the run directory, or the exit code of an error already printed.
async fn sample(args: &Args) -> anyhow::Result<Result<PathBuf, ExitCode>> {
    let mut config_args = args.config.clone();
    // Appended last, so they win over the file and the user's --set.
    config_args.set.extend([
        "method.name=\"majority-vote\"".to_string(),
        format!("method.k={}", args.samples),
        "method.iterations=1".to_string(),
    ]);
    let config = match config_args.load() {
        Ok(c) => c,
        Err(errors) => {
            for issue in errors.iter() {
                eprintln!("error: {issue}");
            }
            return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
        }
    };
    if let Some(shard) = config.run.shard {
        eprintln!(
            "error: run.shard = {shard}: select-hard samples every problem of the dataset to pick from all of them; run it unsharded"
        );
        return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
    }
    let path = config.run.dataset.clone().ok_or_else(|| {
        BadInput("no dataset: set run.dataset in the config or pass --dataset FILE".into())
    })?;
    let mut spec = DatasetSpec::new(path);
    spec.limit = config.run.limit;
    spec.ids = config.run.ids.clone();
    let dataset = load_dataset(&spec)?;
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| sampling_run_dir(&args.output));
    if let Some(problem) = crate::engine::run_dir::not_empty(&run_dir, "run") {
        eprintln!("error: {problem}");
        eprintln!("nothing was created; fix the above and run again");
        return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
    }
    if !args.quiet {
        eprintln!(
            "tmas select-hard: {} × {} samples; sampling run → {}",
            crate::text::count_of(dataset.problems.len(), "problem"),
            args.samples,
            run_dir.display()
        );
    }
    let control = RunControl::default();
    let signals = shutdown::install(control.stop.clone()).context("installing signal handlers")?;
    let started = engine::run_with(
        RunRequest {
            config,
            config_source: args.config.config.clone(),
            dataset,
            run_dir,
            env: process_env(),
            status_every: None,
            preflight: !args.no_preflight,
            observe: Default::default(),
        },
        control,
    )
    .await;
    let result = match started {
        Ok(result) => result,
        Err(e) if e.downcast_ref::<shutdown::StoppedBeforeStart>().is_some() => {
            eprintln!("stopped before the sampling run started; nothing was created");
            return Ok(Err(ExitCode::from(signals.exit_code())));
        }
        Err(e) => match e.downcast_ref::<StartupError>() {
            Some(startup) => {
                for problem in &startup.problems {
                    eprintln!("error: {problem}");
                }
                eprintln!("nothing was created; fix the above and run again");
                return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
            }
            None => return Err(e),
        },
    };
    if result.interrupted {
        eprintln!(
            "interrupted; finish the samples with `tmas run --resume {}`, then select with --from-run",
            result.run_dir.display()
        );
        return Ok(Err(ExitCode::from(signals.exit_code())));
    }
    // Lost samples would make a problem look harder than it is: select only from a run
    // where every call was answered.
    if !result.accounting.is_clean() || result.permanent_stop.is_some() {
        eprintln!(
            "error: the sampling run in {} lost calls or problems ({} problems failed); once \
             the endpoints are fine, `tmas run --resume {}` sends them again, then select with \
             --from-run",
            result.run_dir.display(),
            result.problems_failed.len(),
            result.run_dir.display()
        );
        let code = match result.permanent_stop {
            Some(_) => exit::ENDPOINT_REFUSED,
            None => exit::INCOMPLETE,
        };
        return Ok(Err(ExitCode::from(code)));
    }
    Ok(Ok(result.run_dir))
}

/// The sampling run's directory when `--run-dir` is not given: beside the output file,
/// named after it (`data/hard.jsonl` → `data/hard.sampling-run`).
fn sampling_run_dir(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "select-hard".to_owned());
    out.with_file_name(format!("{stem}.sampling-run"))
}

/// The output file can be written where it is asked for: it is not a directory, and its
/// directory exists. Checked before the samples are drawn (which may take hours).
fn check_output_file(out: &Path) -> Result<(), String> {
    if out.is_dir() {
        return Err(format!(
            "--output {} is a directory; give the JSONL file to write",
            out.display()
        ));
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!(
            "--output {}: directory {} does not exist",
            out.display(),
            parent.display()
        ));
    }
    Ok(())
}

/// Correct and judged samples per problem of a finished one-iteration run, in dataset
/// order.
fn counts(dir: &std::path::Path) -> anyhow::Result<Vec<SampleCount>> {
    let run = RunDir::open(dir)?;
    let failed = run.failed_candidates()?;
    let mut records = run.read_problems()?;
    anyhow::ensure!(
        !records.is_empty(),
        "{}: no finished problems",
        dir.display()
    );
    let order: std::collections::HashMap<String, usize> =
        std::fs::read_to_string(run.results_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .enumerate()
            .filter_map(|(i, v)| Some((v.get("problem_id")?.as_str()?.to_string(), i)))
            .collect();
    records.sort_by_key(|r| order.get(&r.problem_id).copied().unwrap_or(usize::MAX));
    Ok(records
        .into_iter()
        .map(|r| {
            // Every sample the run asked for, a failed one as its rule says.
            let judged: Vec<f64> = r
                .judgments
                .first()
                .map(|c| {
                    c.iter()
                        .filter_map(|j| counted_score(j.as_ref(), failed))
                        .collect()
                })
                .unwrap_or_default();
            SampleCount {
                correct: judged.iter().filter(|s| is_correct(**s)).count() as u32,
                samples: judged.len() as u32,
                problem_id: r.problem_id,
                question: r.question,
                answer: r.reference_answer,
            }
        })
        .collect())
}
