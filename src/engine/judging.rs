//! Judging candidates: the rule check always, the LLM judge (R repeats, role `judge`) when
//! one is configured and the policy asks for it. A run judges each iteration as it
//! completes ([`JudgeSetup::judge_candidates`], each question asked once across the
//! problem's iterations through [`reuse`]); `tmas judge --run` judges a finished problem
//! at once ([`JudgeSetup::judge_outcome`]).

pub mod reuse;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use tmas_actors::strategy::{CallExecutor, CallKey};
use tmas_client::wire::Sampling;

use crate::config::Config;
use crate::eval::dataset::Problem;
use crate::eval::judge::{
    JudgeInput, JudgeRecord, LlmJudgePolicy, judge_request, parse_judge_reply,
};
use crate::method::parse::parse_score;
use crate::method::{IterationResult, PromptSet, TmasOutcome, call_key};
use crate::role::Role;
use crate::store::prompts::id_of_messages;
pub use reuse::{JudgeReuse, Reply};

/// How candidates are judged in a run.
#[derive(Clone)]
pub struct JudgeSetup {
    /// `None`: rule check only.
    pub llm: Option<LlmJudge>,
    /// Proof mode (`method.no_proof = false`): the LLM judge grades each solution as a
    /// proof (0 / 0.5 / 1) against the problem's reference solution and grading
    /// guidelines, instead of comparing final answers.
    pub proof: bool,
    /// What the progress display shows of the judge phase.
    pub progress: Arc<JudgeProgress>,
}

/// Counters of the judge phase, read by the progress display: judging goes on after the
/// last iteration of the last problem, and with an LLM judge it is a good part of a run.
#[derive(Debug, Default)]
pub struct JudgeProgress {
    /// Problems whose every candidate has been judged.
    pub problems_judged: AtomicU64,
    /// Iterations whose every candidate has been judged (a run judges each as it
    /// completes, so this moves while the method runs).
    pub iterations_judged: AtomicU64,
    /// LLM judge calls made (answered, failed or replayed; a run counts each as it is
    /// asked).
    pub calls_done: AtomicU64,
    /// Verdicts given to a candidate from a question another candidate of the problem
    /// asked (`judge.reuse`): calls not sent.
    pub verdicts_reused: AtomicU64,
}

/// The LLM judge: where its calls go and how often each candidate is asked.
#[derive(Clone)]
pub struct LlmJudge {
    pub executor: Arc<dyn CallExecutor>,
    pub group: Arc<str>,
    pub sampling: Sampling,
    pub repeats: usize,
    pub policy: LlmJudgePolicy,
    /// What the judge is shown of a candidate (boxed answer, or the solution's end).
    pub input: JudgeInput,
    pub prompts: Arc<PromptSet>,
    /// Ask each distinct question of a problem once (R times), not each candidate.
    pub reuse: bool,
}

impl LlmJudge {
    /// The judge `config` describes: role `judge`'s client group and sampling,
    /// `judge.repeats` asks per candidate (at least one), calling through `executor`.
    pub fn of_config(
        config: &Config,
        executor: Arc<dyn CallExecutor>,
        prompts: Arc<PromptSet>,
        policy: LlmJudgePolicy,
        input: JudgeInput,
    ) -> Self {
        Self {
            executor,
            group: Config::client_group(Role::Judge).into(),
            sampling: config.role(Role::Judge).sampling(),
            repeats: (config.judge.repeats as usize).max(1),
            policy,
            input,
            prompts,
            reuse: config.judge.reuse,
        }
    }
}

