//! Self-Refine (Madaan et al., 2023), N chains in parallel. Iteration 0: each chain
//! generates a solution. Iteration t ≥ 1: each chain's model gives feedback on its own
//! previous solution (role `critique`), then writes a refined one from the solution and
//! the feedback (role `solution`, template `self_refine`). Chains share nothing.
//!
//! Choices: the loop never stops early on "no issues" feedback (the paper's curves need
//! every iteration); a chain whose feedback call failed refines with a note that no
//! feedback is available; a chain with no solution yet (its calls failed) starts afresh.

use std::sync::Arc;

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of, text_of};
use crate::method::prompts::TemplateKind;
use crate::method::result::{CandidateResult, PromptMode};

const NO_FEEDBACK: &str = "(no feedback available: the feedback call failed)";

/// The roles Self-Refine calls: the solutions, and from the second iteration on the
/// feedback on each chain's previous one.
pub const ROLES: &[Role] = &[Role::Solution, Role::Critique];

#[derive(Default)]
pub struct SelfRefine {
    /// Each chain's latest solution.
    chains: Vec<Option<Arc<str>>>,
    /// The solution prompts of the iteration in progress (by chain).
    prompts: Vec<(PromptMode, Arc<str>)>,
    critiquing: bool,
}

impl SelfRefine {
    fn solve(&mut self, cx: &Ctx, feedback: &[Option<Arc<str>>]) -> Step {
        let n = cx.params.n;
        self.chains.resize(n, None);
        self.critiquing = false;
        self.prompts = (0..n)
            .map(|c| match &self.chains[c] {
                Some(prev) => {
                    let fb = feedback.get(c).cloned().flatten();
                    let text = cx.prompts.render(
                        TemplateKind::SelfRefine,
                        &[
                            &cx.problem.question,
                            &cx.style(),
                            prev,
                            fb.as_deref().unwrap_or(NO_FEEDBACK),
                        ],
                    );
                    (PromptMode::Refine, text.into())
                }
                None => (PromptMode::Fresh, cx.fresh_prompt()),
            })
            .collect();
        Step::chain_solutions(&self.prompts)
    }
}

impl Method for SelfRefine {
    fn begin(&mut self, cx: &Ctx, _t: u32) -> Step {
        self.chains.resize(cx.params.n, None);
        let critiques: Vec<Req> = self
            .chains
            .iter()
            .enumerate()
            .filter_map(|(c, s)| {
                let s = s.as_ref()?;
                let prompt = cx
                    .prompts
                    .render(TemplateKind::Critique, &[&cx.problem.question, s]);
                Some(Req::new(Role::Critique, c as u32, None, prompt.into()))
            })
            .collect();
        if critiques.is_empty() {
            return self.solve(cx, &[]);
        }
        self.critiquing = true;
        Step::Calls(critiques)
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        if self.critiquing {
            let feedback: Vec<Option<Arc<str>>> = (0..cx.params.n as u32)
                .map(|c| text_of(reply_of(&replies, Role::Critique, c, None)))
                .collect();
            return self.solve(cx, &feedback);
        }
        let candidates: Vec<CandidateResult> = self
            .prompts
            .iter()
            .enumerate()
            .map(|(c, (mode, prompt))| {
                let reply = reply_of(&replies, Role::Solution, c as u32, None);
                candidate(c as u32, *mode, prompt, reply)
            })
            .collect();
        for (c, cand) in candidates.iter().enumerate() {
            if let Some(s) = &cand.solution {
                self.chains[c] = Some(s.clone());
            }
        }
        Step::Done(IterationEnd {
            candidates,
            best: None,
        })
    }
}
