//! RSE, Recycling Search Experience (arXiv 2601.21684; released code WangXinglin/RSE): N
//! attempts per iteration. From iteration 1 on, each of the previous iteration's attempts
//! is first distilled by the extractor (role `extraction`) into verified propositions and
//! critical pitfalls; the new items are de-duplicated and merged into the problem's
//! experience bank; then the N attempts see the bank: propositions as hypotheses to
//! verify, pitfalls as forbidden. `docs/method.md` sets each choice beside the released
//! file and line it follows.
//!
//! As released:
//! - the extractor reads the attempt's reasoning, a blank line, then its answer
//!   (`experience_distillation.py` lines 212–217), see [`attempt_text`];
//! - a reply with no JSON of the two lists is asked again, up to
//!   `method.rse_extraction_attempts` calls in all (released: 5 re-asks, lines 259–315);
//! - an attempt with the bank gets the instructions and the bank as a system message and
//!   the question alone as the user message (`experience_guided_search.py` lines 326–340),
//!   pitfalls before propositions, each list in sorted order (lines 97–157);
//! - with embeddings, de-duplication follows the released rule ([`cosine`]).
//!
//! De-duplication (`method.rse_dedup`, resolved from `auto` when the config is loaded):
//! - `jaccard`: the bank actor's merge policy drops near-duplicates by the Jaccard
//!   similarity of the same normalized tokens as TMAS's banks, at
//!   `method.dedup_threshold`; the bank only grows;
//! - `embeddings` (the released rule): after the extraction phase, one embeddings call
//!   (role `embedding`) embeds the items whose vectors are not known yet, and
//!   [`cosine::dedup_released`] decides, per kind, over the bank's items and the new ones;
//!   the strategy proposes the whole resulting bank (a new item may take an older
//!   near-duplicate's place, as released).
//!
//! Why the embeddings decision lives here, in the strategy, and not in the bank's merge
//! policy: the vectors come from a model call, and only the strategy makes calls. Made
//! here, the call goes through the role pools, the client's limits and retries, the
//! run store and the budget accounting like every other call, and the decision is a pure
//! function of its stored reply, so a resumed run replays the call and decides exactly as
//! before. A merge policy is synchronous code inside the bank actor; it cannot wait for a
//! call, and one made behind the strategy's back would be neither recorded nor counted.
//! The bank actor still refuses blanks and entries identical after normalization
//! (`BaselineParams::rse_bank_policy`). The items the rule merged away are recorded with
//! the update (`deduplicated`), with reasons like the bank's own rejections.
//!
//! Choices: a failed extraction call (after the client's retries) is not re-asked; if no
//! extraction parses the bank update is recorded as failed and the bank stays as it was.
//! With embeddings: an item's text is embedded without its `Proposition: ` / `Pitfall: `
//! prefix and compared only with items of its kind (the released code de-duplicates the
//! two lists apart); a bank item's vector is kept from the call that embedded it, and
//! identical texts are sent once; no embeddings call is made when no extracted item is new
//! (the bank stays as it is); if the embeddings call fails, the update is recorded as
//! failed and the bank stays as it was (mixing in the lexical rule would make one run's
//! bank follow two rules).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, embeddings_of, reply_of,
    text_of,
};
use crate::config::BankDedup;
use crate::method::banks::merged_rejection;
use crate::method::parse::find_json_object;
use crate::method::prompts::{TemplateKind, bullet_list};
use crate::method::result::{CandidateResult, PromptMode};
use tmas_actors::strategy::{BankVersion, CallOutcome, Rejection};
use tmas_client::wire::ChatResponse;

pub(crate) mod cosine;

/// The roles RSE calls under `dedup`: the attempts, from the second iteration on the
/// extractions of the previous ones and, with embeddings, one embeddings call of their
/// items.
pub fn roles(dedup: BankDedup) -> &'static [Role] {
    if dedup.uses_embeddings() {
        &[Role::Solution, Role::Extraction, Role::Embedding]
    } else {
        &[Role::Solution, Role::Extraction]
    }
}

/// Prefix of a proposition item in the bank.
pub const PROPOSITION_PREFIX: &str = "Proposition: ";
/// Prefix of a pitfall item in the bank.
pub const PITFALL_PREFIX: &str = "Pitfall: ";

const PROPOSITIONS: &str = "verified_propositions";
const PITFALLS: &str = "critical_pitfalls";

