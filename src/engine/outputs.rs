//! The run's outputs at the end: `results.jsonl`, `problems/<id>.json`, `pass_at_1.*` and
//! the counts for `run.json` — the same whether the run went through in one go or was
//! resumed several times.
//!
//! The work is proportional to what is missing, so the end of a large run stays short. A
//! problem stored and written by this process is not read back: its `results.jsonl` line
//! is copied by byte range from the lines appended during the run, its
//! `problems/<id>.json` is already in place, and its Pass@1 contribution comes from the few
//! numbers kept in memory ([`WrittenProblem`], not the record: records are ~1–2 MB each
//! with 40 KB solutions). Only problems finished
//! by an earlier process are read from the store, one at a time.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use crate::eval::judge::JudgeRecord;
use crate::eval::pass_at_1::{PassAt1Builder, PassAt1Error, PassAt1Table};
use crate::store::export::{JudgedSoFar, is_unfinished, stored_failed_candidates, table_builder};
use crate::store::read::{RoleUsageRow, StoredProblem};
use crate::store::{Fact, RunStore, StatusRow, StoreReader};

use super::accounting::{Accounting, JudgeUse};
use super::run_dir::{FailedProblem, LineRange, RoleUsage, RunDir, RunSummaryFile};

/// What the end of the run needs of one problem this process stored and wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenProblem {
    /// Its line in `results.jsonl` as appended during the run.
    pub line: LineRange,
    pub scores: JudgedScores,
}

/// [`WrittenProblem`]s by problem id.
pub type WrittenOutputs = HashMap<String, WrittenProblem>;

/// The judge's numbers of one candidate: what the Pass@1 table reads of a
/// [`JudgeRecord`] (field names as there, so a stored record's `judgments` parse into it).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct CandidateScore {
    pub score: f64,
    pub undecided: bool,
    pub disagreement: bool,
    /// Only whether the candidate had a boxed answer (its text is skipped, not copied).
    #[serde(default)]
    pub answer: Option<serde::de::IgnoredAny>,
    /// Only whether the candidate was graded as a proof (proof mode).
    #[serde(default)]
    pub grades: Option<serde::de::IgnoredAny>,
}

impl CandidateScore {
    /// The verdict "no answer", as [`JudgeRecord::is_no_answer`] says.
    pub fn is_no_answer(&self) -> bool {
        self.answer.is_none() && self.grades.is_none() && self.score == 0.0
    }
}

/// A problem's candidates, per iteration in record order: each judged one's numbers, `None`
/// for a candidate without a judgment (its solution call failed), which the table counts
/// by its [`crate::config::FailedCandidates`] rule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JudgedScores {
    pub by_iteration: Vec<Vec<Option<CandidateScore>>>,
}

/// Only the `judgments` of a stored record (serde skips the rest without allocating).
#[derive(Deserialize)]
struct JudgmentsOnly {
    judgments: Vec<Vec<Option<CandidateScore>>>,
}

impl JudgedScores {
    /// The scores of a record in memory. Each score goes through a JSON round trip so it
    /// is bit for bit the value a parse of the stored record gives (serde_json's default
    /// float parsing may differ from the printed value in the last bit): a table built
    /// from memory then equals one built from the store, resumed or not.
    pub fn of(judgments: &[Vec<Option<JudgeRecord>>]) -> Self {
        let by_iteration = judgments
            .iter()
            .map(|candidates| {
                candidates
                    .iter()
                    .map(|j| {
                        j.as_ref().map(|j| CandidateScore {
                            score: as_stored(j.score),
                            undecided: j.undecided,
                            disagreement: j.disagreement,
                            answer: j.answer.as_ref().map(|_| serde::de::IgnoredAny),
                            grades: (!j.grades.is_empty()).then_some(serde::de::IgnoredAny),
                        })
                    })
                    .collect()
            })
            .collect();
        Self { by_iteration }
    }

