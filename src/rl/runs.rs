//! Reading stored runs for Hybrid-RL: every candidate instance a run offers
//! ([`super::data::problem_instances`] over its finished problems), with the run's own
//! templates and parameters. Read-only, so a run may still be going.

use std::path::Path;

use anyhow::Context;

use super::data::{self, Instance, RunSource};
use crate::config::Config;
use crate::method::PromptSet;
use crate::store::schema::{META_CONFIG, META_DATASET, META_STATUS};
use crate::store::{DB_FILE, StoreReader};

/// What one run contributed.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run: String,
    /// `meta.status` (`running` / `interrupted` / `completed`).
    pub status: String,
    pub done: usize,
    /// Problems without a finished record (skipped).
    pub not_done: usize,
    /// Finished problems without a reference answer (requests `tmas serve` recorded):
    /// skipped, since a reward needs the ground truth.
    pub unreferenced: usize,
    pub instances: usize,
}

/// Every candidate instance of the run in `dir`.
pub fn run_instances(dir: &Path) -> anyhow::Result<(Vec<Instance>, RunReport)> {
    let reader = StoreReader::open_read_only(&dir.join(DB_FILE))?;
    let label = format!("stored config of {}", dir.display());
    let config_text = reader
        .meta(META_CONFIG)?
        .with_context(|| format!("{}: the run store holds no config", dir.display()))?;
    let config = Config::from_toml_str(&config_text, &label)
        .map_err(|e| anyhow::anyhow!("{label} does not load with this tmas: {e}"))?;
    let prompts = PromptSet::load(&config.prompt_overrides()).with_context(|| {
        format!(
            "{}: loading the run's prompt templates (its overrides must still be readable)",
            dir.display()
        )
    })?;
    let params = config.tmas_params();
    let dataset = reader
        .meta(META_DATASET)?
        .unwrap_or_else(|| "unknown".into());
    let data_source = format!("tmas:{dataset}");
    let run = dir.display().to_string();
    let src = RunSource {
        run: &run,
        data_source: &data_source,
        prompts: &prompts,
        params: &params,
    };
    let problems = reader.problems()?;
    let mut out = Vec::new();
    let mut done = 0;
    let mut unreferenced = 0;
    for problem in &problems {
        if !problem.has_reference() {
            // No ground truth: an instance of it could not be rewarded.
            if problem.status == "done" {
                unreferenced += 1;
            }
            continue;
        }
        let Some(record) = reader.done_record(&problem.problem_id)? else {
            continue;
        };
        done += 1;
        let banks = reader.bank_versions(&problem.problem_id)?;
        out.extend(data::problem_instances(&src, &record, &banks));
    }
    let report = RunReport {
        status: reader
            .meta(META_STATUS)?
            .unwrap_or_else(|| "unknown".into()),
        done,
        not_done: problems.len() - done - unreferenced,
        unreferenced,
        instances: out.len(),
        run,
    };
    Ok((out, report))
}
