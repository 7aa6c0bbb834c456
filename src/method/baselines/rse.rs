//! RSE, Recycling Search Experience (arXiv 2601.21684): N attempts per iteration. From
//! iteration 1 on, each of the previous iteration's attempts is first distilled by the
//! extractor (role `extraction`) into verified propositions and critical pitfalls; the
//! items are merged into the problem's experience bank (the bank actor de-duplicates them
//! by Jaccard similarity of the same normalized tokens as TMAS's banks, at
//! `method.dedup_threshold`; the original uses sentence embeddings at cosine 0.8); then
//! the N attempts see the bank: propositions as hypotheses to verify, pitfalls as
//! forbidden.
//!
//! Choices: the bank only grows (the original merges new items into the old bank); an
//! extraction whose reply has no JSON contributes nothing (it is not re-asked); if every
//! extraction fails the bank update is recorded as failed and the bank stays as it was.

use std::sync::Arc;

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of, text_of};
use crate::method::parse::find_json_object;
use crate::method::prompts::{TemplateKind, bullet_list};
use crate::method::result::{CandidateResult, PromptMode};
use tmas_actors::strategy::BankVersion;

/// Prefix of a proposition item in the bank.
pub const PROPOSITION_PREFIX: &str = "Proposition: ";
/// Prefix of a pitfall item in the bank.
pub const PITFALL_PREFIX: &str = "Pitfall: ";

const PROPOSITIONS: &str = "verified_propositions";
const PITFALLS: &str = "critical_pitfalls";

#[derive(Default)]
pub struct Rse {
    bank: Vec<String>,
    /// The previous iteration's attempts (candidate index, solution).
    prev: Vec<(u32, Arc<str>)>,
    prompt: Option<(PromptMode, Arc<str>)>,
    extracting: bool,
}

/// The extractor's reply as bank items, `None` when it holds no JSON with either list.
pub fn parse_extraction(reply: &str) -> Option<Vec<String>> {
    let map = find_json_object(reply, &[PROPOSITIONS, PITFALLS])?;
    let list = |key: &str| -> Vec<String> {
        map.get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut items: Vec<String> = list(PROPOSITIONS)
        .into_iter()
        .map(|s| format!("{PROPOSITION_PREFIX}{s}"))
        .collect();
    items.extend(
        list(PITFALLS)
            .into_iter()
            .map(|s| format!("{PITFALL_PREFIX}{s}")),
    );
    Some(items)
}

impl Rse {
    fn solve(&mut self, cx: &Ctx) -> Step {
        self.extracting = false;
        let (mode, prompt) = if self.bank.is_empty() {
            (PromptMode::Fresh, cx.fresh_prompt())
        } else {
            let props: Vec<&str> = self
                .bank
                .iter()
                .filter_map(|i| i.strip_prefix(PROPOSITION_PREFIX))
                .collect();
            let pits: Vec<&str> = self
                .bank
                .iter()
                .filter_map(|i| i.strip_prefix(PITFALL_PREFIX))
                .collect();
            let text = cx.prompts.render(
                TemplateKind::RseSolution,
                &[
                    &cx.problem.question,
                    &cx.style(),
                    &bullet_list(&props),
                    &bullet_list(&pits),
                ],
            );
            (PromptMode::Refine, text.into())
        };
        self.prompt = Some((mode, prompt.clone()));
        Step::Calls(
            (0..cx.params.n as u32)
                .map(|c| Req::new(Role::Solution, c, None, prompt.clone()))
                .collect(),
        )
    }
}

impl Method for Rse {
    fn begin(&mut self, cx: &Ctx, t: u32) -> Step {
        if t == 0 || self.prev.is_empty() {
            return self.solve(cx);
        }
        self.extracting = true;
        Step::Calls(
            self.prev
                .iter()
                .map(|(c, s)| {
                    let prompt = cx
                        .prompts
                        .render(TemplateKind::Extraction, &[&cx.problem.question, s]);
                    Req::new(Role::Extraction, *c, None, prompt.into())
                })
                .collect(),
        )
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        if self.extracting {
            let mut any = false;
            let mut proposed = self.bank.clone();
            for (c, _) in &self.prev {
                let text = text_of(reply_of(&replies, Role::Extraction, *c, None));
                if let Some(items) = text.as_deref().and_then(parse_extraction) {
                    any = true;
                    proposed.extend(items);
                }
            }
            return Step::UpdateBank(any.then_some(proposed));
        }
        let (mode, prompt) = self
            .prompt
            .clone()
            .unwrap_or_else(|| (PromptMode::Fresh, cx.fresh_prompt()));
        let experience_items = self.bank.len();
        let candidates: Vec<CandidateResult> = (0..cx.params.n as u32)
            .map(|c| {
                let mut cand = candidate(
                    c,
                    mode,
                    &prompt,
                    reply_of(&replies, Role::Solution, c, None),
                );
                cand.experience_items = experience_items;
                cand
            })
            .collect();
        let prev: Vec<(u32, Arc<str>)> = candidates
            .iter()
            .filter_map(|c| Some((c.index, c.solution.clone()?)))
            .collect();
        if !prev.is_empty() {
            self.prev = prev;
        }
        Step::Done(IterationEnd {
            candidates,
            best: None,
        })
    }

    fn on_bank(&mut self, cx: &Ctx, _t: u32, version: &BankVersion) -> Step {
        self.bank = version.items.to_vec();
        self.solve(cx)
    }

    fn bank(&self) -> Vec<String> {
        self.bank.clone()
    }
}
