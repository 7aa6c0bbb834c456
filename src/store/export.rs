//! `tmas export`: the store as JSONL (one line per problem) or the Pass@1 table as CSV.
//!
//! Reads through a read-only connection, so it works on a finished run, an interrupted
//! one, or one still running (WAL readers see the last committed state). A problem that
//! is unfinished ([`is_unfinished`]) can be marked `partial` in the output, so a table
//! over the finished problems is never taken for the whole run's.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use anyhow::Context;
use serde_json::{Value, json};

use super::read::{StoreReader, StoredProblem, StoredVerdict};
use super::schema::{META_CONFIG, META_ITERATIONS};
use crate::config::FailedCandidates;
use crate::eval::pass_at_1::pass_at_1_csv;
use crate::eval::pass_at_1::{Coverage, PassAt1Builder, PassAt1Table};

use crate::record::ProblemRecord;

/// The Pass@1 table over the judged records of a selection of problems and the judged
/// iterations of its unfinished ones (`judged`), each row over the problems that have its
/// iteration judged ([`coverage`]). `records` may be read one at a time (the first error
/// stops the table); a record of an unfinished problem (done to a smaller T before the run
/// was extended) is skipped, `judged` holding its iterations.
pub fn pass_at_1_table<R: Borrow<ProblemRecord>>(
    problems: &[StoredProblem],
    records: impl IntoIterator<Item = anyhow::Result<R>>,
    judged: &JudgedSoFar,
    iterations: usize,
    failed: FailedCandidates,
) -> anyhow::Result<PassAt1Table> {
    let mut builder = table_builder(problems, iterations, failed, judged);
    for record in records {
        let record = record?;
        let record = record.borrow();
        if builder.is_unfinished(&record.problem_id) {
            continue;
        }
        for (t, candidates) in record.judgments.iter().enumerate() {
            if !builder.covers(&record.problem_id, t) {
                continue;
            }
            for judged in candidates {
                builder.record_candidate(&record.problem_id, t, judged.as_ref())?;
            }
        }
    }
    judged.add_to(&mut builder)?;
    Ok(builder.build())
}

/// What the store holds of the unfinished problems' judged iterations (each iteration's
/// rows are stored as soon as it is judged): by problem, by iteration, each candidate's
/// verdict (`None`: its solution call failed).
#[derive(Debug, Clone, Default)]
pub struct JudgedSoFar {
    by_problem: HashMap<String, BTreeMap<u32, Vec<Option<StoredVerdict>>>>,
    /// The run grades proofs with the LLM grader: a verdict without an answer is a graded
    /// proof, not "no answer".
    proofs_graded: bool,
}

impl JudgedSoFar {
    /// Reads the judged iterations of every unfinished problem of `problems` (neither
    /// failed nor done to the run's `iterations`).
    pub fn read(
        reader: &StoreReader,
        problems: &[StoredProblem],
        iterations: usize,
    ) -> anyhow::Result<Self> {
        let mut by_problem = HashMap::new();
        for p in problems.iter().filter(|p| is_unfinished(p, iterations)) {
            let judged = reader.judged_iterations(&p.problem_id)?;
            if !judged.is_empty() {
                by_problem.insert(p.problem_id.clone(), judged);
            }
        }
        Ok(Self {
            by_problem,
            proofs_graded: stored_proofs_graded(reader)?,
        })
    }

    /// The iterations of `problem` judged so far (below `iterations`).
    fn iterations_of(&self, problem: &str, iterations: usize) -> Vec<usize> {
        self.by_problem.get(problem).map_or_else(Vec::new, |by| {
            by.keys()
                .map(|&t| t as usize)
                .filter(|&t| t < iterations)
                .collect()
        })
    }

