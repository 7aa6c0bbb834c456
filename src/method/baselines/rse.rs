//! RSE, Recycling Search Experience (arXiv 2601.21684): N attempts per iteration. From
//! iteration 1 on, each of the previous iteration's attempts is first distilled by the
//! extractor (role `extraction`) into verified propositions and critical pitfalls; the new
//! items are de-duplicated and merged into the problem's experience bank; then the N
//! attempts see the bank: propositions as hypotheses to verify, pitfalls as forbidden.
//!
//! De-duplication (`method.rse_dedup`):
//! - `jaccard` (default): the bank actor's merge policy drops near-duplicates by the
//!   Jaccard similarity of the same normalized tokens as TMAS's banks, at
//!   `method.dedup_threshold`;
//! - `embeddings` (the original's rule): after the extraction phase, one embeddings call
//!   (role `embedding`) embeds the new items, and a new item whose cosine with an item of
//!   its kind already in the bank, or with an earlier new item kept, is at or above
//!   `method.embedding_threshold` is dropped (`cosine`); the rest are proposed to the bank.
//!
//! Why the embeddings decision lives here, in the strategy, and not in the bank's merge
//! policy: the vectors come from a model call, and only the strategy makes calls. Made
//! here, the call goes through the role pools, the client's limits and retries, the
//! run store and the budget accounting like every other call, and the decision is a pure
//! function of its stored reply, so a resumed run replays the call and decides exactly as
//! before. A merge policy is synchronous code inside the bank actor; it cannot wait for a
//! call, and one made behind the strategy's back would be neither recorded nor counted.
//! The bank actor still enforces its own invariants on whatever is proposed: append-only
//! (nothing is ever removed or rewritten) and no entry identical, after normalization, to
//! one it holds (its policy runs at similarity 1, `BaselineParams::rse_bank_threshold`).
//! The items the strategy drops are recorded with the update (`deduplicated`), with
//! reasons like the bank's own rejections.
//!
//! Choices: the bank only grows (the original merges new items into the old bank); an
//! extraction whose reply has no JSON contributes nothing (it is not re-asked); if every
//! extraction fails the bank update is recorded as failed and the bank stays as it was.
//! With embeddings: an item's text is embedded without its `Proposition: ` / `Pitfall: `
//! prefix and compared only with items of the same kind (a verified fact and a warning
//! about the same value are two items, as in TMAS's banks); items already in the bank
//! (same text) are not embedded again, and identical new texts are sent once; no
//! embeddings call is made when no new item was extracted; a bank item whose vector is
//! unknown (e.g. one refused by the bank and proposed again) is embedded in the same call;
//! if the embeddings call fails, the update is recorded as failed and the bank stays as it
//! was (mixing in the lexical rule would make one run's bank follow two rules).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, embeddings_of, reply_of,
    text_of,
};
use crate::config::RseDedup;
use crate::method::banks::duplicate_rejection;
use crate::method::parse::find_json_object;
use crate::method::prompts::{TemplateKind, bullet_list};
use crate::method::result::{CandidateResult, PromptMode};
use tmas_actors::strategy::BankVersion;

pub(crate) mod cosine;

/// The roles RSE calls under `dedup`: the attempts, from the second iteration on the
/// extractions of the previous ones and, with embeddings, one embeddings call of their
/// items.
pub fn roles(dedup: RseDedup) -> &'static [Role] {
    match dedup {
        RseDedup::Jaccard => &[Role::Solution, Role::Extraction],
        RseDedup::Embeddings => &[Role::Solution, Role::Extraction, Role::Embedding],
    }
}

/// Prefix of a proposition item in the bank.
pub const PROPOSITION_PREFIX: &str = "Proposition: ";
/// Prefix of a pitfall item in the bank.
pub const PITFALL_PREFIX: &str = "Pitfall: ";

const PROPOSITIONS: &str = "verified_propositions";
const PITFALLS: &str = "critical_pitfalls";

/// What a bank item is; only items of one kind are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    Proposition,
    Pitfall,
    /// An item without a known prefix.
    Other,
}

/// An item's kind and the text that is embedded (the prefix removed).
fn kind_and_body(item: &str) -> (ItemKind, &str) {
    if let Some(body) = item.strip_prefix(PROPOSITION_PREFIX) {
        (ItemKind::Proposition, body)
    } else if let Some(body) = item.strip_prefix(PITFALL_PREFIX) {
        (ItemKind::Pitfall, body)
    } else {
        (ItemKind::Other, item)
    }
}

/// Where the iteration is.
#[derive(Default)]
enum Phase {
    #[default]
    Solving,
    Extracting,
    /// Waiting for the embeddings of `inputs`: the bodies of `unembedded` bank items and
    /// of the `new` items, each text once.
    Embedding {
        new: Vec<String>,
        unembedded: Vec<String>,
        inputs: Vec<Arc<str>>,
    },
}

#[derive(Default)]
pub struct Rse {
    bank: Vec<String>,
    /// The previous iteration's attempts (candidate index, solution).
    prev: Vec<(u32, Arc<str>)>,
    prompt: Option<(PromptMode, Arc<str>)>,
    phase: Phase,
    /// The vector of each bank item (embeddings de-duplication).
    vectors: BTreeMap<String, Arc<[f32]>>,
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
        self.phase = Phase::Solving;
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

