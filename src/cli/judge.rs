//! `tmas judge`: audit the answer check.
//!
//! - `tmas judge --reference R --answer A` prints the rule verdict, its reason and both
//!   normalized forms;
//! - `tmas judge --pairs FILE.jsonl` judges every line (`reference`, `candidate`, optional
//!   `equivalent` label, `answer_type`, `question`), writes the verdicts as JSONL and, when
//!   labels are present, prints accuracy, false positives and false negatives by type;
//! - `--llm --config FILE` also asks the configured judge role R times per pair and reports
//!   where the LLM and the rules disagree (an `embedded-sim` endpoint starts the simulator
//!   in-process, as `tmas run` does);
//! - `tmas judge --run DIR` judges a finished run's candidates again as the run did
//!   (proof grading in proof mode) and prints the new Pass@1 table ([`rejudge`]).

mod rejudge;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use futures::future::join_all;

use crate::engine::judge_session::JudgeSession;
use crate::eval::equivalence::{Outcome, check};
use crate::eval::judge::pairs::{Pair, PairVerdict, load_pairs, score};

/// Misses and disagreements listed in the report (all are in the verdict file).
const MAX_LISTED: usize = 25;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["reference", "pairs", "run"])))]
pub struct Args {
    /// The reference answer (with --answer).
    #[arg(long, requires = "answer", value_name = "R")]
    pub reference: Option<String>,
    /// The answer to check against --reference (the content of its \boxed{}).
    #[arg(long, requires = "reference", value_name = "A")]
    pub answer: Option<String>,
    /// The question, for the LLM judge's prompt (with --reference/--answer).
    #[arg(long, value_name = "TEXT")]
    pub question: Option<String>,
    /// A JSONL file of pairs: `reference`, `candidate`, optional `equivalent` (label),
    /// `answer_type`, `question`.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["reference", "answer"])]
    pub pairs: Option<PathBuf>,
    /// A finished run directory: judge its candidates again as the run did (rule check
    /// and LLM judge, or the proof grader with each problem's reference solution and
    /// grading guidelines in proof mode), with the judge of the run's config (or of
    /// --config), and print the new Pass@1 table. The run is not changed.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["reference", "answer", "pairs", "llm"])]
    pub run: Option<PathBuf>,
    /// Where --pairs or --run writes its verdicts (JSONL; `-` for stdout with --pairs).
    /// Default: next to the pairs file, as `NAME.verdicts.jsonl`; `DIR/rejudged.jsonl`.
    #[arg(long, short = 'o', value_name = "FILE", conflicts_with = "reference")]
    pub output: Option<PathBuf>,
    /// Also ask the LLM judge (role `judge` of --config, `judge.repeats` times).
    #[arg(long, requires = "config")]
    pub llm: bool,
    /// Run config (TOML) naming the judge's endpoints; needed for --llm. With --run it
    /// replaces the run's own config for the judge (proof mode stays the run's).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a config key, e.g. `--set judge.repeats=2` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.run {
        return rejudge::run(
            dir,
            args.config.as_deref(),
            &args.set,
            args.output.as_deref(),
        )
        .await;
    }
    let llm = if args.llm {
        let path = args
            .config
            .as_deref()
            .ok_or_else(|| crate::config::BadInput("--llm needs --config FILE".into()))?;
        Some(JudgeSession::start(path, &args.set).await?)
    } else {
        None
    };
    let result = match (&args.pairs, &args.reference, &args.answer) {
        (Some(pairs), _, _) => judge_pairs(pairs, args.output.as_deref(), llm.as_ref()).await,
        (None, Some(reference), Some(answer)) => {
            judge_one(reference, answer, args.question.as_deref(), llm.as_ref()).await
        }
        _ => Err(anyhow::anyhow!(
            "give --reference R --answer A, or --pairs FILE.jsonl"
        )),
    };
    if let Some(llm) = llm {
        llm.shutdown().await;
    }
    result.map(|()| ExitCode::SUCCESS)
}

async fn judge_one(
    reference: &str,
    answer: &str,
    question: Option<&str>,
    llm: Option<&JudgeSession>,
) -> anyhow::Result<()> {
    let verdict = check(reference, answer);
    println!("verdict: {}", outcome_word(verdict.outcome));
    println!("reason: {}", verdict.reason);
    println!("reference (normalized): {}", verdict.normalized_reference);
    println!("answer (normalized): {}", verdict.normalized_candidate);
    if let Some(llm) = llm {
        let replies = ask(llm, question.unwrap_or(""), reference, answer, 0).await;
        println!(
            "llm judge ({} runs): {}",
            replies.len(),
            llm_words(&replies)
        );
        let pair = PairVerdict {
            line: 0,
            pair: Pair {
                reference: reference.into(),
                candidate: answer.into(),
                equivalent: None,
                answer_type: None,
                question: None,
                problem_id: None,
                kind: None,
            },
            verdict,
            llm: Vec::new(),
            llm_disagrees: false,
        }
        .with_llm(replies);
        if pair.llm_disagrees {
            println!("disagreement: the LLM judge and the rules differ");
        }
    }
    Ok(())
}