    /// The scores of a stored record (`problems.record_json`).
    pub fn parse(record_json: &str) -> serde_json::Result<Self> {
        let only: JudgmentsOnly = serde_json::from_str(record_json)?;
        Ok(Self {
            by_iteration: only.judgments,
        })
    }

    /// Adds the iterations the table covers for the problem to it, as
    /// [`crate::store::export::pass_at_1_table`] does with a whole record (nothing for an
    /// unfinished problem: the table takes its judged iterations from the store).
    pub fn add_to(
        &self,
        builder: &mut PassAt1Builder,
        problem_id: &str,
    ) -> Result<(), PassAt1Error> {
        if builder.is_unfinished(problem_id) {
            return Ok(());
        }
        for (t, candidates) in self.by_iteration.iter().enumerate() {
            if !builder.covers(problem_id, t) {
                continue;
            }
            for c in candidates {
                let Some(c) = c else {
                    builder.record_failed(problem_id, t)?;
                    continue;
                };
                builder.record_score(problem_id, t, c.score, c.undecided, c.disagreement)?;
                if c.is_no_answer() {
                    builder.record_no_answer(problem_id, t)?;
                }
            }
        }
        Ok(())
    }
}

/// `x` after printing and parsing it as JSON (unchanged when it cannot be printed).
fn as_stored(x: f64) -> f64 {
    serde_json::to_string(&x)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(x)
}

/// The run's outputs as stored: Pass@1 over every done problem, problem counts, usage.
pub struct StoredOutputs {
    pub table: PassAt1Table,
    pub problems_total: usize,
    pub problems_done: usize,
    pub problems_failed: Vec<FailedProblem>,
    /// Problems neither done to T nor failed, in dataset order (left for a resume).
    pub unfinished: Vec<String>,
    pub usage_by_role: BTreeMap<String, RoleUsage>,
    /// Lost calls and the problems' states.
    pub accounting: Accounting,
}

impl StoredOutputs {
    /// `run.json` for these outputs: their counts, usage, accounting and final Pass@1, with
    /// what the caller knows (status, config, dataset, T, wall time). `stopped_by` and
    /// `merge` are left empty for the caller that has them.
    pub fn summary(
        &self,
        status: &str,
        config_file: String,
        dataset: String,
        iterations: u32,
        wall_seconds: f64,
    ) -> RunSummaryFile {
        RunSummaryFile {
            status: status.into(),
            config_file,
            dataset,
            problems_total: self.problems_total,
            problems_done: self.problems_done,
            problems_finished: Some(self.problems_total - self.unfinished.len()),
            unfinished: self.table.unfinished.clone(),
            problems_failed: self.accounting.problems_failed.clone(),
            iterations,
            wall_seconds,
            usage_by_role: self.usage_by_role.clone(),
            final_pass_at_1: self.table.final_pass_at_1(),
            accounting: self.accounting.clone(),
            stopped_by: None,
            merge: None,
        }
    }
}

/// Writes `results.jsonl` (each done problem once, in dataset order), the
/// `problems/<id>.json` files this process did not write, and `pass_at_1.*`; returns what
/// `run.json` needs. `written` is what this process's result writer wrote. A problem of an
/// earlier process whose files cannot be written is marked failed (a resume runs it again
/// from the stored calls); the run goes on.
pub async fn rebuild_outputs(
    store: &RunStore,
    dir: &RunDir,
    iterations: u32,
    written: WrittenOutputs,
) -> anyhow::Result<StoredOutputs> {
    let dir = dir.clone();
    let store_path = store.path().to_path_buf();
    // One blocking task over the store's read connection: it interleaves reads of earlier
    // records with file writes, so at most one such record is in memory at a time.
    let (outputs, unwritable) = store
        .read(move |reader| {
            Ok(assemble(
                reader,
                &store_path,
                &dir,
                iterations as usize,
                &written,
            ))
        })
        .await??;
    for failed in unwritable {
        store.send(Fact::Status(StatusRow {
            problem_id: failed.problem_id,
            status: "failed",
            error: Some(failed.error),
        }));
    }
    Ok(outputs)
}

