//! `tmas rl-score ROLLOUTS.jsonl`: rewards and GRPO advantages of a rollout batch under the
//! paper's rewards (`crate::rl`). One rollout per line (`docs/rl.md`); writes one scored
//! line per rollout and prints the means per `_source`. `--compare` scores the batch under
//! both the standard and the hybrid rewards and prints how the advantages differ.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::engine::judge_session::JudgeSession;
use crate::engine::run_dir::write_atomic_with;
use crate::rl::batch::{RewardMode, Rollout};
use crate::rl::rewards::{DEFAULT_DELTA, PAPER_BETA, RewardParams, StdKind};
use crate::rl::score::{Judges, ScoredBatch, SourceSummary, summarize};

/// Reward settings shared by `rl-score` and `rl-serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct RewardArgs {
    /// standard: ±1 correctness for every group; hybrid: the reward of each group's
    /// `_source` (normal → correctness, experience → experience utilization, guideline →
    /// novel strategy).
    #[arg(long, value_enum, default_value = "hybrid")]
    pub mode: RewardMode,
    /// β of the experience-utilization bonus.
    #[arg(long, default_value_t = PAPER_BETA)]
    pub beta: f64,
    /// δ in the advantage's denominator (std + δ).
    #[arg(long, default_value_t = DEFAULT_DELTA)]
    pub delta: f64,
    /// Standard deviation of the group normalisation: population (the paper's formula)
    /// or sample (verl's GRPO estimator).
    #[arg(long, value_enum, default_value = "population")]
    pub std: StdArg,
    /// Run config naming the judges' endpoints (roles `judge` and `guideline_judge`).
    /// Without it only the rule check runs: undecided answers count as wrong and a
    /// novelty verdict against a non-empty guideline bank cannot be had.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a config key, e.g. `--set judge.repeats=1` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StdArg {
    Population,
    Sample,
}

impl RewardArgs {
    pub fn params(&self) -> anyhow::Result<RewardParams> {
        let params = RewardParams {
            beta: self.beta,
            delta: self.delta,
            std: match self.std {
                StdArg::Population => StdKind::Population,
                StdArg::Sample => StdKind::Sample,
            },
        };
        params.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(params)
    }

    /// The judges: from `--config`, or the rule check alone.
    pub async fn judges(&self) -> anyhow::Result<(Judges, Option<JudgeSession>)> {
        match &self.config {
            Some(path) => {
                let session = JudgeSession::start(path, &self.set).await?;
                Ok((Judges::of_session(&session), Some(session)))
            }
            None => Ok((Judges::default(), None)),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The rollouts, one JSON object per line.
    #[arg(value_name = "ROLLOUTS.jsonl")]
    pub rollouts: PathBuf,
    #[command(flatten)]
    pub reward: RewardArgs,
    /// Where to write the scored rollouts (JSONL, one line per rollout, input order;
    /// `-` for standard output). Default: next to the input, as `NAME.scored.jsonl`.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also score under the other mode and print, per `_source`, how the mean advantages
    /// of correct and wrong rollouts differ between the standard and hybrid rewards.
    #[arg(long)]
    pub compare: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rollouts = read_rollouts(&args.rollouts)?;
    let params = args.reward.params()?;
    let (judges, session) = args.reward.judges().await?;
    let result = score_and_report(&args, &judges, &rollouts, &params).await;
    if let Some(session) = session {
        session.shutdown().await;
    }
    result
}

async fn score_and_report(
    args: &Args,
    judges: &Judges,
    rollouts: &[Rollout],
    params: &RewardParams,
) -> anyhow::Result<ExitCode> {
    let batch_name = args
        .rollouts
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "batch".into());
    let mode = args.reward.mode;
    let scored = judges.score(rollouts, mode, params, &batch_name).await?;
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| default_out(&args.rollouts));
    write_scored(&out, &scored)?;
    println!(
        "{} rollouts in {} groups scored ({} rewards, beta {}, delta {}, {:?} std)",
        scored.rollouts.len(),
        crate::rl::batch::groups(rollouts).len(),
        mode.as_str(),
        params.beta,
        params.delta,
        params.std
    );
    print_counts(&scored);
    print_summary(mode, &summarize(&scored.rollouts));
    if args.compare {
        let other = match mode {
            RewardMode::Standard => RewardMode::Hybrid,
            RewardMode::Hybrid => RewardMode::Standard,
        };
        let (standard, hybrid) = {
            let again = judges.score(rollouts, other, params, &batch_name).await?;
            match mode {
                RewardMode::Standard => (scored.clone(), again),
                RewardMode::Hybrid => (again, scored.clone()),
            }
        };
        print_comparison(&standard, &hybrid);
    }
    if out.as_os_str() != "-" {
        println!("scored rollouts: {}", out.display());
    }
    Ok(if scored.counts.degraded() {
        ExitCode::from(super::exit::INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    })
}

/// Reads the batch; an unreadable line is an error naming the file and line.
pub fn read_rollouts(path: &Path) -> anyhow::Result<Vec<Rollout>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read rollouts from {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut de = serde_json::Deserializer::from_str(line);
        let rollout: Rollout = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: field `{}`: {}",
                path.display(),
                i + 1,
                e.path(),
                e.inner()
            )
        })?;
        out.push(rollout);
    }
    anyhow::ensure!(!out.is_empty(), "{} holds no rollouts", path.display());
    Ok(out)
}