    /// The extractions have reported: the update to make (or the embeddings call first).
    fn on_extractions(&mut self, cx: &Ctx, replies: &Replies) -> Step {
        let mut any = false;
        let mut extracted = Vec::new();
        for (c, _) in &self.prev {
            let text = text_of(reply_of(replies, Role::Extraction, *c, None));
            if let Some(items) = text.as_deref().and_then(parse_extraction) {
                any = true;
                extracted.extend(items);
            }
        }
        if !any {
            return update(None, Vec::new());
        }
        if cx.params.rse_dedup == RseDedup::Jaccard {
            let mut proposed = self.bank.clone();
            proposed.extend(extracted);
            return update(Some(proposed), Vec::new());
        }
        let new: Vec<String> = extracted
            .into_iter()
            .filter(|item| !self.bank.contains(item))
            .collect();
        if new.is_empty() {
            return update(Some(self.bank.clone()), Vec::new());
        }
        let unembedded: Vec<String> = self
            .bank
            .iter()
            .filter(|item| !self.vectors.contains_key(*item))
            .cloned()
            .collect();
        let mut inputs: Vec<Arc<str>> = Vec::new();
        for item in unembedded.iter().chain(&new) {
            let body = kind_and_body(item).1;
            if !inputs.iter().any(|i| &**i == body) {
                inputs.push(body.into());
            }
        }
        self.phase = Phase::Embedding {
            new,
            unembedded,
            inputs: inputs.clone(),
        };
        Step::Embed(inputs)
    }

    /// The embeddings call has reported: drop the near-duplicates, propose the rest.
    fn on_embeddings(
        &mut self,
        cx: &Ctx,
        replies: &Replies,
        new: Vec<String>,
        unembedded: Vec<String>,
        inputs: Vec<Arc<str>>,
    ) -> Step {
        let vectors = match embeddings_of(replies) {
            Some(Ok(r)) => r.embeddings.clone(),
            // A failed call is in the iteration's failure records (the driver's).
            _ => None,
        };
        // The client hands on only replies with one vector per input; anything else
        // (a test double) counts as a failed call.
        let Some(vectors) = vectors.filter(|v| v.len() == inputs.len()) else {
            return update(None, Vec::new());
        };
        let vector_of = |item: &str| -> Arc<[f32]> {
            let body = kind_and_body(item).1;
            inputs
                .iter()
                .position(|i| &**i == body)
                .map_or_else(|| Arc::from(Vec::new()), |p| vectors[p].as_slice().into())
        };
        for item in unembedded {
            let v = vector_of(&item);
            self.vectors.insert(item, v);
        }
        let existing: Vec<(&str, Arc<[f32]>)> = self
            .bank
            .iter()
            .filter_map(|item| Some((item.as_str(), self.vectors.get(item)?.clone())))
            .collect();
        let new_vectors: Vec<Arc<[f32]>> = new.iter().map(|item| vector_of(item)).collect();
        let kind = |item: &str| kind_and_body(item).0;
        let verdicts = cosine::deduplicate(
            &existing
                .iter()
                .map(|(item, v)| (kind(item), &v[..]))
                .collect::<Vec<_>>(),
            &new.iter()
                .zip(&new_vectors)
                .map(|(item, v)| (kind(item), &v[..]))
                .collect::<Vec<_>>(),
            cx.params.embedding_threshold,
        );
        let mut proposed = self.bank.clone();
        let mut deduplicated = Vec::new();
        for (i, verdict) in verdicts.into_iter().enumerate() {
            let item = &new[i];
            match verdict {
                None => {
                    proposed.push(item.clone());
                    self.vectors.insert(item.clone(), new_vectors[i].clone());
                }
                Some((dup, similarity)) => {
                    let dup = match dup {
                        cosine::Duplicate::Existing(j) => existing[j].0,
                        cosine::Duplicate::New(j) => new[j].as_str(),
                    };
                    deduplicated.push(duplicate_rejection(
                        item,
                        dup,
                        "cosine",
                        similarity,
                        cx.params.embedding_threshold,
                    ));
                }
            }
        }
        update(Some(proposed), deduplicated)
    }
}

fn update(
    proposed: Option<Vec<String>>,
    deduplicated: Vec<tmas_actors::strategy::Rejection>,
) -> Step {
    Step::UpdateBank {
        proposed,
        deduplicated,
    }
}

impl Method for Rse {
    fn begin(&mut self, cx: &Ctx, t: u32) -> Step {
        if t == 0 || self.prev.is_empty() {
            return self.solve(cx);
        }
        self.phase = Phase::Extracting;
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
        match std::mem::take(&mut self.phase) {
            Phase::Extracting => return self.on_extractions(cx, &replies),
            Phase::Embedding {
                new,
                unembedded,
                inputs,
            } => return self.on_embeddings(cx, &replies, new, unembedded, inputs),
            Phase::Solving => {}
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
        // Items the bank refused keep no vector: if proposed again, they are embedded again.
        let bank = &self.bank;
        self.vectors.retain(|item, _| bank.contains(item));
        self.solve(cx)
    }

    fn bank(&self) -> Vec<String> {
        self.bank.clone()
    }
}
