//! Self-Refine (Madaan et al., 2023), N chains in parallel. Iteration 0: each chain
//! generates a solution. Iteration t ≥ 1: each chain's model gives feedback on its own
//! latest solution (role `critique`), then writes a refined one (role `solution`,
//! template `self_refine`). With `method.self_refine_history = "full"` (the default) the
//! refinement sees the chain's whole history, every earlier solution with the feedback on
//! it, oldest first, then the latest and its feedback: the paper's refine step conditions
//! on all previous outputs and feedback, and the released loop appends each (solution,
//! feedback, rewrite) to its prompt (madaan/self-refine, `src/gsm/feedback.py` lines
//! 47 and 56–66). With `"last"` it sees the latest solution and its feedback only.
//! Chains share nothing.
//!
//! Choices: the feedback call sees the latest solution only (the paper's feedback step
//! takes the current output); the loop never stops early on "no issues" feedback (the
//! paper's curves need every iteration); a chain whose feedback call failed refines with a
//! note that no feedback is available (that step enters the history with the note); a
//! failed refinement leaves the chain and its history as they were; a chain with no
//! solution yet (its calls failed) starts afresh.

use std::sync::Arc;

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of, text_of};
use crate::config::SelfRefineHistory;
use crate::method::prompts::TemplateKind;
use crate::method::result::{CandidateResult, PromptMode};

const NO_FEEDBACK: &str = "(no feedback available: the feedback call failed)";

/// Heads the chain's earlier steps in a refinement prompt.
const HISTORY_HEADING: &str =
    "## Your earlier attempts, oldest first, each with your feedback on it";

/// The roles Self-Refine calls: the solutions, and from the second iteration on the
/// feedback on each chain's previous one.
pub const ROLES: &[Role] = &[Role::Solution, Role::Critique];

#[derive(Default)]
pub struct SelfRefine {
    /// Each chain's latest solution.
    chains: Vec<Option<Arc<str>>>,
    /// Each chain's earlier solutions with the feedback on each, oldest first.
    history: Vec<Vec<(Arc<str>, Arc<str>)>>,
    /// The feedback each chain's refinement in progress was given.
    feedback: Vec<Option<Arc<str>>>,
    /// The solution prompts of the iteration in progress (by chain).
    prompts: Vec<(PromptMode, Arc<str>)>,
    critiquing: bool,
}

impl SelfRefine {
    fn solve(&mut self, cx: &Ctx, feedback: Vec<Option<Arc<str>>>) -> Step {
        let n = cx.params.n;
        self.chains.resize(n, None);
        self.history.resize(n, Vec::new());
        self.critiquing = false;
        self.feedback = (0..n)
            .map(|c| {
                self.chains[c].as_ref()?;
                Some(
                    feedback
                        .get(c)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| NO_FEEDBACK.into()),
                )
            })
            .collect();
        self.prompts = (0..n)
            .map(|c| match (&self.chains[c], &self.feedback[c]) {
                (Some(prev), Some(fb)) => {
                    let history = match cx.params.self_refine_history {
                        SelfRefineHistory::Full => render_history(cx, &self.history[c]),
                        SelfRefineHistory::Last => String::new(),
                    };
                    let text = cx.prompts.render(
                        TemplateKind::SelfRefine,
                        &[&cx.problem.question, &cx.style(), &history, prev, fb],
                    );
                    (PromptMode::Refine, text.into())
                }
                _ => (PromptMode::Fresh, cx.fresh_prompt()),
            })
            .collect();
        Step::chain_solutions(&self.prompts)
    }
}

/// A chain's earlier steps for the `{history}` of `self_refine`: empty without any, else
/// a heading and each step, numbered from 1.
fn render_history(cx: &Ctx, steps: &[(Arc<str>, Arc<str>)]) -> String {
    if steps.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{HISTORY_HEADING}\n\n");
    for (i, (solution, feedback)) in steps.iter().enumerate() {
        out.push_str(&cx.prompts.render(
            TemplateKind::SelfRefineStep,
            &[&(i + 1).to_string(), solution, feedback],
        ));
        out.push('\n');
    }
    out
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
            return self.solve(cx, Vec::new());
        }
        self.critiquing = true;
        Step::Calls(critiques)
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        if self.critiquing {
            let feedback: Vec<Option<Arc<str>>> = (0..cx.params.n as u32)
                .map(|c| text_of(reply_of(&replies, Role::Critique, c, None)))
                .collect();
            return self.solve(cx, feedback);
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
                // The refined step joins the history: the solution it refined, and the
                // feedback it was given.
                if let (Some(prev), Some(fb)) = (self.chains[c].take(), self.feedback[c].take()) {
                    self.history[c].push((prev, fb));
                }
                self.chains[c] = Some(s.clone());
            }
        }
        Step::Done(IterationEnd {
            candidates,
            best: None,
        })
    }
}
