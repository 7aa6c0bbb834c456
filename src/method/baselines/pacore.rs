//! PaCoRe (stepfun-ai/PaCoRe): rounds of N parallel trajectories. Round 0 answers the
//! question alone; every later round's N trajectories see the question plus all of the
//! previous round's messages. Each iteration is one round, judged as a whole (the paper
//! aligns `num_responses_per_round = 8` with TMAS's N = 8). `config/pacore-official.toml`
//! samples as released (temperature 1.0, top_p 1.0, `pacore/batch_inference/base_exp.py`
//! lines 22–24).
//!
//! Choices, following the released batch-inference code: a message is a response cut to
//! its text after `</think>` (no extra model call compacts it); failed calls are dropped;
//! the messages are shuffled once per round with a seeded draw, and every trajectory of
//! the round sees the same order; if a whole round failed, the next round sees the last
//! messages that exist.
//!
//! The released code always appends a final round of one response (`base_exp.py` lines
//! 97–98), conditioned on the last round's messages like any later round, and returns it
//! as the answer (lines 178–183). It is not run: the TMAS paper's curves judge each round
//! of N as one iteration, and that single response fits neither way a run could hold it
//! (a ninth candidate would change the last round's Pass@1; an iteration of one response
//! would be a curve point of one sample, not comparable with the others).

use std::sync::Arc;

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of};
use crate::method::prompts::TemplateKind;
use crate::method::result::{CandidateResult, PromptMode};
use crate::method::rng::DecisionRng;

/// The roles PaCoRe calls: each round's trajectories.
pub const ROLES: &[Role] = &[Role::Solution];

#[derive(Default)]
pub struct Pacore {
    /// The latest round's messages, in candidate order.
    messages: Vec<Arc<str>>,
    prompt: Option<(PromptMode, Arc<str>)>,
}

impl Pacore {
    fn round_prompt(&self, cx: &Ctx, t: u32) -> (PromptMode, Arc<str>) {
        if self.messages.is_empty() {
            return (PromptMode::Fresh, cx.fresh_prompt());
        }
        let mut rng =
            DecisionRng::for_decision(cx.params.seed, &cx.problem.id, t, 0, "pacore-shuffle");
        let mut order: Vec<usize> = (0..self.messages.len()).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        let rendered: Vec<String> = order
            .iter()
            .enumerate()
            .map(|(shown, &i)| {
                cx.prompts.render(
                    TemplateKind::PacoreMessage,
                    &[&(shown + 1).to_string(), &self.messages[i]],
                )
            })
            .collect();
        let text = cx.prompts.render(
            TemplateKind::PacoreRound,
            &[&cx.problem.question, &cx.style(), &rendered.join("\n")],
        );
        (PromptMode::Refine, text.into())
    }
}

impl Method for Pacore {
    fn begin(&mut self, cx: &Ctx, t: u32) -> Step {
        let (mode, prompt) = self.round_prompt(cx, t);
        self.prompt = Some((mode, prompt.clone()));
        Step::Calls(
            (0..cx.params.n as u32)
                .map(|c| Req::new(Role::Solution, c, None, prompt.clone()))
                .collect(),
        )
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        let (mode, prompt) = self
            .prompt
            .clone()
            .unwrap_or_else(|| (PromptMode::Fresh, cx.fresh_prompt()));
        let candidates: Vec<CandidateResult> = (0..cx.params.n as u32)
            .map(|c| {
                candidate(
                    c,
                    mode,
                    &prompt,
                    reply_of(&replies, Role::Solution, c, None),
                )
            })
            .collect();
        let messages: Vec<Arc<str>> = candidates
            .iter()
            .filter_map(|c| c.solution.clone())
            .collect();
        if !messages.is_empty() {
            self.messages = messages;
        }
        Step::Done(IterationEnd {
            candidates,
            best: None,
        })
    }
}
