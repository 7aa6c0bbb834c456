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
//! solution yet (its calls failed) starts afresh. A history grows with every iteration
//! and can outgrow the context window: a refinement the client refuses as too long for it
//! (`prompt_too_long`) is asked again at once with the oldest half of its chain's history
//! dropped for good (re-ask `attempt` + 1), until it fits or no history is left, so a
//! long chain keeps refining instead of failing every later iteration.

use std::sync::Arc;

use std::collections::BTreeMap;

use tmas_actors::strategy::CallOutcome;
use tmas_client::failure::FailureKind;

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
    /// The solution calls' outcomes of the iteration in progress, by chain, as they settle.
    outcomes: BTreeMap<u32, CallOutcome>,
    /// The re-ask number of the solution calls in flight (0: the first ask).
    attempt: u32,
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
        self.prompts = (0..n).map(|c| self.prompt(cx, c)).collect();
        self.outcomes.clear();
        self.attempt = 0;
        Step::chain_solutions(&self.prompts)
    }

    /// Chain `c`'s solution prompt: a refinement when it has a solution and feedback,
    /// else a fresh attempt.
    fn prompt(&self, cx: &Ctx, c: usize) -> (PromptMode, Arc<str>) {
        match (&self.chains[c], &self.feedback[c]) {
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
        }
    }

    /// Whether chain `c`'s refinement, refused with `outcome`, is asked again with a
    /// shorter history (dropping its oldest half).
    fn shorten(&mut self, cx: &Ctx, c: usize, outcome: Option<&CallOutcome>) -> bool {
        let too_long = matches!(outcome, Some(Err(e)) if e.kind == FailureKind::PromptTooLong);
        let history = &mut self.history[c];
        if !too_long
            || history.is_empty()
            || cx.params.self_refine_history != SelfRefineHistory::Full
            || self.feedback[c].is_none()
        {
            return false;
        }
        let dropped = history.len().div_ceil(2);
        history.drain(..dropped);
        self.prompts[c] = self.prompt(cx, c);
        true
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
        let mut again = Vec::new();
        for (key, outcome) in replies {
            let Some(c) = key.candidate else { continue };
            if self.shorten(cx, c as usize, Some(&outcome)) {
                again.push(c);
            } else {
                self.outcomes.insert(c, outcome);
            }
        }
        if !again.is_empty() {
            self.attempt += 1;
            return Step::Calls(
                again
                    .into_iter()
                    .map(|c| {
                        let prompt = self.prompts[c as usize].1.clone();
                        Req::new(Role::Solution, c, None, prompt).with_attempt(self.attempt)
                    })
                    .collect(),
            );
        }
        let candidates: Vec<CandidateResult> = self
            .prompts
            .iter()
            .enumerate()
            .map(|(c, (mode, prompt))| {
                let reply = self.outcomes.get(&(c as u32));
                candidate(c as u32, *mode, prompt, reply)
            })
            .collect();
        self.outcomes.clear();
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
