//! Finished problems: judged, stored, written — and the run's outputs rebuilt from the
//! store at the end, so they are the same whether the run went through in one go or was
//! resumed several times.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::mpsc;

use crate::eval::dataset::Problem;
use crate::eval::pass_at_1::PassAt1Table;
use crate::method::TmasOutcome;
use crate::store::executor::TaintView;
use crate::store::export::pass_at_1_table;
use crate::store::{Fact, RunStore, StatusRow};

use super::judging::JudgeSetup;
use super::run_dir::RoleUsage;
use super::run_dir::{FailedProblem, ProblemRecord, RunDir};

/// A finished problem as the runner reports it.
pub type Finished = (String, Result<TmasOutcome, String>);

/// What the writer did in this process.
pub struct Written {
    pub done: usize,
    pub failed: Vec<FailedProblem>,
    /// Problems left unstored because a call of theirs was refused by the shutdown.
    pub interrupted: usize,
}

/// Everything the writer task needs.
pub struct ResultWriter {
    pub problems: Arc<HashMap<String, Problem>>,
    pub judge: JudgeSetup,
    pub dir: RunDir,
    pub store: RunStore,
    pub taint: TaintView,
    /// T the problems run with (recorded with each done problem).
    pub iterations: u32,
}

impl ResultWriter {
    /// Judges and stores each finished problem as it arrives, until `rx` closes.
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Finished>) -> anyhow::Result<Written> {
        let mut written = Written {
            done: 0,
            failed: Vec::new(),
            interrupted: 0,
        };
        let mut judging = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                next = rx.recv() => {
                    let Some((id, result)) = next else { break };
                    self.on_finished(id, result, &mut judging, &mut written)?;
                }
                Some(joined) = judging.join_next(), if !judging.is_empty() => {
                    self.store_record(joined.context("judging task panicked")?, &mut written).await?;
                }
            }
        }
        while let Some(joined) = judging.join_next().await {
            self.store_record(joined.context("judging task panicked")?, &mut written)
                .await?;
        }
        Ok(written)
    }

    fn on_finished(
        &self,
        id: String,
        result: Result<TmasOutcome, String>,
        judging: &mut tokio::task::JoinSet<ProblemRecord>,
        written: &mut Written,
    ) -> anyhow::Result<()> {
        if self.taint.contains(&id) {
            // Some of its calls were refused by the shutdown: its result is incomplete.
            written.interrupted += 1;
            return Ok(());
        }
        match result {
            Err(error) => {
                tracing::error!(problem = %id, "problem failed: {error}");
                self.store.send(Fact::Status(StatusRow {
                    problem_id: id.clone(),
                    status: "failed",
                    error: Some(error.clone()),
                }));
                written.failed.push(FailedProblem {
                    problem_id: id,
                    error,
                });
            }
            Ok(outcome) => {
                let problem = self
                    .problems
                    .get(&id)
                    .cloned()
                    .with_context(|| format!("runner reported unknown problem {id}"))?;
                let judge = self.judge.clone();
                judging.spawn(async move {
                    let judgments = judge
                        .judge_outcome(&problem.question, &problem.answer, &outcome)
                        .await;
                    ProblemRecord {
                        problem_id: problem.id,
                        question: problem.question,
                        reference_answer: problem.answer,
                        outcome,
                        judgments,
                    }
                });
            }
        }
        Ok(())
    }

    async fn store_record(
        &self,
        record: ProblemRecord,
        written: &mut Written,
    ) -> anyhow::Result<()> {
        if self.taint.contains(&record.problem_id) {
            written.interrupted += 1;
            return Ok(());
        }
        let fact = Fact::Done {
            record: Box::new(record.clone()),
            iterations: self.iterations,
        };
        if let Err(e) = self.store.write(fact).await {
            // The store failure stops the run; the problem stays pending for resume.
            tracing::error!(problem = %record.problem_id, error = %e, "problem result not stored");
            written.interrupted += 1;
            return Ok(());
        }
        self.dir.write_problem(&record)?;
        super::observe::on_problem_judged(&record); // issue 5: Pass@1 gauge
        written.done += 1;
        Ok(())
    }
}

/// The run's outputs as stored: Pass@1 over every done problem, problem counts, usage.
pub struct StoredOutputs {
    pub table: PassAt1Table,
    pub problems_total: usize,
    pub problems_done: usize,
    pub problems_failed: Vec<FailedProblem>,
    pub usage_by_role: BTreeMap<String, RoleUsage>,
}

/// Rewrites `results.jsonl`, `problems/*.json` and `pass_at_1.*` from the store.
pub async fn rebuild_outputs(
    store: &RunStore,
    dir: &RunDir,
    iterations: u32,
) -> anyhow::Result<StoredOutputs> {
    let (problems, records, usage) = store
        .read(|r| Ok((r.problems()?, r.records()?, r.usage_by_role()?)))
        .await?;
    let table = pass_at_1_table(&problems, &records, iterations as usize)?;
    dir.write_pass_at_1(&table)?;
    dir.rewrite_results(&records)?;
    let problems_failed = problems
        .iter()
        .filter(|p| p.status == "failed")
        .map(|p| FailedProblem {
            problem_id: p.problem_id.clone(),
            error: p.error.clone().unwrap_or_default(),
        })
        .collect();
    let usage_by_role = usage
        .into_iter()
        .map(|u| {
            let usage = RoleUsage {
                calls: u.calls,
                failed: u.failed,
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            };
            (u.role, usage)
        })
        .collect();
    Ok(StoredOutputs {
        table,
        problems_total: problems.len(),
        problems_done: records.len(),
        problems_failed,
        usage_by_role,
    })
}
