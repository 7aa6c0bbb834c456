//! Verify-Refine (V-R), N independent chains. Iteration 0: each chain generates a
//! solution; iteration t ≥ 1: a corrector call (role `solution`, template `correction`)
//! rewrites the chain's previous solution using that solution's M verification reports.
//! Every iteration's solutions then get M verifications each (role `verification`, the
//! TMAS verifier prompt), whose scores pick the iteration's best candidate and whose
//! reports feed the next correction. Chains share nothing.
//!
//! Choices: the corrector always runs (it may keep a correct solution as it is), so every
//! iteration has N fresh candidates to judge; unparseable scores are not re-asked (the
//! report still reaches the corrector); a chain with no solution starts afresh.

use std::sync::Arc;

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of, text_of};
use crate::method::parse::parse_score;
use crate::method::prompts::TemplateKind;
use crate::method::result::{CandidateResult, PromptMode, VerificationRecord, VerificationStatus};

const NO_REPORTS: &str = "(no reviewer reports are available)";

/// The roles Verify-Refine calls: the (corrected) solutions and their verifications.
pub const ROLES: &[Role] = &[Role::Solution, Role::Verification];

#[derive(Default)]
pub struct VerifyRefine {
    /// Each chain's latest solution and the rendered reports on it.
    chains: Vec<Option<(Arc<str>, String)>>,
    prompts: Vec<(PromptMode, Arc<str>)>,
    /// Candidates of the iteration in progress, once the solutions are back.
    candidates: Vec<CandidateResult>,
}

fn verification_prompt(cx: &Ctx, solution: &str) -> Arc<str> {
    let focus = if cx.params.no_proof {
        TemplateKind::VerificationFocusAnswer
    } else {
        TemplateKind::VerificationFocusProof
    };
    let focus = cx.prompts.render(focus, &[]);
    cx.prompts
        .render(
            TemplateKind::Verification,
            &[&cx.problem.question, solution, &focus],
        )
        .into()
}

impl Method for VerifyRefine {
    fn begin(&mut self, cx: &Ctx, _t: u32) -> Step {
        let n = cx.params.n;
        self.chains.resize(n, None);
        self.candidates.clear();
        self.prompts = (0..n)
            .map(|c| match &self.chains[c] {
                Some((prev, reports)) => {
                    let text = cx.prompts.render(
                        TemplateKind::Correction,
                        &[&cx.problem.question, &cx.style(), prev, reports],
                    );
                    (PromptMode::Refine, text.into())
                }
                None => (PromptMode::Fresh, cx.fresh_prompt()),
            })
            .collect();
        Step::chain_solutions(&self.prompts)
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        let m = cx.params.m;
        if self.candidates.is_empty() {
            self.candidates = self
                .prompts
                .iter()
                .enumerate()
                .map(|(c, (mode, prompt))| {
                    let reply = reply_of(&replies, Role::Solution, c as u32, None);
                    candidate(c as u32, *mode, prompt, reply)
                })
                .collect();
            let mut reqs = Vec::new();
            for cand in &self.candidates {
                let Some(s) = &cand.solution else { continue };
                if let Some(chain) = self.chains.get_mut(cand.index as usize) {
                    *chain = Some((s.clone(), NO_REPORTS.to_string()));
                }
                let prompt = verification_prompt(cx, s);
                for v in 0..m as u32 {
                    reqs.push(Req::new(
                        Role::Verification,
                        cand.index,
                        Some(v),
                        prompt.clone(),
                    ));
                }
            }
            if !reqs.is_empty() {
                return Step::Calls(reqs);
            }
        } else {
            self.score(cx, &replies);
        }
        let candidates = std::mem::take(&mut self.candidates);
        let best = best_by_score(&candidates);
        Step::Done(IterationEnd { candidates, best })
    }
}

impl VerifyRefine {
    /// Records the verifications of every candidate and renders each chain's reports.
    fn score(&mut self, cx: &Ctx, replies: &Replies) {
        for cand in &mut self.candidates {
            if cand.solution.is_none() {
                continue;
            }
            let mut reports = Vec::new();
            for v in 0..cx.params.m as u32 {
                let outcome = reply_of(replies, Role::Verification, cand.index, Some(v));
                let text = text_of(outcome);
                let score = text.as_deref().and_then(parse_score);
                let status = match (&text, score) {
                    (_, Some(_)) => VerificationStatus::Scored,
                    (Some(_), None) => VerificationStatus::Unparseable,
                    (None, None) => VerificationStatus::Failed,
                };
                if let Some(s) = score {
                    cand.scores.push(s);
                }
                if let Some(t) = &text {
                    let shown = score.map_or("unreadable".to_string(), |s| s.to_string());
                    reports.push(cx.prompts.render(
                        TemplateKind::SummaryVerification,
                        &[&(v + 1).to_string(), &shown, t],
                    ));
                }
                cand.verifications.push(VerificationRecord {
                    index: v,
                    status,
                    score,
                    text,
                    attempts: 1,
                });
            }
            if !cand.scores.is_empty() {
                cand.average_score =
                    Some(cand.scores.iter().sum::<f64>() / cand.scores.len() as f64);
            }
            let reports = if reports.is_empty() {
                NO_REPORTS.to_string()
            } else {
                reports.join("\n")
            };
            if let (Some(chain), Some(s)) =
                (self.chains.get_mut(cand.index as usize), &cand.solution)
            {
                *chain = Some((s.clone(), reports));
            }
        }
    }
}

/// Highest average score; unscored candidates rank last; ties go to the lowest index.
pub fn best_by_score(candidates: &[CandidateResult]) -> Option<u32> {
    let mut best: Option<(u32, f64)> = None;
    for c in candidates.iter().filter(|c| c.solution.is_some()) {
        let score = c.average_score.unwrap_or(f64::NEG_INFINITY);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((c.index, score));
        }
    }
    best.map(|(i, _)| i)
}