/// What a bank item is; only items of one kind are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// What the extractor reads of an attempt, as released: the reasoning, a blank line, then
/// the answer. The reasoning is the server's separate reasoning field, or else the text
/// before the first `</think>` (its `<think>` removed) with the answer after it; without
/// either, the whole reply is the answer. `None` when nothing is left.
pub fn attempt_text(r: &ChatResponse) -> Option<Arc<str>> {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let (reasoning, answer): (String, &str) = match r.reasoning.as_deref() {
        Some(reasoning) if !reasoning.trim().is_empty() => {
            (reasoning.trim().to_string(), r.content.trim())
        }
        _ => match r.content.split_once(CLOSE) {
            Some((before, after)) => (before.trim().replace(OPEN, "").trim().into(), after.trim()),
            None => (String::new(), r.content.trim()),
        },
    };
    let text = match (reasoning.is_empty(), answer.is_empty()) {
        (true, true) => return None,
        (true, false) => answer.to_string(),
        (false, true) => reasoning,
        (false, false) => format!("{reasoning}\n\n{answer}"),
    };
    Some(text.into())
}

/// Where the iteration is.
#[derive(Default)]
enum Phase {
    #[default]
    Solving,
    /// Extraction call number `attempt` (0 the first) of the attempts `asked`; `items`
    /// holds what the earlier calls of this iteration returned, by attempt index.
    Extracting {
        attempt: u32,
        asked: Vec<u32>,
        items: BTreeMap<u32, Vec<String>>,
    },
    /// Waiting for the embeddings of `inputs`: the bodies of `unembedded` bank items and
    /// of the `new` items, each text once.
    Embedding {
        new: Vec<String>,
        unembedded: Vec<String>,
        inputs: Vec<Arc<str>>,
    },
}

/// An attempt's prompt: its mode, the system message (instructions and bank, none for a
/// fresh attempt) and the user message.
type AttemptPrompt = (PromptMode, Option<Arc<str>>, Arc<str>);

#[derive(Default)]
pub struct Rse {
    bank: Vec<String>,
    /// The previous iteration's attempts (candidate index, reasoning and answer).
    prev: Vec<(u32, Arc<str>)>,
    prompt: Option<AttemptPrompt>,
    phase: Phase,
    /// The vector of each bank item (embeddings de-duplication).
    vectors: BTreeMap<String, Arc<[f32]>>,
}

/// One listed item as text: a string, or an object as the released de-duplication reads
/// one (`experience_dedup.py` lines 184–192): a pitfall's `error_location` and
/// `reasoning_flaw` as `"location: flaw"`, else its `content`.
fn item_text(v: &serde_json::Value, pitfall: bool) -> Option<String> {
    let field = |o: &serde_json::Map<String, serde_json::Value>, k: &str| {
        o.get(k).map(|v| match v.as_str() {
            Some(s) => s.to_string(),
            None => v.to_string(),
        })
    };
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => {
            if pitfall
                && let (Some(location), Some(flaw)) =
                    (field(o, "error_location"), field(o, "reasoning_flaw"))
            {
                return Some(format!("{location}: {flaw}"));
            }
            o.get("content")
                .and_then(|c| c.as_str())
                .map(str::to_string)
        }
        _ => None,
    }
}

