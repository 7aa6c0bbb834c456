//! Judging every candidate of a finished problem: the rule check always, the LLM judge
//! (R repeats, role `judge`) when one is configured and the policy asks for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::join_all;
use tmas_actors::strategy::{CallExecutor, CallKey};
use tmas_client::wire::Sampling;

use crate::config::Config;
use crate::eval::dataset::Problem;
use crate::eval::judge::{
    JudgeInput, JudgeRecord, LlmJudgePolicy, judge_request, parse_judge_reply,
};
use crate::method::parse::parse_score;
use crate::method::{PromptSet, TmasOutcome, call_key};
use crate::role::Role;

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
    /// LLM judge calls finished (answered, failed or replayed).
    pub calls_done: AtomicU64,
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
        }
    }
}

impl JudgeSetup {
    /// Judges every candidate of every iteration of `outcome` against `reference`.
    /// Returns `judgments[iteration][candidate]` (`None` where the solution call failed).
    pub async fn judge_outcome(
        &self,
        problem: &Problem,
        outcome: &TmasOutcome,
    ) -> Vec<Vec<Option<JudgeRecord>>> {
        let (question, reference) = (problem.question.as_str(), problem.answer.as_str());
        let mut out = Vec::with_capacity(outcome.iterations.len());
        for it in &outcome.iterations {
            let per_candidate = it.candidates.iter().map(|c| async move {
                let index = c.index;
                let solution = c.solution.as_deref()?;
                if let (true, Some(llm)) = (self.proof, &self.llm) {
                    let grades = llm.grade(problem, solution, it.iteration, index).await;
                    return Some(JudgeRecord::from_grades(grades));
                }
                let record = JudgeRecord::from_reply(reference, solution);
                let shown = self.llm.as_ref().and_then(|llm| {
                    record
                        .needs_llm_judge(llm.policy, llm.input)
                        .then(|| record.judge_candidate(solution, llm.input))
                        .flatten()
                });
                Some(match (&self.llm, shown) {
                    (Some(llm), Some(answer)) => {
                        let verdicts = llm
                            .ask(
                                question,
                                reference,
                                &answer,
                                &outcome.problem.id,
                                it.iteration,
                                index,
                            )
                            .await;
                        self.progress
                            .calls_done
                            .fetch_add(verdicts.len() as u64, Ordering::Relaxed);
                        record.with_llm(verdicts)
                    }
                    _ => record,
                })
            });
            out.push(join_all(per_candidate).await);
        }
        self.progress
            .problems_judged
            .fetch_add(1, Ordering::Relaxed);
        out
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

impl LlmJudge {
    /// Proof mode: asks the grader `repeats` times to grade `proof` (the think-stripped
    /// solution) against the problem's reference solution and grading guidelines; a
    /// failed call or a reply without a grade of 0, 0.5 or 1 is `None`. Without a
    /// reference solution the grader is given the reference answer.
    pub async fn grade(
        &self,
        problem: &Problem,
        proof: &str,
        iteration: u32,
        candidate: u32,
    ) -> Vec<Option<f64>> {
        let reference = problem
            .reference_solution
            .as_deref()
            .unwrap_or(&problem.answer);
        let guidelines = problem
            .grading_guidelines
            .as_deref()
            .unwrap_or("(none given: grade by the rubric and the reference solution)");
        let prompt = self
            .prompts
            .proof_grade(&problem.question, reference, guidelines, proof);
        self.ask_repeats(
            prompt,
            &problem.id,
            iteration,
            candidate,
            "proof grader",
            parse_score,
        )
        .await
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