impl JudgeSetup {
    /// Judges every candidate of every iteration of `outcome` against `reference`.
    /// Returns `judgments[iteration][candidate]` (`None` where the solution call failed).
    ///
    /// With `judge.reuse` (the default) each distinct question of the problem — the same
    /// rendered prompt — is sent R times, under the call keys of the first candidate that
    /// asks it (iterations in order, candidates by index: the same on every resume, so a
    /// resumed run replays those calls), and its verdicts go to every candidate that asks
    /// it. Without it every candidate is asked R times under its own keys.
    pub async fn judge_outcome(
        &self,
        problem: &Problem,
        outcome: &TmasOutcome,
    ) -> Vec<Vec<Option<JudgeRecord>>> {
        let (question, reference) = (problem.question.as_str(), problem.answer.as_str());
        // What each candidate asks: its rule record, and the question for the LLM judge.
        let mut records = Vec::with_capacity(outcome.iterations.len());
        let mut asks: Vec<(Slot, String)> = Vec::new();
        for it in &outcome.iterations {
            let mut row = Vec::with_capacity(it.candidates.len());
            for c in &it.candidates {
                let Some(solution) = c.solution.as_deref() else {
                    row.push(None);
                    continue;
                };
                let slot = (it.iteration, c.index);
                match &self.llm {
                    Some(llm) if self.proof => {
                        asks.push((slot, llm.proof_prompt(problem, solution)))
                    }
                    Some(llm) => {
                        let record = JudgeRecord::from_reply(reference, solution);
                        if let Some(answer) = record
                            .needs_llm_judge(llm.policy, llm.input)
                            .then(|| record.judge_candidate(solution, llm.input))
                            .flatten()
                        {
                            asks.push((slot, llm.prompts.judge(question, reference, &answer)));
                        }
                        row.push(Some(record));
                        continue;
                    }
                    None => {}
                }
                row.push(if self.proof && self.llm.is_some() {
                    // Graded below, from the grader's replies.
                    Some(JudgeRecord::from_grades(Vec::new()))
                } else {
                    Some(JudgeRecord::from_reply(reference, solution))
                });
            }
            records.push(row);
        }
        if let Some(llm) = &self.llm {
            let id = &outcome.problem.id;
            if self.proof {
                let grades = llm
                    .ask_distinct(asks, id, "proof grader", parse_score, &self.progress)
                    .await;
                for ((iteration, index), grades) in grades {
                    if let Some(slot) = find(&mut records, outcome, iteration, index) {
                        *slot = Some(JudgeRecord::from_grades(grades));
                    }
                }
            } else {
                let verdicts = llm
                    .ask_distinct(asks, id, "judge", parse_judge_reply, &self.progress)
                    .await;
                for ((iteration, index), verdicts) in verdicts {
                    if let Some(slot) = find(&mut records, outcome, iteration, index)
                        && let Some(record) = slot.take()
                    {
                        *slot = Some(record.with_llm(verdicts));
                    }
                }
            }
        }
        self.progress
            .problems_judged
            .fetch_add(1, Ordering::Relaxed);
        records
    }
}

/// What judging needs of an iteration: its number and each candidate's index and solution
/// (`None`: the solution call failed). The texts are shared with the strategy's result,
/// not copied.
#[derive(Debug, Clone)]
pub struct Candidates {
    pub iteration: u32,
    pub solutions: Vec<(u32, Option<Arc<str>>)>,
}

impl Candidates {
    pub fn of(it: &IterationResult) -> Self {
        Self {
            iteration: it.iteration,
            solutions: it
                .candidates
                .iter()
                .map(|c| (c.index, c.solution.clone()))
                .collect(),
        }
    }
}

/// One iteration's judgments, and whether they are all the judge's.
#[derive(Debug, Clone)]
pub struct JudgedIteration {
    /// `judgments[candidate]` (`None` where the solution call failed).
    pub judgments: Vec<Option<JudgeRecord>>,
    /// A judge call of the iteration was cut by the run's stop: those verdicts are missing
    /// (not the judge's), so the iteration is not judged yet and a resume judges it.
    pub cut: bool,
}

impl JudgeSetup {
    /// Judges every candidate of one iteration of `problem` ([`JudgedIteration`]). With
    /// `judge.reuse` each question (the same rendered prompt and repeat) is asked once
    /// through `asked`, which the run shares over every iteration and problem: the first
    /// asker's call answers every later asker, in this iteration or a later one. Counts the
    /// iteration as judged.
    pub async fn judge_candidates(
        &self,
        problem: &Problem,
        it: &Candidates,
        asked: &JudgeReuse,
    ) -> JudgedIteration {
        let (question, reference) = (problem.question.as_str(), problem.answer.as_str());
        let per_candidate = it.solutions.iter().map(|(index, solution)| async move {
            let asker = (it.iteration, *index);
            let Some(solution) = solution.as_deref() else {
                return (None, false);
            };
            let Some(llm) = &self.llm else {
                return (Some(JudgeRecord::from_reply(reference, solution)), false);
            };
            if self.proof {
                let prompt = llm.proof_prompt(problem, solution);
                let (grades, cut) = llm
                    .ask_shared(
                        prompt,
                        &problem.id,
                        asker,
                        "proof grader",
                        parse_score,
                        asked,
                        &self.progress,
                    )
                    .await;
                return (Some(JudgeRecord::from_grades(grades)), cut);
            }
            let record = JudgeRecord::from_reply(reference, solution);
            let shown = record
                .needs_llm_judge(llm.policy, llm.input)
                .then(|| record.judge_candidate(solution, llm.input))
                .flatten();
            match shown {
                Some(answer) => {
                    let prompt = llm.prompts.judge(question, reference, &answer);
                    let (verdicts, cut) = llm
                        .ask_shared(
                            prompt,
                            &problem.id,
                            asker,
                            "judge",
                            parse_judge_reply,
                            asked,
                            &self.progress,
                        )
                        .await;
                    (Some(record.with_llm(verdicts)), cut)
                }
                None => (Some(record), false),
            }
        });
        let judged = join_all(per_candidate).await;
        self.progress
            .iterations_judged
            .fetch_add(1, Ordering::Relaxed);
        let cut = judged.iter().any(|(_, cut)| *cut);
        JudgedIteration {
            judgments: judged.into_iter().map(|(j, _)| j).collect(),
            cut,
        }
    }
}