/// The extractor's reply as bank items, `None` when it holds no JSON with either list.
pub fn parse_extraction(reply: &str) -> Option<Vec<String>> {
    let map = find_json_object(reply, &[PROPOSITIONS, PITFALLS])?;
    let list = |key: &str| -> Vec<String> {
        map.get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| item_text(v, key == PITFALLS))
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

/// The system message of an attempt that sees `bank`: pitfalls and propositions each in
/// sorted order (the released prompt lists each set sorted).
fn bank_system_prompt(cx: &Ctx, bank: &[String]) -> String {
    let mut props: Vec<&str> = bank
        .iter()
        .filter_map(|i| i.strip_prefix(PROPOSITION_PREFIX))
        .collect();
    let mut pits: Vec<&str> = bank
        .iter()
        .filter_map(|i| i.strip_prefix(PITFALL_PREFIX))
        .collect();
    props.sort_unstable();
    props.dedup();
    pits.sort_unstable();
    pits.dedup();
    cx.prompts.render(
        TemplateKind::RseSolution,
        &[&cx.style(), &bullet_list(&pits), &bullet_list(&props)],
    )
}

impl Rse {
    fn solve(&mut self, cx: &Ctx) -> Step {
        self.phase = Phase::Solving;
        let prompt: AttemptPrompt = if self.bank.is_empty() {
            (PromptMode::Fresh, None, cx.fresh_prompt())
        } else {
            (
                PromptMode::Refine,
                Some(bank_system_prompt(cx, &self.bank).into()),
                cx.problem.question.clone(),
            )
        };
        self.prompt = Some(prompt.clone());
        let (_, system, user) = prompt;
        Step::Calls(
            (0..cx.params.n as u32)
                .map(|c| {
                    let req = Req::new(Role::Solution, c, None, user.clone());
                    match &system {
                        Some(s) => req.with_system(s.clone()),
                        None => req,
                    }
                })
                .collect(),
        )
    }

    /// The extraction calls of the attempts `asked`, as call number `attempt`.
    fn extract(
        &mut self,
        cx: &Ctx,
        attempt: u32,
        asked: Vec<u32>,
        items: BTreeMap<u32, Vec<String>>,
    ) -> Step {
        let reqs = self
            .prev
            .iter()
            .filter(|(c, _)| asked.contains(c))
            .map(|(c, s)| {
                let prompt = cx
                    .prompts
                    .render(TemplateKind::Extraction, &[&cx.problem.question, s]);
                Req::new(Role::Extraction, *c, None, prompt.into()).with_attempt(attempt)
            })
            .collect();
        self.phase = Phase::Extracting {
            attempt,
            asked,
            items,
        };
        Step::Calls(reqs)
    }

    /// A round of extraction calls has reported: re-ask the replies that did not parse
    /// while the budget lasts, else go on with what was extracted.
    fn on_extraction_round(
        &mut self,
        cx: &Ctx,
        replies: &Replies,
        attempt: u32,
        asked: Vec<u32>,
        mut items: BTreeMap<u32, Vec<String>>,
    ) -> Step {
        let mut again = Vec::new();
        for c in asked {
            let outcome = reply_of(replies, Role::Extraction, c, None);
            match text_of(outcome).as_deref().and_then(parse_extraction) {
                Some(parsed) => {
                    items.insert(c, parsed);
                }
                // A reply that came back but did not parse is asked again (a failed call
                // already had the client's retries).
                None if matches!(outcome, Some(Ok(_))) => again.push(c),
                None => {}
            }
        }
        if !again.is_empty() && attempt + 1 < cx.params.rse_extraction_attempts {
            return self.extract(cx, attempt + 1, again, items);
        }
        self.on_extractions(cx, items)
    }

    /// The extractions are in: the update to make (or the embeddings call first).
    fn on_extractions(&mut self, cx: &Ctx, items: BTreeMap<u32, Vec<String>>) -> Step {
        if items.is_empty() {
            return update(None, Vec::new());
        }
        let extracted: Vec<String> = items.into_values().flatten().collect();
        if !cx.params.rse_dedup.uses_embeddings() {
            let mut proposed = self.bank.clone();
            proposed.extend(extracted);
            return update(Some(proposed), Vec::new());
        }
        if extracted.iter().all(|item| self.bank.contains(item)) {
            return update(Some(self.bank.clone()), Vec::new());
        }
        let unembedded: Vec<String> = self
            .bank
            .iter()
            .filter(|item| !self.vectors.contains_key(*item))
            .cloned()
            .collect();
        let mut inputs: Vec<Arc<str>> = Vec::new();
        for item in unembedded
            .iter()
            .chain(extracted.iter().filter(|i| !self.vectors.contains_key(*i)))
        {
            let body = kind_and_body(item).1;
            if !inputs.iter().any(|i| &**i == body) {
                inputs.push(body.into());
            }
        }
        self.phase = Phase::Embedding {
            new: extracted,
            unembedded,
            inputs: inputs.clone(),
        };
        Step::Embed(inputs)
    }

    /// The embeddings call has reported: the released rule decides the new bank.
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
        let fresh = |item: &str| -> Option<Arc<[f32]>> {
            let body = kind_and_body(item).1;
            let p = inputs.iter().position(|i| &**i == body)?;
            Some(vectors[p].as_slice().into())
        };
        for item in unembedded.iter().chain(&new) {
            if !self.vectors.contains_key(item)
                && let Some(v) = fresh(item)
            {
                self.vectors.insert(item.clone(), v);
            }
        }
        // Bank items first, then the new ones: the released order ("previous", then
        // "current"), which the kept items return to.
        let all: Vec<(&str, bool)> = self
            .bank
            .iter()
            .map(|i| (i.as_str(), false))
            .chain(new.iter().map(|i| (i.as_str(), true)))
            .collect();
        let empty: Arc<[f32]> = Arc::from(Vec::new());
        let mut kept: Vec<usize> = Vec::new();
        let mut deduplicated: Vec<Rejection> = Vec::new();
        let kinds: std::collections::BTreeSet<ItemKind> =
            all.iter().map(|(i, _)| kind_and_body(i).0).collect();
        for kind in kinds {
            let members: Vec<usize> = (0..all.len())
                .filter(|&i| kind_and_body(all[i].0).0 == kind)
                .collect();
            let entries: Vec<cosine::Entry<'_>> = members
                .iter()
                .map(|&i| cosine::Entry {
                    text: kind_and_body(all[i].0).1,
                    current: all[i].1,
                    vector: self.vectors.get(all[i].0).unwrap_or(&empty),
                })
                .collect();
            let dedup = cosine::dedup_released(&entries, cx.params.embedding_threshold);
            let kept_texts: Vec<&str> = dedup.kept.iter().map(|&k| all[members[k]].0).collect();
            for (dropped, _, how) in &dedup.merged {
                let item = all[members[*dropped]].0;
                // A repeat of an entry the bank holds and keeps is no refusal (as with the
                // lexical rule's append-only bank).
                if kept_texts.contains(&item) && self.bank.iter().any(|b| b == item) {
                    continue;
                }
                let head = all[members[dedup.head_of(*dropped)]].0;
                let detail = match how {
                    cosine::Merge::Identical => "identical".to_string(),
                    cosine::Merge::Contained => "contained in it".to_string(),
                    cosine::Merge::Cosine(c) => {
                        format!("cosine {c:.2} > {:.2}", cx.params.embedding_threshold)
                    }
                };
                deduplicated.push(merged_rejection(item, head, &detail));
            }
            kept.extend(dedup.kept.iter().map(|&k| members[k]));
        }
        kept.sort_unstable();
        let mut proposed: Vec<String> = Vec::with_capacity(kept.len());
        for i in kept {
            if !proposed.iter().any(|p| p == all[i].0) {
                proposed.push(all[i].0.to_string());
            }
        }
        update(Some(proposed), deduplicated)
    }

    /// The attempts have reported: the iteration's candidates.
    fn on_attempts(&mut self, cx: &Ctx, replies: &Replies) -> Step {
        let (mode, system, user) = self
            .prompt
            .clone()
            .unwrap_or_else(|| (PromptMode::Fresh, None, cx.fresh_prompt()));
        let prompt_bytes = system.as_deref().map_or(0, str::len) + user.len();
        let experience_items = self.bank.len();
        let mut prev: Vec<(u32, Arc<str>)> = Vec::new();
        let candidates: Vec<CandidateResult> = (0..cx.params.n as u32)
            .map(|c| {
                let reply: Option<&CallOutcome> = reply_of(replies, Role::Solution, c, None);
                let mut cand = candidate(c, mode, &user, reply);
                cand.experience_items = experience_items;
                cand.prompt_bytes = prompt_bytes;
                if let Some(text) = reply.and_then(|r| r.as_ref().ok()).and_then(attempt_text) {
                    prev.push((c, text));
                }
                cand
            })
            .collect();
        if !prev.is_empty() {
            self.prev = prev;
        }
        Step::Done(IterationEnd {
            candidates,
            best: None,
        })
    }
}

fn update(proposed: Option<Vec<String>>, deduplicated: Vec<Rejection>) -> Step {
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
        let asked = self.prev.iter().map(|(c, _)| *c).collect();
        self.extract(cx, 0, asked, BTreeMap::new())
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        match std::mem::take(&mut self.phase) {
            Phase::Extracting {
                attempt,
                asked,
                items,
            } => self.on_extraction_round(cx, &replies, attempt, asked, items),
            Phase::Embedding {
                new,
                unembedded,
                inputs,
            } => self.on_embeddings(cx, &replies, new, unembedded, inputs),
            Phase::Solving => self.on_attempts(cx, &replies),
        }
    }

    fn on_bank(&mut self, cx: &Ctx, _t: u32, version: &BankVersion) -> Step {
        self.bank = version.items.to_vec();
        // Items no longer in the bank keep no vector: if extracted again, they are
        // embedded again.
        let bank = &self.bank;
        self.vectors.retain(|item, _| bank.contains(item));
        self.solve(cx)
    }

    fn bank(&self) -> Vec<String> {
        self.bank.clone()
    }
}
