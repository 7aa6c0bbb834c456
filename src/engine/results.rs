//! Finished problems: judged, encoded once, stored, written. The run's outputs are
//! assembled at the end by [`super::outputs`] from what this module remembers of each
//! problem it wrote ([`WrittenOutputs`]) and, for problems finished by earlier processes,
//! from the store.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::eval::dataset::Problem;
use crate::eval::judge::JudgeRecord;
use crate::method::TmasOutcome;
use crate::store::executor::{StaleFailures, TaintView};
use crate::store::{Fact, RunStore, StatusRow};

use super::judge_desk::JudgeDesk;
use super::observe::PassAt1Gauge;
use super::outputs::{JudgedScores, WrittenOutputs, WrittenProblem};
use super::run_dir::{FailedProblem, ProblemRecord, RunDir};

/// A finished problem as the runner reports it, with its span: it is judged under it, so
/// the judge's calls are in the problem's trace.
pub struct Finished {
    pub problem: String,
    pub result: Result<TmasOutcome, String>,
    pub span: tracing::Span,
}

/// What the writer did in this process.
pub struct Written {
    pub done: usize,
    pub failed: Vec<FailedProblem>,
    /// Problems left unstored because a call of theirs was refused by the shutdown.
    pub interrupted: usize,
    /// What the end of the run needs of each problem stored and written here.
    pub outputs: WrittenOutputs,
}

/// Everything the writer task needs.
pub struct ResultWriter {
    pub problems: Arc<HashMap<String, Problem>>,
    /// Where the problems' iterations are being judged as they complete.
    pub desk: Arc<JudgeDesk>,
    pub dir: RunDir,
    pub store: RunStore,
    pub taint: TaintView,
    /// Failures of earlier sessions a resumed problem did not make again.
    pub stale: StaleFailures,
    /// T the problems run with (recorded with each done problem).
    pub iterations: u32,
    /// The run's Pass@1 estimate, updated with each stored problem.
    pub pass_at_1: Arc<PassAt1Gauge>,
}

/// Most judged problems being encoded, stored and written at once. Storing is a chain of
/// waits (encoding, the store's commit, the file writes); when many problems finish
/// together, as at the end of a run, several chains overlap and the store commits their
/// records in one batch. Each one in flight holds its record and its JSON (~2 × 2 MB with
/// 40 KB solutions), so the bound also caps that memory.
const MAX_STORING: usize = 4;

/// Most problems holding texts read back from the store (`TmasOutcome::released`) at once,
/// from the read (after their judgments are in: iterations are judged as they complete,
/// while the strategy still holds their texts) until their record is stored. When many
/// problems finish together, as at the end of a run, this keeps the texts read back to a
/// few problems' worth (~1.4 MB each at T = 5, N = 8 with 40 KB solutions) instead of
/// every finished problem's.
const MAX_RESTORED: usize = 16;

impl ResultWriter {
    /// Judges and stores each finished problem as it arrives, until `rx` closes.
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Finished>) -> anyhow::Result<Written> {
        let mut written = Written {
            done: 0,
            failed: Vec::new(),
            interrupted: 0,
            outputs: WrittenOutputs::default(),
        };
        let storer = Arc::new(Storer {
            store: self.store.clone(),
            dir: self.dir.clone(),
            taint: self.taint.clone(),
            stale: self.stale.clone(),
            iterations: self.iterations,
            pass_at_1: self.pass_at_1.clone(),
        });
        let restoring = Arc::new(Semaphore::new(MAX_RESTORED));
        let mut judging = JoinSet::new();
        let mut storing = JoinSet::new();
        let mut judged = VecDeque::new();
        let mut receiving = true;
        loop {
            while storing.len() < MAX_STORING
                && let Some((record, permit)) = judged.pop_front()
            {
                let storer = storer.clone();
                storing.spawn(async move {
                    let stored = storer.store(record).await;
                    drop::<Option<OwnedSemaphorePermit>>(permit);
                    stored
                });
            }
            if !receiving && judging.is_empty() && storing.is_empty() {
                break;
            }
            tokio::select! {
                next = rx.recv(), if receiving => match next {
                    Some(finished) => {
                        self.on_finished(finished, &restoring, &mut judging, &mut written)?
                    }
                    None => receiving = false,
                },
                Some(joined) = judging.join_next(), if !judging.is_empty() => {
                    match joined.context("judging task panicked")? {
                        Ok(judged_problem) => judged.push_back(judged_problem),
                        Err((id, error)) => written.failed.push(self.fail(id, error)),
                    }
                }
                Some(joined) = storing.join_next(), if !storing.is_empty() => {
                    match joined.context("storing task panicked")?? {
                        Stored::Written(id, problem) => {
                            written.outputs.insert(id, problem);
                            written.done += 1;
                        }
                        Stored::Unstored => written.interrupted += 1,
                        Stored::Failed(failed) => written.failed.push(failed),
                    }
                }
            }
        }
        Ok(written)
    }

    fn on_finished(
        &self,
        Finished {
            problem: id,
            result,
            span,
        }: Finished,
        restoring: &Arc<Semaphore>,
        judging: &mut JoinSet<Result<Judged, (String, String)>>,
        written: &mut Written,
    ) -> anyhow::Result<()> {
        if self.taint.contains(&id) {
            // Some of its calls were refused by the shutdown: its result is incomplete.
            // The judging of its completed iterations goes on: their judge calls are
            // stored, and a resume replays them.
            self.desk.discard(&id);
            written.interrupted += 1;
            return Ok(());
        }
        match result {
            Err(error) => {
                self.desk.discard(&id);
                written.failed.push(self.fail(id, error));
            }
            Ok(mut outcome) => {
                let problem = self
                    .problems
                    .get(&id)
                    .cloned()
                    .with_context(|| format!("runner reported unknown problem {id}"))?;
                let taken = self.desk.take(&id);
                let desk = self.desk.clone();
                let (store, restoring) = (self.store.clone(), restoring.clone());
                // A child of the problem's span: the judge's calls join the problem's
                // trace instead of each starting one of its own.
                let judging_span = tracing::info_span!(parent: &span, "judging");
                judging.spawn(tracing::Instrument::instrument(
                    async move {
                        let judged = taken.judgments(&outcome).await;
                        let permit = if outcome.released.is_empty() {
                            None
                        } else {
                            let permit = restoring.acquire_owned().await.ok();
                            outcome = restore_released(&store, outcome)
                                .await
                                .map_err(|e| (id.clone(), e))?;
                            permit
                        };
                        let judgments = judge_missing(&desk, &problem, &outcome, judged).await;
                        let record = ProblemRecord {
                            problem_id: problem.id,
                            question: problem.question,
                            reference_answer: problem.answer,
                            outcome,
                            judgments,
                        };
                        Ok((record, permit))
                    },
                    judging_span,
                ));
            }
        }
        Ok(())
    }

    /// Marks a problem the runner or the writer could not finish as failed.
    fn fail(&self, problem_id: String, error: String) -> FailedProblem {
        mark_failed(&self.store, problem_id, error)
    }
}

