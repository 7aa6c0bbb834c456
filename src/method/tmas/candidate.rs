//! One candidate's progress through an iteration: solution → M verification slots (with
//! re-asks for unparseable scores) → summary. Pure transitions: each returns what the
//! strategy must do next (and any failure to record); the strategy turns that into calls.

use std::sync::Arc;

use tmas_actors::strategy::CallOutcome;
use tmas_client::wire::PromptText;

use crate::method::answer::visible_text;
use crate::method::call_key::call_key;
use crate::method::parse::parse_score;
use crate::method::result::{
    Branch, CandidateResult, CandidateStatus, Field, PromptMode, TextRef, UnusableReply,
    VerificationRecord, VerificationStatus, is_fully_verified,
};
use crate::role::Role;

/// What the candidate needs after an outcome.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing yet (other slots still outstanding).
    Wait,
    /// Issue all M verification slots at attempt 0.
    VerifyAll,
    /// Re-ask verification slot `index` at `attempt`.
    Reask { index: u32, attempt: u32 },
    /// Verification is settled (or M = 0): ask for the summary.
    Summarize,
    /// The candidate is finished.
    Done,
}

/// A problem with a reply worth recording: (what was wrong, message).
pub(crate) type Note = Option<(UnusableReply, String)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Solving,
    Verifying,
    Summarizing,
    Done,
}

/// How the candidate's solution prompt was chosen (recorded in the result).
pub(crate) struct Choice {
    pub branch: Branch,
    pub branch_draw: f64,
    pub mode: PromptMode,
    pub context_rollouts: Vec<u32>,
    pub experience_items: usize,
    pub guideline_items: usize,
    pub prompt_bytes: usize,
}

pub(crate) struct CandidateState {
    pub result: CandidateResult,
    phase: Phase,
    /// Per slot: still waiting for a usable reply.
    open: Vec<bool>,
    /// Built once when the solution arrives; shared by all M slots and re-asks.
    pub verification_prompt: Option<PromptText>,
    /// Per slot: the attempt whose reply the slot's text is (a re-ask that fails leaves
    /// the text of the attempt before it).
    text_attempts: Vec<u32>,
}