    /// Adds every judged iteration the builder covers to it.
    pub fn add_to(&self, builder: &mut PassAt1Builder) -> anyhow::Result<()> {
        for (problem, by_iteration) in &self.by_problem {
            for (&t, candidates) in by_iteration {
                let t = t as usize;
                if !builder.covers(problem, t) {
                    continue;
                }
                for verdict in candidates {
                    let Some(v) = verdict else {
                        builder.record_failed(problem, t)?;
                        continue;
                    };
                    builder.record_score(problem, t, v.score, v.undecided, v.disagreement)?;
                    // As `JudgeRecord::is_no_answer` says of the whole record.
                    if !v.has_answer && !self.proofs_graded && v.score == 0.0 {
                        builder.record_no_answer(problem, t)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Failed calls per iteration over the whole store.
pub fn lost_by_iteration(reader: &StoreReader, iterations: usize) -> anyhow::Result<Vec<u64>> {
    let mut out = vec![0; iterations];
    for row in reader.lost_calls()? {
        if let Some(slot) = out.get_mut(row.iteration as usize) {
            *slot += row.calls;
        }
    }
    Ok(out)
}

/// Whether `problem` has not finished: neither failed nor done to the run's `iterations`
/// (pending, running, interrupted, or done to a smaller T before the run was extended). A
/// problem without a reference answer (a request `tmas serve` recorded) ran the T its
/// request asked for, so once done it is finished whatever the store's largest T.
pub fn is_unfinished(problem: &StoredProblem, iterations: usize) -> bool {
    match problem.status.as_str() {
        "failed" => false,
        "done" => {
            problem.has_reference()
                && problem
                    .iterations
                    .is_some_and(|t| (t as usize) < iterations)
        }
        _ => true,
    }
}

/// Which of the run's `iterations` the Pass@1 table counts for `problem`: all once it is
/// done or failed (a failed problem scores 0 in each); while it is unfinished, the
/// iterations judged so far (`judged`; a problem done to a smaller T' before the run was
/// extended has its first T' judged, and any of the extension judged since).
pub fn coverage(problem: &StoredProblem, iterations: usize, judged: &JudgedSoFar) -> Coverage {
    if !is_unfinished(problem, iterations) {
        return Coverage::All;
    }
    let mut its = judged.iterations_of(&problem.problem_id, iterations);
    if problem.status == "done"
        && let Some(t) = problem.iterations
    {
        // Its rows are there too; this only keeps an iteration without candidates.
        its.extend(0..t as usize);
    }
    its.sort_unstable();
    its.dedup();
    Coverage::Judged(its)
}

/// A Pass@1 table builder for the run's `problems`, each with its [`coverage`], counting
/// failed candidates by `failed`. A problem without a reference answer (a request `tmas
/// serve` recorded) is not in it: it was not judged, and scoring it 0 would be a figure
/// about nothing.
pub fn table_builder(
    problems: &[StoredProblem],
    iterations: usize,
    failed: FailedCandidates,
    judged: &JudgedSoFar,
) -> PassAt1Builder {
    PassAt1Builder::with_coverage(
        problems
            .iter()
            .filter(|p| p.has_reference())
            .map(|p| (p.problem_id.clone(), coverage(p, iterations, judged))),
        iterations,
    )
    .counting_failed(failed)
}

/// Whether the stored run grades proofs with the LLM grader (`method.no_proof = false`
/// with `judge.enabled`): its verdicts have grades instead of answers.
pub fn stored_proofs_graded(reader: &StoreReader) -> anyhow::Result<bool> {
    let Some(text) = reader.meta(META_CONFIG)? else {
        return Ok(false);
    };
    let value: toml::Value = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the run store's meta `{META_CONFIG}` is not TOML: {e}"))?;
    let flag = |table: &str, key: &str, default: bool| {
        value
            .get(table)
            .and_then(|t| t.get(key))
            .and_then(toml::Value::as_bool)
            .unwrap_or(default)
    };
    Ok(flag("judge", "enabled", false) && !flag("method", "no_proof", true))
}

/// How the stored run counts candidates whose solution call failed (`[judge]
/// failed_candidates` of its stored config; the default without one).
pub fn stored_failed_candidates(reader: &StoreReader) -> anyhow::Result<FailedCandidates> {
    match reader.meta(META_CONFIG)? {
        None => Ok(FailedCandidates::default()),
        Some(text) => FailedCandidates::of_config_toml(&text)
            .map_err(|e| anyhow::anyhow!("the run store's meta `{META_CONFIG}`: {e}")),
    }
}

/// The ids of the run's unfinished problems, in dataset order, and how many problems the
/// run has.
pub fn unfinished_problems(reader: &StoreReader) -> anyhow::Result<(Vec<String>, usize)> {
    let iterations = stored_iterations(reader)?;
    let problems = reader.problems()?;
    let unfinished = problems
        .iter()
        .filter(|p| is_unfinished(p, iterations))
        .map(|p| p.problem_id.clone())
        .collect();
    Ok((unfinished, problems.len()))
}

pub fn stored_iterations(reader: &StoreReader) -> anyhow::Result<usize> {
    let text = reader
        .meta(META_ITERATIONS)?
        .context("the run store has no `iterations` entry in meta")?;
    text.parse()
        .with_context(|| format!("meta `iterations` = {text:?} is not a number"))
}

/// One JSON object per problem, in the one schema of "a line per problem"
/// (docs/run-store.md): the fields of a `results.jsonl` line — `problem_id`, `question`,
/// `reference_answer`, `outcome` (iterations, candidates, stop reason, final banks, call
/// counts) and `judgments[iteration][candidate]` — for a problem without a record
/// `outcome` null and `judgments` empty; and three fields `results.jsonl` leaves out
/// because every line there is a done problem: `status`, `error` and `final_banks` (bank →
/// items, from the store, so also for a problem that did not finish).
pub fn problem_line(
    reader: &StoreReader,
    problem: &StoredProblem,
    record: Option<&ProblemRecord>,
) -> anyhow::Result<Value> {
    let mut line = match record {
        Some(record) => serde_json::to_value(record)?,
        None => json!({
            "problem_id": problem.problem_id,
            "question": problem.question,
            "reference_answer": problem.reference_answer,
            "outcome": null,
            "judgments": [],
        }),
    };
    line["status"] = json!(problem.status);
    line["error"] = json!(problem.error);
    line["final_banks"] = serde_json::to_value(reader.final_banks(&problem.problem_id)?)?;
    Ok(line)
}

/// Writes the JSONL export, reading one problem's record at a time (a run's records
/// together are ~1.9 MB per problem at T = 5 with 40 KB solutions). With `mark_partial`,
/// an unfinished problem's `status` is `partial`.
pub fn write_jsonl(
    reader: &StoreReader,
    out: &mut dyn Write,
    mark_partial: bool,
) -> anyhow::Result<()> {
    let iterations = if mark_partial {
        stored_iterations(reader)?
    } else {
        0
    };
    for problem in &reader.problems()? {
        let record = reader.done_record(&problem.problem_id)?;
        let mut line = problem_line(reader, problem, record.as_ref())?;
        if mark_partial && is_unfinished(problem, iterations) {
            line["status"] = json!("partial");
            // The iterations judged since its record (all of them without one).
            let from = record.as_ref().map_or(0, |r| r.judgments.len() as u32);
            line["judged_iterations"] =
                json!(reader.judged_iteration_rows(&problem.problem_id, from)?);
        }
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The per-iteration Pass@1 table of the whole store, each row over the problems that
/// have its iteration judged, with the calls lost per iteration; one record in memory at a
/// time, read without its texts (the table needs only the verdicts).
pub fn stored_table(reader: &StoreReader) -> anyhow::Result<PassAt1Table> {
    let problems = reader.problems()?;
    let iterations = stored_iterations(reader)?;
    let records = problems.iter().filter_map(|p| {
        reader
            .done_record_without_texts(&p.problem_id)
            .map_err(anyhow::Error::from)
            .transpose()
    });
    let failed = stored_failed_candidates(reader)?;
    let judged = JudgedSoFar::read(reader, &problems, iterations)?;
    let mut table = pass_at_1_table(&problems, records, &judged, iterations, failed)?;
    table.set_calls_lost(&lost_by_iteration(reader, iterations)?);
    Ok(table)
}

/// Writes the per-iteration Pass@1 table as CSV ([`stored_table`]). With `mark_partial`
/// and unfinished problems, each row gets a last column `status` saying `partial` (each
/// row covers only the problems that have its iteration judged).
pub fn write_csv(
    reader: &StoreReader,
    out: &mut dyn Write,
    mark_partial: bool,
) -> anyhow::Result<()> {
    let table = stored_table(reader)?;
    let csv = pass_at_1_csv(&table);
    if mark_partial && !unfinished_problems(reader)?.0.is_empty() {
        for (i, line) in csv.lines().enumerate() {
            let status = if i == 0 { "status" } else { "partial" };
            writeln!(out, "{line},{status}")?;
        }
    } else {
        out.write_all(csv.as_bytes())?;
    }
    Ok(())
}