async fn judge_pairs(
    path: &Path,
    out: Option<&Path>,
    llm: Option<&JudgeSession>,
) -> anyhow::Result<()> {
    let pairs = load_pairs(path)?;
    let mut verdicts: Vec<PairVerdict> = pairs
        .into_iter()
        .map(|(line, pair)| PairVerdict::judge(line, pair))
        .collect();
    if let Some(llm) = llm {
        let asks = verdicts.iter().map(|v| {
            let question = v.pair.question.as_deref().unwrap_or("");
            ask(llm, question, &v.pair.reference, &v.pair.candidate, v.line)
        });
        let replies = join_all(asks).await;
        verdicts = verdicts
            .into_iter()
            .zip(replies)
            .map(|(v, r)| v.with_llm(r))
            .collect();
    }
    let out_path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_out(path));
    write_verdicts(&out_path, &verdicts)?;

    let board = score(&verdicts);
    println!("{} pairs judged from {}", verdicts.len(), path.display());
    if board.total.pairs > 0 {
        println!("\nrule check against the labels (undecided counts as not equivalent):");
        print!("{}", board.render_text());
        let misses: Vec<&PairVerdict> = verdicts
            .iter()
            .filter(|v| v.pair.equivalent.is_some_and(|e| e != v.said_equivalent()))
            .collect();
        list("misses", &misses, |v| {
            let fp = if v.said_equivalent() { "FP" } else { "FN" };
            format!("{fp} {}", describe(v))
        });
    } else {
        let decided = |o: Outcome| verdicts.iter().filter(|v| v.verdict.outcome == o).count();
        println!(
            "equivalent {}, not equivalent {}, undecided {} (no labels to score)",
            decided(Outcome::Equivalent),
            decided(Outcome::NotEquivalent),
            decided(Outcome::Undecided)
        );
    }
    if llm.is_some() {
        report_llm(&verdicts);
    }
    if out_path.as_os_str() != "-" {
        println!("\nverdicts: {}", out_path.display());
    }
    Ok(())
}

fn report_llm(verdicts: &[PairVerdict]) {
    let answered: Vec<&PairVerdict> = verdicts
        .iter()
        .filter(|v| v.llm.iter().any(Option::is_some))
        .collect();
    println!(
        "\nLLM judge: {} of {} pairs got a parseable verdict",
        answered.len(),
        verdicts.len()
    );
    let labelled: Vec<(&PairVerdict, bool, bool)> = answered
        .iter()
        .filter_map(|v| Some((*v, v.pair.equivalent?, llm_majority(&v.llm)?)))
        .collect();
    if !labelled.is_empty() {
        let right = labelled
            .iter()
            .filter(|(_, label, said)| label == said)
            .count();
        let fp = labelled.iter().filter(|(_, l, s)| *s && !*l).count();
        let fnn = labelled.iter().filter(|(_, l, s)| !*s && *l).count();
        println!(
            "LLM judge (majority) against the labels: {:.1}% of {} ({fp} FP, {fnn} FN)",
            100.0 * right as f64 / labelled.len() as f64,
            labelled.len()
        );
    }
    let disagreements: Vec<&PairVerdict> = verdicts.iter().filter(|v| v.llm_disagrees).collect();
    list("rule/LLM disagreements", &disagreements, |v| {
        format!("{} | llm: {}", describe(v), llm_words(&v.llm))
    });
}

/// Majority of the parsed LLM verdicts (`None` on a tie or without any).
fn llm_majority(replies: &[Option<bool>]) -> Option<bool> {
    let yes = replies.iter().filter(|r| **r == Some(true)).count();
    let no = replies.iter().filter(|r| **r == Some(false)).count();
    (yes != no).then_some(yes > no)
}

fn list(title: &str, items: &[&PairVerdict], line: impl Fn(&PairVerdict) -> String) {
    if items.is_empty() {
        println!("\n{title}: none");
        return;
    }
    println!("\n{title}: {}", items.len());
    for v in items.iter().take(MAX_LISTED) {
        println!("  {}", line(v));
    }
    if items.len() > MAX_LISTED {
        println!("  … {} more in the verdict file", items.len() - MAX_LISTED);
    }
}

fn describe(v: &PairVerdict) -> String {
    format!(
        "line {} [{}] {:?} vs {:?}: {} ({})",
        v.line,
        v.pair.answer_type.as_deref().unwrap_or("untyped"),
        v.pair.reference,
        v.pair.candidate,
        outcome_word(v.verdict.outcome),
        v.verdict.reason
    )
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Equivalent => "equivalent",
        Outcome::NotEquivalent => "not equivalent",
        Outcome::Undecided => "undecided",
    }
}

fn llm_words(replies: &[Option<bool>]) -> String {
    let words: Vec<&str> = replies
        .iter()
        .map(|r| match r {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unparseable",
        })
        .collect();
    words.join(" ")
}

fn default_out(pairs: &Path) -> PathBuf {
    let stem = pairs
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pairs".into());
    pairs.with_file_name(format!("{stem}.verdicts.jsonl"))
}

fn write_verdicts(path: &Path, verdicts: &[PairVerdict]) -> anyhow::Result<()> {
    let mut text = String::new();
    for v in verdicts {
        text.push_str(&serde_json::to_string(v).context("serializing a verdict")?);
        text.push('\n');
    }
    if path.as_os_str() == "-" {
        std::io::stdout()
            .write_all(text.as_bytes())
            .context("writing verdicts to stdout")?;
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("writing verdicts to {}", path.display()))
}

/// Asks the session's judge `judge.repeats` times (as a run's judge asks); a failed call
/// or an unparseable reply is `None`. `line` makes each pair's call keys distinct.
async fn ask(
    session: &JudgeSession,
    question: &str,
    reference: &str,
    candidate: &str,
    line: usize,
) -> Vec<Option<bool>> {
    session
        .llm
        .ask(question, reference, candidate, "tmas-judge", 0, line as u32)
        .await
}