impl CandidateState {
    pub fn new(index: u32, choice: Choice) -> Self {
        Self {
            result: CandidateResult {
                index,
                branch: choice.branch,
                branch_draw: choice.branch_draw,
                mode: choice.mode,
                context_rollouts: choice.context_rollouts,
                experience_items: choice.experience_items,
                guideline_items: choice.guideline_items,
                prompt_bytes: choice.prompt_bytes,
                status: CandidateStatus::SolutionFailed,
                solution: None,
                truncated: false,
                verifications: Vec::new(),
                scores: Vec::new(),
                average_score: None,
                fully_verified: false,
                summary: None,
            },
            phase: Phase::Solving,
            open: Vec::new(),
            verification_prompt: None,
            text_attempts: Vec::new(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The solution call finished. A failure drops the candidate.
    pub fn on_solution(&mut self, outcome: &CallOutcome, m: usize) -> Next {
        if self.phase != Phase::Solving {
            return Next::Wait;
        }
        let response = match outcome {
            Ok(r) => r,
            Err(_) => {
                self.phase = Phase::Done;
                return Next::Done;
            }
        };
        self.result.solution = Some(visible_text(&response.content));
        self.result.truncated = response.finish_reason.as_deref() == Some("length");
        if m == 0 {
            self.phase = Phase::Summarizing;
            return Next::Summarize;
        }
        self.phase = Phase::Verifying;
        self.open = vec![true; m];
        self.text_attempts = vec![0; m];
        self.result.verifications = (0..m as u32)
            .map(|index| VerificationRecord {
                index,
                status: VerificationStatus::Failed,
                score: None,
                text: None,
                attempts: 1,
            })
            .collect();
        Next::VerifyAll
    }

    /// A verification call finished. Unparseable replies are re-asked within the slot's
    /// share of the candidate's `budget` (see [`reasks_for_slot`]); failed calls count as
    /// missing.
    pub fn on_verification(
        &mut self,
        index: u32,
        attempt: u32,
        outcome: &CallOutcome,
        budget: u32,
    ) -> (Next, Note) {
        let i = index as usize;
        if self.phase != Phase::Verifying || !self.open.get(i).copied().unwrap_or(false) {
            return (Next::Wait, None);
        }
        let slot = &mut self.result.verifications[i];
        let mut note = None;
        match outcome {
            Ok(response) => {
                slot.text = Some(visible_text(&response.content));
                self.text_attempts[i] = attempt;
                match parse_score(&response.content) {
                    Some(score) => {
                        slot.score = Some(score);
                        // The coordinator runs `on_call` inside the call's span.
                        tmas_observability::span_ext::set_attribute(
                            &tracing::Span::current(),
                            "tmas.score",
                            score,
                        );
                        slot.status = VerificationStatus::Scored;
                    }
                    None => {
                        note = Some((
                            UnusableReply::UnparseableScore,
                            "no \\boxed{0|0.5|1} score in the verification reply".to_string(),
                        ));
                        let m = self.open.len() as u32;
                        if attempt < reasks_for_slot(index, m, budget) {
                            slot.attempts += 1;
                            return (
                                Next::Reask {
                                    index,
                                    attempt: attempt + 1,
                                },
                                note,
                            );
                        }
                        slot.status = VerificationStatus::Unparseable;
                    }
                }
            }
            Err(_) => slot.status = VerificationStatus::Failed,
        }
        self.open[i] = false;
        if self.open.iter().any(|o| *o) {
            return (Next::Wait, note);
        }
        self.phase = Phase::Summarizing;
        (Next::Summarize, note)
    }

    /// Scored verifications as (score, text), in slot order, for the summary prompt.
    pub fn scored(&self) -> Vec<(f64, &str)> {
        self.result
            .verifications
            .iter()
            .filter_map(|v| Some((v.score?, v.text.as_deref()?)))
            .collect()
    }

    /// The summary call finished; the candidate is done either way.
    pub fn on_summary(&mut self, outcome: &CallOutcome) -> Note {
        if self.phase != Phase::Summarizing {
            return None;
        }
        self.phase = Phase::Done;
        self.result.status = CandidateStatus::SummaryFailed;
        let response = outcome.as_ref().ok()?;
        let text = visible_text(&response.content);
        if text.is_empty() {
            return Some((
                UnusableReply::EmptySummary,
                "summary reply had no visible text".to_string(),
            ));
        }
        self.result.summary = Some(text);
        self.result.status = CandidateStatus::Complete;
        None
    }

    /// Where each text the result holds came from, for a result at `position` in the
    /// outcome's iterations and `candidate` in its candidates: the call whose reply,
    /// think-stripped, is the text (the strategy's own keys).
    pub fn text_refs(
        &self,
        problem: &Arc<str>,
        iteration: u32,
        position: usize,
        candidate: usize,
    ) -> Vec<TextRef> {
        let text_ref = |field: Field, role: Role, index: Option<u32>, attempt: u32| {
            let key = call_key(
                problem,
                iteration,
                role,
                Some(self.result.index),
                index,
                attempt,
            );
            TextRef(position, candidate, field, key.to_string())
        };
        let r = &self.result;
        let solution = r
            .solution
            .is_some()
            .then(|| text_ref(Field::Solution, Role::Solution, None, 0));
        let verifications = r
            .verifications
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.text.is_some())
            .map(|(v, slot)| {
                let attempt = self.text_attempts.get(v).copied().unwrap_or(0);
                text_ref(
                    Field::Verification(v),
                    Role::Verification,
                    Some(slot.index),
                    attempt,
                )
            });
        let summary = r
            .summary
            .is_some()
            .then(|| text_ref(Field::Summary, Role::Summary, None, 0));
        solution
            .into_iter()
            .chain(verifications)
            .chain(summary)
            .collect()
    }

    /// Fills scores, average and the fully-verified flag once the candidate is done.
    pub fn finalize(&mut self, m: usize, strict: bool) {
        let r = &mut self.result;
        r.scores = r.verifications.iter().filter_map(|v| v.score).collect();
        r.average_score = if r.scores.is_empty() {
            None
        } else {
            Some(r.scores.iter().sum::<f64>() / r.scores.len() as f64)
        };
        r.fully_verified = is_fully_verified(&r.scores, m, strict);
    }
}

/// Re-asks allowed for verification slot `index` out of a per-candidate budget of
/// `budget` calls (first `m` included). The spare calls are split evenly over the slots,
/// the remainder going to the lowest indices, so which calls exist never depends on the
/// order in which replies arrive (a replayed run asks for the same keys).
pub(crate) fn reasks_for_slot(index: u32, m: u32, budget: u32) -> u32 {
    if m == 0 {
        return 0;
    }
    let spare = budget.saturating_sub(m);
    spare / m + u32::from(index < spare % m)
}

#[cfg(test)]
mod tests {
    use super::reasks_for_slot;

    #[test]
    fn budget_split_evenly_over_slots() {
        assert_eq!((0..8).map(|i| reasks_for_slot(i, 8, 16)).sum::<u32>(), 8);
        assert!((0..8).all(|i| reasks_for_slot(i, 8, 16) == 1));
        assert_eq!(
            (0..4).map(|i| reasks_for_slot(i, 4, 6)).collect::<Vec<_>>(),
            vec![1, 1, 0, 0]
        );
        assert_eq!(reasks_for_slot(0, 4, 3), 0, "budget below M: no re-asks");
        assert_eq!(reasks_for_slot(0, 0, 10), 0);
        assert_eq!(reasks_for_slot(2, 3, 12), 3);
    }
}
