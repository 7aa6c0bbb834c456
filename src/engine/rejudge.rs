//! Judging a finished run again (`tmas judge --run DIR`): every candidate of every
//! finished problem goes through the same [`JudgeSetup`] a run uses — the rule check and
//! the LLM judge in answer mode, the proof grader against the stored reference solution
//! and grading guidelines in proof mode — with the judge settings of the given config
//! (repeats, input, policy, endpoint). The run itself is not changed: the new verdicts
//! are returned (and written by the caller) beside the stored ones.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use serde::Serialize;
use tmas_actors::strategy::{CallExecutor, CallKey, CallOutcome};
use tmas_client::wire::ChatRequest;

use super::judging::{JudgeSetup, LlmJudge};
use super::run_dir::ProblemRecord;
use crate::config::{Config, FailedCandidates};
use crate::eval::dataset::Problem;
use crate::eval::judge::JudgeRecord;
use crate::eval::pass_at_1::{PassAt1Builder, PassAt1Table};
use crate::method::PromptSet;
use crate::store::{DB_FILE, StoreReader};

/// One finished problem judged again.
#[derive(Debug, Clone, Serialize)]
pub struct RejudgedProblem {
    pub problem_id: String,
    /// `judgments[iteration][candidate]`, as in `problems/<id>.json`.
    pub judgments: Vec<Vec<Option<JudgeRecord>>>,
}

/// The outcome of judging a run again.
#[derive(Debug, Clone)]
pub struct Rejudged {
    /// Proof grading (the run's `method.no_proof = false`) rather than answer judging.
    pub proof: bool,
    pub problems: Vec<RejudgedProblem>,
    /// Problems of the run left out because they are not finished.
    pub unfinished: usize,
    /// Pass@1 per iteration from the stored verdicts and from the new ones, over the
    /// same (finished) problems.
    pub stored: PassAt1Table,
    pub rejudged: PassAt1Table,
    /// Candidates judged, and those whose score differs from the stored one.
    pub candidates: usize,
    pub changed: usize,
    /// LLM judge / grader calls sent, and those that failed (a failed call gives no
    /// verdict; the candidate is scored as a run scores it then).
    pub calls: u64,
    pub failed_calls: u64,
}

/// Judges every candidate of the finished problems of the run in `run_dir` again, with
/// the judge settings of `config` and its calls sent through `executor`. `proof` is
/// the run's own mode (its `method.no_proof = false`).
pub async fn rejudge(
    run_dir: &Path,
    config: &Config,
    proof: bool,
    prompts: Arc<PromptSet>,
    executor: Arc<dyn CallExecutor>,
) -> anyhow::Result<Rejudged> {
    let (problems, mut records) = {
        let reader = StoreReader::open_read_only(&run_dir.join(DB_FILE))?;
        (reader.problems()?, reader.records()?)
    };
    // A problem without a reference answer (a request `tmas serve` recorded) has nothing
    // to be judged against.
    let finished = records.len();
    records.retain(|r| r.has_reference());
    anyhow::ensure!(
        !records.is_empty(),
        "{}: the run has no finished problem to judge{}",
        run_dir.display(),
        if finished > 0 {
            " (its problems have no reference answer: requests recorded by `tmas serve`)"
        } else {
            ""
        }
    );
    let counting = Counting {
        inner: executor,
        calls: Arc::default(),
        failed: Arc::default(),
    };
    let (calls, failed) = (counting.calls.clone(), counting.failed.clone());
    let setup = JudgeSetup {
        llm: config.judge.enabled.then(|| {
            LlmJudge::of_config(
                config,
                Arc::new(counting),
                prompts,
                config.judge.policy,
                config.judge.input,
            )
        }),
        proof,
        progress: Arc::default(),
    };
    let by_id: std::collections::HashMap<&str, Problem> = problems
        .iter()
        .map(|p| (p.problem_id.as_str(), p.problem()))
        .collect();
    let mut jobs = Vec::with_capacity(records.len());
    for record in &records {
        let problem = by_id.get(record.problem_id.as_str()).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: problem `{}` has a record but no row in `problems`",
                run_dir.display(),
                record.problem_id
            )
        })?;
        jobs.push((problem, record));
    }
    let at_once = config.run.max_concurrent_problems.max(1);
    let judged: Vec<RejudgedProblem> = futures::stream::iter(jobs)
        .map(|(problem, record)| {
            let setup = &setup;
            async move {
                RejudgedProblem {
                    problem_id: record.problem_id.clone(),
                    judgments: setup.judge_outcome(problem, &record.outcome).await,
                }
            }
        })
        .buffered(at_once)
        .collect()
        .await;

    let iterations = records.iter().map(|r| r.judgments.len()).max().unwrap_or(0);
    let rule = config.judge.failed_candidates;
    let stored = table(&records, iterations, rule, |r| &r.judgments)?;
    let rejudged = table(&judged, iterations, rule, |r| &r.judgments)?;
    let (mut candidates, mut changed) = (0, 0);
    for (old, new) in records.iter().zip(&judged) {
        for (old_it, new_it) in old.judgments.iter().zip(&new.judgments) {
            for (a, b) in old_it.iter().zip(new_it) {
                if let (Some(a), Some(b)) = (a, b) {
                    candidates += 1;
                    changed += usize::from(a.score != b.score);
                }
            }
        }
    }
    Ok(Rejudged {
        proof,
        problems: judged,
        unfinished: problems.len() - records.len(),
        stored,
        rejudged,
        candidates,
        changed,
        calls: calls.load(Ordering::Relaxed),
        failed_calls: failed.load(Ordering::Relaxed),
    })
}

/// Pass@1 per iteration of `items` (each problem's `judgments`).
fn table<T>(
    items: &[T],
    iterations: usize,
    failed: FailedCandidates,
    judgments: impl Fn(&T) -> &Vec<Vec<Option<JudgeRecord>>>,
) -> anyhow::Result<PassAt1Table>
where
    T: HasId,
{
    let mut builder = PassAt1Builder::new(items.iter().map(|r| r.id().to_owned()), iterations)
        .counting_failed(failed);
    for item in items {
        for (t, candidates) in judgments(item).iter().enumerate() {
            for judged in candidates {
                builder.record_candidate(item.id(), t, judged.as_ref())?;
            }
        }
    }
    Ok(builder.build())
}

trait HasId {
    fn id(&self) -> &str;
}

impl HasId for ProblemRecord {
    fn id(&self) -> &str {
        &self.problem_id
    }
}

impl HasId for RejudgedProblem {
    fn id(&self) -> &str {
        &self.problem_id
    }
}

/// Counts the calls passing through, and the failed ones.
struct Counting {
    inner: Arc<dyn CallExecutor>,
    calls: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl Counting {
    fn count(
        &self,
        call: futures::future::BoxFuture<'static, CallOutcome>,
    ) -> futures::future::BoxFuture<'static, CallOutcome> {
        let (calls, failed) = (self.calls.clone(), self.failed.clone());
        Box::pin(async move {
            let outcome = call.await;
            calls.fetch_add(1, Ordering::Relaxed);
            if outcome.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
            outcome
        })
    }
}

impl CallExecutor for Counting {
    fn execute(
        &self,
        group: Arc<str>,
        request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome> {
        self.count(self.inner.execute(group, request))
    }

    fn execute_call(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome> {
        self.count(self.inner.execute_call(key, group, request))
    }

    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: tmas_client::wire::EmbeddingRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome> {
        self.count(self.inner.execute_embeddings(key, group, request))
    }
}