/// The judgments of every iteration of `outcome`: `judged`'s, and for an iteration the desk
/// did not judge, the judgment made now (the outcome's texts are back by then). Counts the
/// problem as judged and forgets its judge questions.
async fn judge_missing(
    desk: &JudgeDesk,
    problem: &Problem,
    outcome: &TmasOutcome,
    judged: Vec<Option<Vec<Option<JudgeRecord>>>>,
) -> Vec<Vec<Option<JudgeRecord>>> {
    let mut judgments = Vec::with_capacity(judged.len());
    for (it, judged) in outcome.iterations.iter().zip(judged) {
        judgments.push(match judged {
            Some(j) => j,
            None => desk.judge_now(problem, it).await,
        });
    }
    desk.setup()
        .progress
        .problems_judged
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    desk.forget(&problem.id);
    judgments
}

/// Records `problem_id` as failed with `error` (a resume runs it again from its stored
/// calls).
fn mark_failed(store: &RunStore, problem_id: String, error: String) -> FailedProblem {
    tracing::error!(problem = %problem_id, "problem failed: {error}");
    store.send(Fact::Status(StatusRow {
        problem_id: problem_id.clone(),
        status: "failed",
        error: Some(error.clone()),
    }));
    FailedProblem { problem_id, error }
}

/// A judged problem waiting to be stored, with its share of [`MAX_RESTORED`] when its
/// texts were read back.
type Judged = (ProblemRecord, Option<OwnedSemaphorePermit>);

/// `outcome` with the texts the strategy let go of read back from the run store (where
/// every answered reply is). They are replies of iterations finished well before, so the
/// writer has committed them; should one not be there yet, everything queued is committed
/// and the read tried once more. An error names the problem's text and call: the problem
/// is then marked failed, and a resume runs it again from its stored calls.
async fn restore_released(store: &RunStore, outcome: TmasOutcome) -> Result<TmasOutcome, String> {
    let read = |mut outcome: TmasOutcome| {
        store.read(move |reader| {
            let refs = std::mem::take(&mut outcome.released);
            let restored = reader.restore_texts(&mut outcome, &refs);
            outcome.released = refs;
            Ok((outcome, restored))
        })
    };
    let fail =
        |e: &dyn std::fmt::Display| format!("cannot read back its texts from the run store: {e}");
    let (mut outcome, restored) = read(outcome).await.map_err(|e| fail(&e))?;
    if restored.is_err() {
        store.flush().await.map_err(|e| fail(&e))?;
        let (again, restored) = read(outcome).await.map_err(|e| fail(&e))?;
        restored.map_err(|e| fail(&e))?;
        outcome = again;
    }
    outcome.released.clear();
    Ok(outcome)
}

/// How storing one judged problem ended.
enum Stored {
    /// Stored and its files written.
    Written(String, WrittenProblem),
    /// Left unstored (interrupted): the problem stays pending.
    Unstored,
    /// Stored, but its files could not be written: the problem is marked failed (a resume
    /// runs it again from the stored calls and writes them).
    Failed(FailedProblem),
}

