//! What a run (fresh or resumed) will do: the effective config, the run directory and its
//! store, the whole problem selection and the problems still to run.
//!
//! A fresh run records the resolved config (before the embedded simulator's URL is
//! substituted, so it can be reused), the prompt templates' digest and the dataset
//! selection in the store. A resume reads them back: the stored selection is the one run
//! (the dataset file is not needed), the stored config is compared with the requested
//! one (see [`crate::store::resume`]), and problems already finished for the requested
//! T are not run again.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;

use crate::config::Config;
use crate::eval::dataset::{Dataset, Problem};
use crate::method::PromptSet;
use crate::method::prompts::TemplateKind;
use crate::store::resume::result_affecting_differences;
use crate::store::rows::sha256_hex;
use crate::store::schema::{
    META_CONFIG, META_CONFIG_SOURCE, META_DATASET, META_ITERATIONS, META_PROMPTS, META_SEED,
    META_SELECTION, META_STATUS,
};
use crate::store::{Fact, ProblemRow, RunStore, StoredProblem};

use super::run_dir::RunDir;

/// Everything the engine needs to start.
pub struct Plan {
    pub config: Config,
    pub config_source: String,
    pub dataset_label: String,
    pub dir: RunDir,
    pub store: RunStore,
    pub prompts: PromptSet,
    /// The whole selection, in dataset order.
    pub selection: Vec<StoredProblem>,
    /// The problems to run now.
    pub to_run: Vec<Problem>,
    pub resumed: bool,
    /// Send the stored failed calls again (a resume without `--keep-failed`); otherwise
    /// they are replayed as failures.
    pub resend_failed: bool,
}

/// A resume that would change the run's results (or shrink it): refused, nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ResumeRefused(pub String);

/// Digest of every prompt template's text (a prompt edit changes results).
pub fn prompts_digest(prompts: &PromptSet) -> String {
    let mut all = String::new();
    for kind in TemplateKind::ALL {
        all.push_str(kind.name());
        all.push('\0');
        all.push_str(prompts.template(kind).text());
        all.push('\0');
    }
    sha256_hex(&all)
}

fn load_prompts(config: &Config) -> anyhow::Result<PromptSet> {
    PromptSet::load(&config.prompt_overrides()).context("loading prompt templates")
}

/// Digest of every problem of `dataset` (id and reference answer, in order): what the
/// shards of one run share although each stores only its own problems.
pub fn selection_digest(dataset: &Dataset) -> String {
    let mut text = String::new();
    for p in &dataset.problems {
        text.push_str(&p.id);
        text.push('\u{1f}');
        text.push_str(&p.answer);
        text.push('\u{1e}');
    }
    sha256_hex(&text)
}

/// A new run in `run_dir` over `dataset`.
pub async fn fresh(
    config: Config,
    config_source: &Path,
    dataset: &Dataset,
    run_dir: &Path,
) -> anyhow::Result<Plan> {
    let dir = RunDir::create(run_dir)?;
    let store = RunStore::create(run_dir)?;
    let prompts = load_prompts(&config)?;
    // A shard keeps each problem's ordinal in the whole selection, so the merged run lists
    // the problems in dataset order.
    let shard = config.run.shard;
    let in_shard = |p: &&Problem| shard.is_none_or(|s| s.contains(&p.id));
    let selection: Vec<StoredProblem> = dataset
        .problems
        .iter()
        .enumerate()
        .filter(|(_, p)| in_shard(p))
        .map(|(i, p)| StoredProblem {
            problem_id: p.id.clone(),
            ordinal: i as i64,
            question: p.question.clone(),
            reference_answer: p.answer.clone(),
            reference_solution: p.reference_solution.clone(),
            grading_guidelines: p.grading_guidelines.clone(),
            status: "pending".into(),
            iterations: None,
            error: None,
        })
        .collect();
    store.send(Fact::Problems(
        selection
            .iter()
            .map(|p| ProblemRow {
                problem_id: p.problem_id.clone(),
                ordinal: p.ordinal,
                question: p.question.clone(),
                reference_answer: p.reference_answer.clone(),
                reference_solution: p.reference_solution.clone(),
                grading_guidelines: p.grading_guidelines.clone(),
            })
            .collect(),
    ));
    let config_source = config_source.display().to_string();
    let dataset_label = dataset.path.display().to_string();
    store
        .write(Fact::Meta(vec![
            (
                META_CONFIG.into(),
                config
                    .to_toml_string()
                    .context("serializing the resolved config")?,
            ),
            (META_PROMPTS.into(), prompts_digest(&prompts)),
            (META_DATASET.into(), dataset_label.clone()),
            (META_SELECTION.into(), selection_digest(dataset)),
            (META_CONFIG_SOURCE.into(), config_source.clone()),
            (META_SEED.into(), config.run.seed.to_string()),
            (META_ITERATIONS.into(), config.method.iterations.to_string()),
            (META_STATUS.into(), "running".into()),
            (
                "created_by".into(),
                format!("tmas {}", env!("CARGO_PKG_VERSION")),
            ),
        ]))
        .await
        .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
    if let Some(shard) = shard {
        eprintln!(
            "shard {shard}: {} of the {}",
            selection.len(),
            crate::text::count_of(dataset.problems.len(), "problem")
        );
    }
    Ok(Plan {
        to_run: dataset.problems.iter().filter(in_shard).cloned().collect(),
        config,
        config_source,
        dataset_label,
        dir,
        store,
        prompts,
        selection,
        resumed: false,
        resend_failed: false,
    })
}

