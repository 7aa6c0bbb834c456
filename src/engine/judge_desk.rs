//! Judging as the run goes: each iteration is judged as soon as the strategy completes it
//! (its candidates' final answers are known), while its texts are still in memory, beside
//! the method's later iterations. Each judged iteration's candidate and verdict rows are
//! stored at once ([`Fact::Judged`]), so a run stopped before the problem is done keeps
//! them. The result writer then only collects a finished problem's judgments
//! ([`JudgeDesk::take`]).
//!
//! Verdicts never reach the method: the desk is an [`IterationWatcher`], which only
//! looks, so the method's calls, answers and outcome are the same as without it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::eval::dataset::Problem;
use crate::eval::judge::JudgeRecord;
use crate::method::{IterationResult, IterationWatcher, ProblemInput, TmasOutcome};

use crate::store::rows::{CandidateRow, JudgedIterationRows};
use crate::store::{Fact, RunStore};

use super::judging::{Candidates, JudgeReuse, JudgeSetup};

/// One iteration's judgments (`[candidate]`), being made.
type Judging = JoinHandle<Vec<Option<JudgeRecord>>>;

/// Each problem's iterations being judged, by iteration number.
type ByProblem = HashMap<Arc<str>, Vec<(u32, Judging)>>;

/// See the module documentation.
pub struct JudgeDesk {
    setup: JudgeSetup,
    /// The questions asked so far, so each is asked once (`judge.reuse`).
    asked: Arc<JudgeReuse>,
    problems: HashMap<Arc<str>, Arc<Problem>>,
    /// Where each judged iteration's rows go.
    store: RunStore,
    runtime: Handle,
    /// Iterations being judged or judged, by problem, until the writer takes them.
    pending: Mutex<ByProblem>,
    /// The judging of problems that will not be stored, let finish ([`JudgeDesk::settle`]).
    discarded: Mutex<Vec<Judging>>,
}

impl JudgeDesk {
    /// A desk judging `problems`' iterations with `setup`, on the current runtime, and
    /// storing each judged iteration in `store`; `asked` knows the judge calls earlier
    /// sessions stored.
    pub fn new(
        setup: JudgeSetup,
        asked: JudgeReuse,
        problems: impl IntoIterator<Item = Problem>,
        store: RunStore,
    ) -> Self {
        Self {
            setup,
            asked: Arc::new(asked),
            problems: problems
                .into_iter()
                .map(|p| (Arc::from(p.id.as_str()), Arc::new(p)))
                .collect(),
            store,
            runtime: Handle::current(),
            pending: Mutex::default(),
            discarded: Mutex::default(),
        }
    }

    pub fn setup(&self) -> &JudgeSetup {
        &self.setup
    }

    /// Judges one iteration now (one the desk was not told of; its texts must be there).
    pub async fn judge_now(
        &self,
        problem: &Problem,
        it: &IterationResult,
    ) -> Vec<Option<JudgeRecord>> {
        self.setup
            .judge_candidates(problem, &Candidates::of(it), &self.asked)
            .await
            .judgments
    }

    /// Forgets the questions of `problem` once it is judged and stored.
    pub fn forget(&self, problem: &str) {
        self.asked.forget(problem);
    }

    /// A finished problem's iterations being judged ([`Taken::judgments`]).
    pub fn take(&self, problem: &str) -> Taken {
        let judging = self.lock().remove(problem).unwrap_or_default();
        Taken(judging)
    }

    /// Sets aside a problem that will not be stored (failed, or interrupted): its
    /// iterations' judging goes on, so their judge calls are stored and a resume replays
    /// them instead of sending them again.
    pub fn discard(&self, problem: &str) {
        let judging = self.lock().remove(problem).unwrap_or_default();
        self.discarded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(judging.into_iter().map(|(_, handle)| handle));
    }

    /// Waits until the judging of every problem set aside, and of every problem the run
    /// left without a result (stopped before it reported), has ended, so that each
    /// iteration judged is stored before the store closes (the run's end waits for it as
    /// for its writer; after a stop, the judge's executor cuts what is left when the grace
    /// period is over).
    pub async fn settle(&self) {
        let mut judging =
            std::mem::take(&mut *self.discarded.lock().unwrap_or_else(|p| p.into_inner()));
        judging.extend(
            std::mem::take(&mut *self.lock())
                .into_values()
                .flatten()
                .map(|(_, handle)| handle),
        );
        for handle in judging {
            let _ = handle.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByProblem> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A finished problem's iterations being judged, taken from the desk.
pub struct Taken(Vec<(u32, Judging)>);

impl Taken {
    /// The judgments of every iteration of `outcome` (the finished problem), in record
    /// order: those judged as they completed, awaited; an iteration the desk was not told
    /// of, or whose judging task ended without judgments, is `None` (the caller judges it
    /// from the outcome).
    pub async fn judgments(self, outcome: &TmasOutcome) -> Vec<Option<Vec<Option<JudgeRecord>>>> {
        let mut by_iteration: HashMap<u32, Judging> = self.0.into_iter().collect();
        let mut out = Vec::with_capacity(outcome.iterations.len());
        for it in &outcome.iterations {
            let judged = match by_iteration.remove(&it.iteration) {
                Some(handle) => match handle.await {
                    Ok(judgments) if judgments.len() == it.candidates.len() => Some(judgments),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!(problem = %outcome.problem.id, iteration = it.iteration, "judging task ended without judgments ({e}); judging again");
                        None
                    }
                },
                None => None,
            };
            out.push(judged);
        }
        out
    }
}

impl IterationWatcher for JudgeDesk {
    fn iteration_done(&self, problem: &ProblemInput, iteration: &IterationResult) {
        let Some(p) = self.problems.get(&problem.id).cloned() else {
            return;
        };
        let candidates = Candidates::of(iteration);
        // An iteration a stop cut short (a call refused) is judged, so its judge calls are
        // stored for the resume, but not stored as judged: the resume completes it.
        let rows: Option<Vec<CandidateRow>> = (!iteration.cut_by_stop())
            .then(|| iteration.candidates.iter().map(CandidateRow::of).collect());
        let (setup, asked, store) = (self.setup.clone(), self.asked.clone(), self.store.clone());
        // Under a `judging` child of the problem's span: the judge's calls are in the
        // problem's trace.
        let span = tmas_actors::coordinator::current_problem_span().map_or_else(
            tracing::Span::none,
            |problem| tracing::info_span!(parent: &problem, "judging"),
        );
        let handle = self.runtime.spawn(tracing::Instrument::instrument(
            async move {
                let judged = setup.judge_candidates(&p, &candidates, &asked).await;
                // Queued before the judgments are handed on: the writer commits facts in
                // order, so these rows never land after the problem's `Done` record. An
                // iteration whose judging the stop cut is not stored as judged.
                if let Some(rows) = rows
                    && !judged.cut
                {
                    store.send(Fact::Judged(Box::new(JudgedIterationRows {
                        problem_id: p.id.as_str().into(),
                        iteration: candidates.iteration,
                        candidates: rows,
                        judgments: judged.judgments.clone(),
                    })));
                }
                judged.judgments
            },
            span,
        ));
        self.lock()
            .entry(problem.id.clone())
            .or_default()
            .push((iteration.iteration, handle));
    }
}