/// What storing a judged problem needs, shared by the storing tasks.
struct Storer {
    store: RunStore,
    dir: RunDir,
    taint: TaintView,
    stale: StaleFailures,
    iterations: u32,
    pass_at_1: Arc<PassAt1Gauge>,
}

impl Storer {
    /// Encodes the record once (compact JSON: the `results.jsonl` line and
    /// `problems/<id>.json` are these same bytes, and what the store's reader rebuilds
    /// from `record_json` and the calls it quotes), stores it, then
    /// writes its files. Encoding and file writes run on the blocking pool, off the
    /// runtime's workers. A file that cannot be written fails this problem, not the run.
    async fn store(self: Arc<Self>, record: ProblemRecord) -> anyhow::Result<Stored> {
        if self.taint.contains(&record.problem_id) {
            return Ok(Stored::Unstored);
        }
        let started = std::time::Instant::now();
        let (record, json) = tokio::task::spawn_blocking(move || {
            let json = serde_json::to_string(&record);
            (Arc::new(record), json)
        })
        .await
        .context("encoding task panicked")?;
        let json: Arc<str> = json
            .with_context(|| format!("cannot encode the record of {}", record.problem_id))?
            .into();
        let scores = JudgedScores::of(&record.judgments);
        let json_len = json.len();
        let encoded = started.elapsed();
        let fact = Fact::Done {
            record: record.clone(),
            iterations: self.iterations,
        };
        if let Err(e) = self.store.write(fact).await {
            // The store failure stops the run; the problem stays pending for resume.
            tracing::error!(problem = %record.problem_id, error = %e, "problem result not stored");
            return Ok(Stored::Unstored);
        }
        // After the record is committed: a crash before this leaves the stale failures,
        // which only make the next resume run the problem again.
        let stale = self.stale.take(&record.problem_id);
        if !stale.is_empty() {
            self.store.send(Fact::DropFailedCalls(stale));
        }
        let stored = started.elapsed();
        let (dir, id) = (self.dir.clone(), record.problem_id.clone());
        let line = match tokio::task::spawn_blocking(move || dir.write_problem(&id, &json))
            .await
            .context("problem file task panicked")?
        {
            Ok(line) => line,
            Err(e) => return Ok(Stored::Failed(self.fail(&record.problem_id, &e))),
        };
        tracing::debug!(
            problem = %record.problem_id,
            bytes = json_len,
            encode_ms = encoded.as_millis() as u64,
            store_ms = (stored - encoded).as_millis() as u64,
            files_ms = (started.elapsed() - stored).as_millis() as u64,
            "problem stored and written"
        );
        self.pass_at_1.on_problem_judged(&record);
        Ok(Stored::Written(
            record.problem_id.clone(),
            WrittenProblem { line, scores },
        ))
    }

    /// Marks a stored problem whose files could not be written as failed.
    fn fail(&self, problem_id: &str, error: &anyhow::Error) -> FailedProblem {
        let error = tmas_observability::error_text(error.as_ref());
        mark_failed(&self.store, problem_id.to_owned(), error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::result::{Field, TextRef};
    use crate::store::record_texts::tests::small_record;
    use crate::store::tests::{key, response, row};

    /// A record of problem `p` (iteration 1, candidate 0) whose solution and summary the
    /// strategy let go of, naming the calls `p/it1/solution/c0/a0` and `…/summary/c0/a0`.
    fn released() -> (TmasOutcome, TmasOutcome) {
        let mut kept = small_record("p", "the solution \\boxed{1}", &[], "the summary").outcome;
        kept.iterations[0].iteration = 1;
        let mut lean = kept.clone();
        for (field, role) in [(Field::Solution, "solution"), (Field::Summary, "summary")] {
            let r = TextRef(0, 0, field, key("p", role, Some(0), None).to_string());
            *lean.text_mut(&r).expect("field") = None;
            lean.released.push(r);
        }
        (kept, lean)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn released_texts_are_read_back_even_when_the_writer_has_not_committed_them_yet() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        let (kept, lean) = released();
        for (role, text) in [
            (
                "solution",
                "<think>scratch</think>\n the solution \\boxed{1} \n",
            ),
            ("summary", "the summary"),
        ] {
            // Queued, not awaited: the read may come before the commit.
            store.send(Fact::Call(Box::new(row(
                key("p", role, Some(0), None),
                "prompt".into(),
                Ok(response(text)),
            ))));
        }
        let back = restore_released(&store, lean).await.unwrap();
        assert_eq!(
            back, kept,
            "every text back, think block stripped, none left released"
        );
        store.close().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_released_text_whose_call_is_not_stored_fails_with_the_call_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        let (_, lean) = released();
        let err = restore_released(&store, lean).await.unwrap_err();
        assert!(err.contains("p/it1/solution/c0/a0"), "{err}");
        assert!(err.contains("cannot read back its texts"), "{err}");
        store.close().await.unwrap();
    }
}
