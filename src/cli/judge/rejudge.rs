//! `tmas judge --run DIR`: judge a finished run's candidates again, as the run judged
//! them (`crate::engine::rejudge`), with the run's own config or another one's judge, and
//! print the new Pass@1 table beside the stored figure. The run is not changed; the new
//! verdicts go to `DIR/rejudged.jsonl` (or `--output`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::config::layers::CliOverride;
use crate::config::loader::{load_str, load_with};
use crate::config::resolve::process_env;
use crate::engine::endpoints::Endpoints;
use crate::engine::rejudge::{Rejudged, rejudge};
use crate::engine::run_dir::write_atomic;
use crate::method::PromptSet;
use crate::store::schema::META_CONFIG;
use crate::store::{DB_FILE, StoreReader};

/// Judges the run in `dir` again. The judge comes from `config` (default: the run's own
/// config as its store keeps it, with `embedded-sim` still unresolved, so an embedded
/// simulator is started again) with `set` applied; proof mode is the run's own.
pub async fn run(
    dir: &Path,
    config: Option<&Path>,
    set: &[String],
    out: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let env = process_env();
    let overrides: Vec<CliOverride> = set.iter().map(CliOverride::set).collect();
    if !dir.join(DB_FILE).is_file() {
        return Err(crate::config::BadInput(format!(
            "{}: not a run directory written by tmas (no {DB_FILE})",
            dir.display()
        ))
        .into());
    }
    let reader = StoreReader::open_read_only(&dir.join(DB_FILE))?;
    let label = format!("stored config of {}", dir.display());
    let stored = reader
        .meta(META_CONFIG)?
        .with_context(|| format!("{label}: missing; the run did not get past its start"))?;
    let run_config =
        load_str(&stored, &label, &env, &[]).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    let proof = !run_config.method.no_proof;
    let mut judge_config = match config {
        Some(path) => load_with(path, &env, &overrides).map_err(anyhow::Error::new)?,
        None => load_str(&stored, &label, &env, &overrides)
            .map_err(|e| anyhow::anyhow!("{label}: {e}"))?,
    };
    let prompts = Arc::new(
        PromptSet::load(&judge_config.prompt_overrides()).context("loading prompt templates")?,
    );
    // The embedded simulator needs the problems' answers to grade as the run's did.
    let answers = reader
        .problems()?
        .into_iter()
        .map(|p| (p.problem_id, p.reference_answer))
        .collect();
    drop(reader);
    let endpoints = Endpoints::start(&mut judge_config, &env, Some(answers)).await?;
    let result = rejudge(
        dir,
        &judge_config,
        proof,
        prompts,
        Arc::new(endpoints.client.clone()),
    )
    .await;
    endpoints.shutdown().await;
    let result = result?;

    let out_path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join("rejudged.jsonl"));
    write_verdicts(&out_path, &result)?;
    print_summary(dir, &judge_config, &result, &out_path);
    Ok(if result.failed_calls > 0 {
        ExitCode::from(crate::cli::exit::INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_verdicts(path: &Path, result: &Rejudged) -> anyhow::Result<()> {
    let mut text = Vec::new();
    for problem in &result.problems {
        serde_json::to_writer(&mut text, problem).context("serializing a verdict")?;
        text.push(b'\n');
    }
    write_atomic(path, &text).with_context(|| format!("writing {}", path.display()))
}

fn print_summary(dir: &Path, config: &crate::config::Config, result: &Rejudged, out: &Path) {
    let how = match (result.proof, config.judge.enabled) {
        (true, true) => format!(
            "proof grader against each problem's reference solution and grading guidelines, {} repeats",
            config.judge.repeats.max(1)
        ),
        (false, true) => format!(
            "rule check and LLM judge ({} repeats, policy {:?}, input {:?})",
            config.judge.repeats.max(1),
            config.judge.policy,
            config.judge.input
        ),
        (_, false) => "rule check only (judge.enabled = false)".to_string(),
    };
    println!(
        "judged {} finished problems of {} again: {how}",
        result.problems.len(),
        dir.display()
    );
    if result.unfinished > 0 {
        println!(
            "partial: {} unfinished problems are left out (stored and new tables cover the same problems)",
            result.unfinished
        );
    }
    println!("{}", result.rejudged.render_text());
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2}%", v * 100.0));
    println!(
        "final Pass@1: stored {}, judged again {}; {} of {} candidates changed score",
        pct(result.stored.final_pass_at_1()),
        pct(result.rejudged.final_pass_at_1()),
        result.changed,
        result.candidates
    );
    if result.failed_calls > 0 {
        println!(
            "calls lost: {} of {} judge calls failed; those candidates are scored as a run scores them without a verdict",
            result.failed_calls, result.calls
        );
    } else {
        println!("{} judge calls, none failed", result.calls);
    }
    println!("verdicts: {}", out.display());
}