/// How a resume gets the config it asks for: called with the stored config's TOML (so
/// overrides can be layered on it, or a given file loaded instead).
pub type RequestedConfig = Box<dyn FnOnce(&str) -> anyhow::Result<Config> + Send>;

/// Reopens the run in `run_dir`. `force` accepts result-affecting differences;
/// `keep_failed` replays stored failed calls as failures instead of sending them again
/// (then a finished problem with lost calls is kept as it is).
pub async fn resume(
    run_dir: &Path,
    requested: RequestedConfig,
    force: bool,
    keep_failed: bool,
) -> anyhow::Result<Plan> {
    let db = run_dir.join(crate::store::DB_FILE);
    if !db.is_file() {
        return Err(crate::store::StoreError::Missing { path: db }.into());
    }
    // The writability probe before the lock: a read-only directory gets the clearest message.
    let dir = RunDir::create(run_dir)?;
    let store = RunStore::open(run_dir)?;
    let selection = store.read_now(|r| r.problems())?;
    if let Some(request) = selection.iter().find(|p| !p.has_reference()) {
        return Err(ResumeRefused(format!(
            "cannot resume {}: problem `{}` has no reference answer (the directory holds \
             requests recorded by `tmas serve`, not a run over a dataset)",
            run_dir.display(),
            request.problem_id
        ))
        .into());
    }
    let (stored_text, prompts_sha, dataset_label, config_source, stored_t) =
        store.read_now(|r| {
            Ok((
                r.meta(META_CONFIG)?,
                r.meta(META_PROMPTS)?,
                r.meta(META_DATASET)?,
                r.meta(META_CONFIG_SOURCE)?,
                r.meta(META_ITERATIONS)?,
            ))
        })?;
    let stored_text = stored_text.with_context(|| {
        format!(
            "{}: no stored config; the run did not get past its start — start it again",
            store.path().display()
        )
    })?;
    let label = format!("stored config of {}", run_dir.display());
    let stored = Config::from_toml_str(&stored_text, &label)
        .map_err(|e| anyhow::anyhow!("{label} does not load with this tmas: {e}"))?;
    let config = requested(&stored_text)?;
    let stored_t: u32 = stored_t
        .as_deref()
        .unwrap_or("0")
        .parse()
        .context("meta `iterations` is not a number")?;
    let prompts = load_prompts(&config)?;
    let mut differences = result_affecting_differences(
        &toml::Value::try_from(&stored).context("encoding the stored config")?,
        &toml::Value::try_from(&config).context("encoding the requested config")?,
    );
    if prompts_sha.as_deref() != Some(prompts_digest(&prompts).as_str()) {
        differences.push("prompt templates: their text differs from the stored run's".into());
    }
    if !differences.is_empty() {
        if force {
            for d in &differences {
                tracing::warn!("--force: resuming despite a result-affecting change: {d}");
                eprintln!("warning: --force: {d}");
            }
        } else {
            return Err(ResumeRefused(format!(
                "refusing to resume {}: these result-affecting settings differ from the stored \
                 run (pass --force to resume anyway; calls whose prompt changed are sent again):\n  {}",
                run_dir.display(),
                differences.join("\n  ")
            ))
            .into());
        }
    }
    let t = config.method.iterations;
    if t < stored_t {
        return Err(ResumeRefused(format!(
            "cannot resume {} with {t} iterations: the run already has {stored_t} (T can grow, \
             not shrink)",
            run_dir.display()
        ))
        .into());
    }
    anyhow::ensure!(
        !selection.is_empty(),
        "{}: the stored run has no problems",
        store.path().display()
    );
    // A finished problem whose calls were lost runs again: its answered calls replay from
    // the store, the lost ones are sent, and everything that depends on them follows.
    let with_lost_calls: HashSet<String> = if keep_failed {
        HashSet::new()
    } else {
        store
            .read_now(|r| r.lost_calls())?
            .into_iter()
            .map(|r| r.problem_id)
            .collect()
    };
    let adopted = dir.adopt_uncapped_names(selection.iter().map(|p| p.problem_id.as_str()));
    if adopted > 0 {
        tracing::info!(
            adopted,
            "files of long problem ids moved to their capped names"
        );
    }
    let to_run = selection
        .iter()
        .filter(|p| {
            let finished = p.status == "done" && p.iterations.is_some_and(|done| done >= t);
            !finished || with_lost_calls.contains(&p.problem_id)
        })
        .map(StoredProblem::problem)
        .collect();
    store
        .write(Fact::Meta(vec![
            // The resumed config becomes the stored one: a later plain `--resume` keeps
            // an extended T (and any operational or forced change).
            (
                META_CONFIG.into(),
                config
                    .to_toml_string()
                    .context("serializing the resumed config")?,
            ),
            (META_PROMPTS.into(), prompts_digest(&prompts)),
            (META_ITERATIONS.into(), t.to_string()),
            (META_STATUS.into(), "running".into()),
        ]))
        .await
        .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
    Ok(Plan {
        config,
        config_source: config_source.unwrap_or_else(|| label.clone()),
        dataset_label: dataset_label.unwrap_or_default(),
        dir,
        store,
        prompts,
        selection,
        to_run,
        resumed: true,
        resend_failed: !keep_failed,
    })
}