impl LlmJudge {
    /// Asks `prompt` `repeats` times for the candidate at `asker`: with reuse, each repeat
    /// through `asked` (another candidate's call may answer it, and it answers later
    /// askers); without, under the candidate's own keys. Counts calls and reused verdicts
    /// in `progress`. Also says whether a call was cut by the run's stop.
    #[allow(clippy::too_many_arguments)]
    async fn ask_shared<T>(
        &self,
        prompt: String,
        problem: &str,
        asker: reuse::Asker,
        what: &'static str,
        parse: fn(&str) -> Option<T>,
        asked: &JudgeReuse,
        progress: &JudgeProgress,
    ) -> (Vec<Option<T>>, bool) {
        let replies = (0..self.repeats as u32).map(|repeat| {
            let request = judge_request(prompt.clone(), self.sampling, problem, asker.0);
            let make = |(iteration, candidate): reuse::Asker| {
                let key = judge_key(problem, iteration, candidate, repeat);
                self.make(key, request.clone(), what)
            };
            let (reply, reused) = if self.reuse {
                let prompt_id = id_of_messages(&request.messages);
                let (reply, reused) = asked.answer(problem, prompt_id, repeat, asker, make);
                (reply.boxed(), reused)
            } else {
                (make(asker), false)
            };
            let counter = if reused {
                &progress.verdicts_reused
            } else {
                &progress.calls_done
            };
            counter.fetch_add(1, Ordering::Relaxed);
            reply
        });
        let replies = join_all(replies.collect::<Vec<_>>()).await;
        let cut = replies.contains(&Reply::Cut);
        let parsed = replies
            .iter()
            .map(|reply| reply.content().and_then(parse))
            .collect();
        (parsed, cut)
    }

    /// The call `key` asking `request` and its [`Reply`] (a failure is logged here, once
    /// per call).
    fn make(
        &self,
        key: CallKey,
        request: tmas_client::wire::ChatRequest,
        what: &'static str,
    ) -> BoxFuture<'static, Reply> {
        let call = self
            .executor
            .execute_call(&key, self.group.clone(), request);
        async move {
            let (problem, iteration) = (&*key.problem, key.iteration);
            match call.await {
                Ok(resp) => Reply::Answered(resp.content),
                // Cut by the run's shutdown: no failure; the iteration is not stored as
                // judged, and a resume judges it.
                Err(failure) if failure.is_stop() => {
                    tracing::debug!(problem, iteration, "{what} call not made: the run is stopping");
                    Reply::Cut
                }
                Err(failure) => {
                    tracing::warn!(problem, iteration, kind = %failure.kind, "{what} call failed: {}", failure.message);
                    Reply::Failed
                }
            }
        }
        .boxed()
    }
}

/// A candidate's place: (iteration, candidate index).
type Slot = (u32, u32);

/// The record of candidate `index` of iteration `iteration` in `records` (laid out as
/// `outcome`'s iterations and candidates).
fn find<'a>(
    records: &'a mut [Vec<Option<JudgeRecord>>],
    outcome: &TmasOutcome,
    iteration: u32,
    index: u32,
) -> Option<&'a mut Option<JudgeRecord>> {
    let t = outcome
        .iterations
        .iter()
        .position(|it| it.iteration == iteration)?;
    let c = outcome.iterations[t]
        .candidates
        .iter()
        .position(|c| c.index == index)?;
    records.get_mut(t)?.get_mut(c)
}

