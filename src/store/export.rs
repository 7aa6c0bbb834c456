//! `tmas export`: the store as JSONL (one line per problem) or the Pass@1 table as CSV.
//!
//! Reads through a read-only connection, so it works on a finished run, an interrupted
//! one, or one still running (WAL readers see the last committed state). A problem that
//! is unfinished ([`is_unfinished`]) can be marked `partial` in the output, so a table
//! over the finished problems is never taken for the whole run's.

use std::borrow::Borrow;
use std::io::Write;

use anyhow::Context;
use serde_json::{Value, json};

use super::read::{StoreReader, StoredProblem};
use super::schema::{META_CONFIG, META_ITERATIONS};
use crate::config::FailedCandidates;
use crate::eval::pass_at_1::pass_at_1_csv;
use crate::eval::pass_at_1::{Coverage, PassAt1Builder, PassAt1Table};
use crate::record::ProblemRecord;

/// The Pass@1 table over the judged records of a selection of problems, each row over
/// the problems that finished its iteration ([`coverage`]). `records` may be read one at
/// a time (the first error stops the table).
pub fn pass_at_1_table<R: Borrow<ProblemRecord>>(
    problems: &[StoredProblem],
    records: impl IntoIterator<Item = anyhow::Result<R>>,
    iterations: usize,
    failed: FailedCandidates,
) -> anyhow::Result<PassAt1Table> {
    let mut builder = table_builder(problems, iterations, failed);
    for record in records {
        let record = record?;
        let record = record.borrow();
        let covered = builder.covered_iterations(&record.problem_id);
        for (t, candidates) in record.judgments.iter().enumerate().take(covered) {
            for judged in candidates {
                builder.record_candidate(&record.problem_id, t, judged.as_ref())?;
            }
        }
    }
    Ok(builder.build())
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
/// (pending, running, interrupted, or done to a smaller T before the run was extended).
pub fn is_unfinished(problem: &StoredProblem, iterations: usize) -> bool {
    coverage(problem, iterations) != Coverage::All
}

/// Which of the run's `iterations` the Pass@1 table counts for `problem`: all once it is
/// done or failed (a failed problem scores 0 in each), the first T' when it was done to a
/// smaller T' before the run was extended, none while it is unfinished. A problem without
/// a reference answer (a request `tmas serve` recorded) ran the T its request asked for, so
/// once done it is finished whatever the store's largest T.
pub fn coverage(problem: &StoredProblem, iterations: usize) -> Coverage {
    match problem.status.as_str() {
        "failed" => Coverage::All,
        "done" => match problem.iterations {
            Some(t) if (t as usize) < iterations && problem.has_reference() => {
                Coverage::First(t as usize)
            }
            _ => Coverage::All,
        },
        _ => Coverage::Unfinished,
    }
}

/// A Pass@1 table builder for the run's `problems`, each with its [`coverage`], counting
/// failed candidates by `failed`. A problem without a reference answer (a request `tmas
/// serve` recorded) is not in it: it was not judged, and scoring it 0 would be a figure
/// about nothing.
pub fn table_builder(
    problems: &[StoredProblem],
    iterations: usize,
    failed: FailedCandidates,
) -> PassAt1Builder {
    PassAt1Builder::with_coverage(
        problems
            .iter()
            .filter(|p| p.has_reference())
            .map(|p| (p.problem_id.clone(), coverage(p, iterations))),
        iterations,
    )
    .counting_failed(failed)
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
        }
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The per-iteration Pass@1 table of the whole store, each row over the problems that
/// finished its iteration, with the calls lost per iteration; one record in memory at a
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
    let mut table = pass_at_1_table(&problems, records, iterations, failed)?;
    table.set_calls_lost(&lost_by_iteration(reader, iterations)?);
    Ok(table)
}

/// Writes the per-iteration Pass@1 table as CSV ([`stored_table`]). With `mark_partial`
/// and unfinished problems, each row gets a last column `status` saying `partial` (each
/// row covers only the problems that finished its iteration).
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