fn default_out(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rollouts".into());
    input.with_file_name(format!("{stem}.scored.jsonl"))
}

fn write_scored(path: &Path, scored: &ScoredBatch) -> anyhow::Result<()> {
    let write = |w: &mut dyn std::io::Write| -> anyhow::Result<()> {
        for s in &scored.rollouts {
            serde_json::to_writer(&mut *w, s)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    };
    if path.as_os_str() == "-" {
        let mut stdout = std::io::stdout().lock();
        write(&mut stdout)?;
        return stdout.flush().context("writing to standard output");
    }
    write_atomic_with(path, write)
}

fn print_counts(scored: &ScoredBatch) {
    let c = &scored.counts;
    println!(
        "judging: {} rule-undecided answers ({} decided by the LLM judge, {} counted wrong); \
         {} novelty verdicts asked ({} missing, counted repeated)",
        c.rule_undecided, c.llm_decided, c.undecided, c.novelty_asked, c.novelty_failed
    );
    if c.degraded() {
        println!(
            "warning: {} rollouts were scored on a fallback, not a verdict (exit code {})",
            c.undecided + c.novelty_failed,
            super::exit::INCOMPLETE
        );
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:+.3}"))
}

fn print_summary(mode: RewardMode, summary: &[SourceSummary]) {
    println!("\n{} rewards, by _source:", mode.as_str());
    println!(
        "{:<11} {:>8} {:>8} {:>11} {:>13} {:>13}",
        "_source", "rollouts", "correct", "mean reward", "adv. correct", "adv. wrong"
    );
    for s in summary {
        println!(
            "{:<11} {:>8} {:>8} {:>+11.3} {:>13} {:>13}",
            s.source.as_str(),
            s.rollouts,
            s.correct,
            s.mean_reward,
            opt(s.mean_advantage_correct),
            opt(s.mean_advantage_wrong)
        );
    }
}

/// An advantage differing by less is the same one: the normalisation makes any positive
/// affine change of a group's rewards (e.g. +1.0/−0.5 instead of ±1 when every rollout of
/// a group is novel) vanish up to δ.
const CHANGED: f64 = 1e-4;

/// Per `_source`: mean advantage of correct and wrong rollouts under each mode, and the
/// share of rollouts whose advantage changed.
fn print_comparison(standard: &ScoredBatch, hybrid: &ScoredBatch) {
    let s = summarize(&standard.rollouts);
    let h = summarize(&hybrid.rollouts);
    println!("\nstandard vs hybrid advantages, by _source:");
    println!(
        "{:<11} {:>12} {:>12} {:>12} {:>12} {:>9}",
        "_source", "std correct", "hyb correct", "std wrong", "hyb wrong", "changed"
    );
    for (a, b) in s.iter().zip(&h) {
        let changed = standard
            .rollouts
            .iter()
            .zip(&hybrid.rollouts)
            .filter(|(x, y)| x.source == a.source && (x.advantage - y.advantage).abs() > CHANGED)
            .count();
        println!(
            "{:<11} {:>12} {:>12} {:>12} {:>12} {:>5}/{:<3}",
            a.source.as_str(),
            opt(a.mean_advantage_correct),
            opt(b.mean_advantage_correct),
            opt(a.mean_advantage_wrong),
            opt(b.mean_advantage_wrong),
            changed,
            a.rollouts
        );
    }
}