fn assemble(
    reader: &StoreReader,
    store_path: &Path,
    dir: &RunDir,
    iterations: usize,
    written: &WrittenOutputs,
) -> anyhow::Result<(StoredOutputs, Vec<FailedProblem>)> {
    let started = std::time::Instant::now();
    let problems = reader.problems()?;
    let done = reader.done_problem_ids()?;
    let rule = stored_failed_candidates(reader)?;
    let judged = JudgedSoFar::read(reader, &problems, iterations)?;
    let mut builder = table_builder(&problems, iterations, rule, &judged);
    let mut results = dir.begin_results_rewrite()?;
    let mut from_store = 0usize;
    let mut unwritable = Vec::new();
    for id in &done {
        let stored_json = || {
            reader.record_json(id)?.with_context(|| {
                format!("{}: problem `{id}` lost its record", store_path.display())
            })
        };
        let Some(mine) = written.get(id) else {
            // Finished by an earlier process: its files first, so one whose files cannot
            // be written fails alone and stays out of the results.
            let json = stored_json()?;
            let versions = reader.bank_versions(id)?;
            let restored = dir
                .ensure_problem_file(id, &json)
                .and_then(|_| dir.ensure_bank_files(id, &versions));
            if let Err(e) = restored {
                let error = tmas_observability::error_text(e.as_ref());
                tracing::error!(problem = %id, "problem failed: {error}");
                unwritable.push(FailedProblem {
                    problem_id: id.clone(),
                    error,
                });
                continue;
            }
            results.push_json(&json)?;
            from_store += 1;
            JudgedScores::parse(&json)
                .with_context(|| {
                    format!(
                        "{}: problems.record_json of `{id}` is not valid",
                        store_path.display()
                    )
                })?
                .add_to(&mut builder, id)?;
            continue;
        };
        if !results.copy_appended(mine.line)? {
            results.push_json(&stored_json()?)?;
        }
        mine.scores.add_to(&mut builder, id)?;
    }
    results.finish()?;
    judged.add_to(&mut builder)?;
    // A problem whose files could not be written is failed from now on (the store is told
    // by the caller).
    let mut problems = problems;
    for p in &mut problems {
        if let Some(f) = unwritable.iter().find(|f| f.problem_id == p.problem_id) {
            p.status = "failed".into();
            p.error = Some(f.error.clone());
        }
    }
    let mut accounting = Accounting::build(
        &problems,
        &reader.lost_calls()?,
        &reader.answered_calls()?,
        iterations,
    );
    let (calls, verdicts) = reader.judge_use()?;
    accounting.judge = JudgeUse { calls, verdicts };
    let mut table = builder.build();
    table.set_calls_lost(&accounting.lost_by_iteration);
    dir.write_pass_at_1(&table)?;
    tracing::debug!(
        done = done.len(),
        from_store,
        ms = started.elapsed().as_millis() as u64,
        "outputs rebuilt"
    );
    let unfinished = problems
        .iter()
        .filter(|p| is_unfinished(p, iterations))
        .map(|p| p.problem_id.clone())
        .collect();
    Ok((
        StoredOutputs {
            table,
            problems_total: problems.len(),
            problems_done: done.len() - unwritable.len(),
            problems_failed: failed(&problems),
            unfinished,
            usage_by_role: usage(reader.usage_by_role()?),
            accounting,
        },
        unwritable,
    ))
}

fn failed(problems: &[StoredProblem]) -> Vec<FailedProblem> {
    problems
        .iter()
        .filter(|p| p.status == "failed")
        .map(|p| FailedProblem {
            problem_id: p.problem_id.clone(),
            error: p.error.clone().unwrap_or_default(),
        })
        .collect()
}

fn usage(rows: Vec<RoleUsageRow>) -> BTreeMap<String, RoleUsage> {
    rows.into_iter()
        .map(|u| {
            let usage = RoleUsage {
                calls: u.calls,
                failed: u.failed,
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                estimated_calls: u.estimated_calls,
            };
            (u.role, usage)
        })
        .collect()
}

#[cfg(test)]
mod tests;