impl LlmJudge {
    /// Asks each distinct question of `asks` `repeats` times (with reuse; every ask when
    /// reuse is off) under the keys of its first asker, and gives every asker its
    /// question's replies read by `parse`. Counts calls and reused verdicts in `progress`.
    async fn ask_distinct<T: Clone>(
        &self,
        asks: Vec<(Slot, String)>,
        problem: &str,
        what: &str,
        parse: fn(&str) -> Option<T>,
        progress: &JudgeProgress,
    ) -> Vec<(Slot, Vec<Option<T>>)> {
        // The asker whose keys a question is sent under: the first, in `asks` order.
        let mut owner_of: HashMap<&str, usize> = HashMap::new();
        let owners: Vec<usize> = asks
            .iter()
            .enumerate()
            .map(|(i, (_, prompt))| {
                if self.reuse {
                    *owner_of.entry(prompt.as_str()).or_insert(i)
                } else {
                    i
                }
            })
            .collect();
        let sent: Vec<usize> = (0..asks.len()).filter(|&i| owners[i] == i).collect();
        let replies = join_all(sent.iter().map(|&i| {
            let ((iteration, candidate), prompt) = &asks[i];
            self.ask_repeats(prompt.clone(), problem, *iteration, *candidate, what, parse)
        }))
        .await;
        let by_owner: HashMap<usize, Vec<Option<T>>> = sent.into_iter().zip(replies).collect();
        let repeats = self.repeats as u64;
        progress
            .calls_done
            .fetch_add(by_owner.len() as u64 * repeats, Ordering::Relaxed);
        progress.verdicts_reused.fetch_add(
            (asks.len() - by_owner.len()) as u64 * repeats,
            Ordering::Relaxed,
        );
        asks.iter()
            .zip(&owners)
            .map(|((slot, _), owner)| (*slot, by_owner[owner].clone()))
            .collect()
    }

    /// Proof mode: the grader's prompt for `proof` (the think-stripped solution) against
    /// the problem's reference solution and grading guidelines; without a reference
    /// solution the grader is given the reference answer.
    fn proof_prompt(&self, problem: &Problem, proof: &str) -> String {
        let reference = problem
            .reference_solution
            .as_deref()
            .unwrap_or(&problem.answer);
        let guidelines = problem
            .grading_guidelines
            .as_deref()
            .unwrap_or("(none given: grade by the rubric and the reference solution)");
        self.prompts
            .proof_grade(&problem.question, reference, guidelines, proof)
    }
}

impl LlmJudge {
    /// Asks the judge `repeats` times; a failed call or unparseable reply is `None`.
    /// Each repeat has its own call key (problem, iteration, `judge`, candidate, repeat),
    /// so the run store can replay it and a simulator answers each repeat independently.
    pub async fn ask(
        &self,
        question: &str,
        reference: &str,
        answer: &str,
        problem: &str,
        iteration: u32,
        candidate: u32,
    ) -> Vec<Option<bool>> {
        let prompt = self.prompts.judge(question, reference, answer);
        self.ask_repeats(
            prompt,
            problem,
            iteration,
            candidate,
            "judge",
            parse_judge_reply,
        )
        .await
    }

    /// Sends `prompt` to the judge group `repeats` times, each repeat under its own call
    /// key, and reads each reply with `parse`; a failed call is logged (as a `what` call)
    /// and is `None`, as is a reply `parse` cannot read.
    async fn ask_repeats<T>(
        &self,
        prompt: String,
        problem: &str,
        iteration: u32,
        candidate: u32,
        what: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Vec<Option<T>> {
        let calls = (0..self.repeats).map(|repeat| {
            let request = judge_request(prompt.clone(), self.sampling, problem, iteration);
            let key = judge_key(problem, iteration, candidate, repeat as u32);
            self.executor
                .execute_call(&key, self.group.clone(), request)
        });
        join_all(calls)
            .await
            .into_iter()
            .map(|outcome| match outcome {
                Ok(resp) => parse(&resp.content),
                // Cut by the run's shutdown: no failure; the problem is not stored, and a
                // resume judges it.
                Err(failure) if failure.is_stop() => {
                    tracing::debug!(problem, iteration, "{what} call not made: the run is stopping");
                    None
                }
                Err(failure) => {
                    tracing::warn!(problem, iteration, kind = %failure.kind, "{what} call failed: {}", failure.message);
                    None
                }
            })
            .collect()
    }
}

/// The key of judge repeat `repeat` of candidate `candidate` (display form
/// `PROBLEM/itT/judge/cC/vR/a0`).
pub fn judge_key(problem: &str, iteration: u32, candidate: u32, repeat: u32) -> CallKey {
    call_key(
        &problem.into(),
        iteration,
        Role::Judge,
        Some(candidate),
        Some(repeat),
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_repeats_have_distinct_keys() {
        let a = judge_key("p", 2, 1, 0);
        let b = judge_key("p", 2, 1, 1);
        assert_ne!(a, b);
        assert_eq!(a.to_string(), "p/it2/judge/c1/v0/a0");
    }
}
