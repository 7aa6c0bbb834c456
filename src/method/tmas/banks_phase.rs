//! The end of an iteration: the experience and guideline agents run concurrently, their
//! replies are parsed (re-asked while unparseable, up to `max_bank_attempts` calls), and the
//! proposals go to the bank actors, which apply the merge policies and report back.
//!
//! With `bank_embeddings`, a parsed proposal first waits for one embeddings call (role
//! `embedding`, key index = the bank's slot) of the canonical spellings of the bank's and
//! the proposal's items not embedded yet; the proposal then goes to the bank with the
//! vectors, and the merge policy applies the meaning-aware rule. The call goes through the
//! pools, the client, the run store (a resumed run replays it) and the traces like any
//! other. When it fails (after the client's retries) the update is not lost: it goes to
//! the bank without vectors, the lexical rule decides, and the record says so
//! (`lexical_fallback`, a warning). When every text is already embedded, no call is made.

use std::sync::Arc;

use tmas_actors::strategy::{
    BankVersion, CallFailure, CallKey, CallOutcome, Command, EmbeddingSpec, ItemEmbeddings,
};
use tmas_client::wire::{CallTags, EmbeddingRequest, PromptText};

use super::render::{self, Rollout};
use super::{IterationState, TmasStrategy};
use crate::method::banks::{EXPERIENCE_BANK, GUIDELINE_BANK, embedding_text};
use crate::method::call_key::call_key;
use crate::method::parse::{parse_experience_reply, parse_guideline_reply};
use crate::method::result::{BankUpdateRecord, FailureRecord, UnusableReply};
use crate::role::Role;

/// How much of an unreadable memory-agent reply is logged: enough to see what the model
/// wrote (prose, a cut-off object, broken escapes) without flooding the log.
const REPLY_HEAD_BYTES: usize = 300;

/// The first [`REPLY_HEAD_BYTES`] bytes of `reply`, cut back to a character boundary.
fn reply_head(reply: &str) -> &str {
    let mut end = reply.len().min(REPLY_HEAD_BYTES);
    while !reply.is_char_boundary(end) {
        end -= 1;
    }
    &reply[..end]
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Waiting for the memory agent's reply.
    Asking,
    /// Waiting for the embeddings of `inputs` (texts not embedded yet) before `proposed`
    /// goes to the bank.
    Embedding {
        proposed: Vec<String>,
        inputs: Vec<Arc<str>>,
    },
    /// `UpdateBank` sent; waiting for the bank's version.
    Merging,
    Done,
}

/// The slot of a bank in [`TmasStrategy`]'s caches, and the index of its embeddings
/// call's key.
fn slot(bank: &str) -> usize {
    usize::from(bank != EXPERIENCE_BANK)
}

pub(super) struct BankTask {
    bank: &'static str,
    role: Role,
    /// Shared by re-asks.
    prompt: PromptText,
    state: State,
    pub record: BankUpdateRecord,
}

#[cfg(test)]
#[test]
fn reply_head_cuts_at_a_character_boundary() {
    assert_eq!(reply_head("short"), "short");
    let long = "é".repeat(200); // 400 bytes
    assert_eq!(reply_head(&long).len(), 300);
    let odd = format!("x{}", "é".repeat(200));
    assert_eq!(reply_head(&odd).len(), 299);
}

impl BankTask {
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }
}

/// The command that sends `proposed` (with `embeddings`, if any) to bank `bank`.
fn update(
    bank: &'static str,
    iteration: u32,
    proposed: Option<Vec<String>>,
    embeddings: Option<Arc<ItemEmbeddings>>,
) -> Command {
    Command::UpdateBank {
        bank: bank.into(),
        iteration,
        proposed,
        embeddings,
    }
}

impl TmasStrategy {
    /// Issues the memory-agent calls (experience is skipped when M = 0 or disabled).
    pub(super) fn start_banks(
        &mut self,
        it: &mut IterationState,
        rollouts: &[Rollout],
    ) -> Vec<Command> {
        let q = &self.problem.question;
        // Both memory agents see the same rollouts: rendered once (~350 KB with 40 KB
        // solutions), and only if one of them runs.
        let any = self.params.experience_enabled() || self.params.use_guideline;
        let shown = if any {
            render::bank_rollouts(&self.prompts, rollouts)
        } else {
            PromptText::default()
        };
        let mut tasks = Vec::new();
        if self.params.experience_enabled() {
            let prompt = render::experience(&self.prompts, q, &self.experience, &shown);
            tasks.push((EXPERIENCE_BANK, Role::Experience, prompt));
        }
        if self.params.use_guideline {
            let prompt = render::guideline(&self.prompts, q, &self.guidelines, &shown);
            tasks.push((GUIDELINE_BANK, Role::Guideline, prompt));
        }
        let mut commands = Vec::new();
        for (bank, role, prompt) in tasks {
            it.banks.push(BankTask {
                bank,
                role,
                prompt: prompt.clone(),
                state: State::Asking,
                record: BankUpdateRecord {
                    bank: bank.into(),
                    attempts: 1,
                    proposed: false,
                    version: None,
                    deduplicated: Vec::new(),
                    lexical_fallback: false,
                },
            });
            commands.push(self.call(it, role, None, None, 0, prompt));
        }
        commands
    }

    /// A memory agent replied (or failed).
    pub(super) fn on_bank_call(
        &mut self,
        it: &mut IterationState,
        key: &CallKey,
        outcome: &CallOutcome,
    ) -> Vec<Command> {
        let role = Role::from_label(&key.role);
        let Some(t) = it.banks.iter().position(|b| Some(b.role) == role) else {
            return Vec::new();
        };
        if it.banks[t].state != State::Asking {
            return Vec::new();
        }
        let proposed = match outcome {
            Ok(r) if it.banks[t].role == Role::Experience => parse_experience_reply(&r.content),
            Ok(r) => parse_guideline_reply(&r.content),
            Err(_) => None, // already recorded as a failed call
        };
        if let (Ok(reply), None) = (outcome, &proposed) {
            let head = reply_head(&reply.content);
            tracing::warn!(
                problem = %self.problem.id,
                call = %key,
                reply_head = head,
                "unreadable {} bank reply (first {REPLY_HEAD_BYTES} bytes logged)",
                it.banks[t].bank
            );
            it.failures.push(FailureRecord {
                key: key.clone(),
                kind: UnusableReply::UnparseableJson.into(),
                message: format!(
                    "no JSON object with the {} bank's list in the reply; it starts: {head:?}",
                    it.banks[t].bank
                ),
            });
            if key.attempt + 1 < self.params.max_bank_attempts {
                let task = &mut it.banks[t];
                task.record.attempts += 1;
                let (role, prompt) = (task.role, task.prompt.clone());
                return vec![self.call(it, role, None, None, key.attempt + 1, prompt)];
            }
        }
        let task = &mut it.banks[t];
        // A call cut by the run's shutdown is no failure: the problem is not stored, and
        // a resume makes the call.
        let stopping = outcome.as_ref().is_err_and(CallFailure::is_stop);
        if proposed.is_none() && stopping {
            tracing::debug!(
                problem = %self.problem.id,
                iteration = it.iteration,
                bank = task.bank,
                "bank update not made: the run is stopping"
            );
        } else if proposed.is_none() {
            tracing::warn!(
                problem = %self.problem.id,
                iteration = it.iteration,
                bank = task.bank,
                attempts = task.record.attempts,
                "bank update failed; the bank keeps its items"
            );
        }
        task.record.proposed = proposed.is_some();
        let bank = task.bank;
        match proposed {
            Some(proposed) if self.params.bank_embeddings => {
                self.embed_or_merge(it, t, bank, proposed)
            }
            proposed => {
                it.banks[t].state = State::Merging;
                vec![update(bank, it.iteration, proposed, None)]
            }
        }
    }

    /// The items of bank `bank` as it stands (the texts its merge compares the proposal
    /// with).
    fn bank_items(&self, bank: &str) -> &[String] {
        if bank == EXPERIENCE_BANK {
            &self.experience
        } else {
            &self.guidelines
        }
    }

    /// With embeddings: the embeddings call of the texts of the bank and of `proposed`
    /// not embedded yet, or, when there are none, the update with the vectors known.
    fn embed_or_merge(
        &mut self,
        it: &mut IterationState,
        t: usize,
        bank: &'static str,
        proposed: Vec<String>,
    ) -> Vec<Command> {
        let known = &self.vectors[slot(bank)];
        let mut inputs: Vec<Arc<str>> = Vec::new();
        for item in self.bank_items(bank).iter().chain(&proposed) {
            let text = embedding_text(item);
            if !text.is_empty()
                && !known.contains_key(&text)
                && !inputs.iter().any(|i| **i == *text)
            {
                inputs.push(text.into());
            }
        }
        if inputs.is_empty() {
            let embeddings = self.item_embeddings(bank, &proposed);
            it.banks[t].state = State::Merging;
            return vec![update(bank, it.iteration, Some(proposed), Some(embeddings))];
        }
        let role = Role::Embedding;
        let key = call_key(
            &self.problem.id,
            it.iteration,
            role,
            None,
            Some(slot(bank) as u32),
            0,
        );
        it.calls.count(role);
        let request = EmbeddingRequest {
            inputs: inputs.clone(),
            tags: CallTags {
                role: role.as_str().into(),
                problem: self.problem.id.clone(),
                iteration: it.iteration,
                call: None,
                affinity: crate::method::affinity::affinity_key(
                    &self.problem.id,
                    it.iteration,
                    role,
                    None,
                ),
            },
        };
        self.pending.insert(key.clone(), request.input_bytes());
        it.banks[t].state = State::Embedding { proposed, inputs };
        vec![Command::Embed(EmbeddingSpec { key, request })]
    }

    /// The vectors known for the bank's items and `proposed`, by item (as the merge
    /// policy looks them up).
    fn item_embeddings(&self, bank: &str, proposed: &[String]) -> Arc<ItemEmbeddings> {
        let known = &self.vectors[slot(bank)];
        let mut out = ItemEmbeddings::new();
        for item in self.bank_items(bank).iter().chain(proposed) {
            if let Some(v) = known.get(&embedding_text(item)) {
                out.insert(item.trim().to_string(), v.clone());
            }
        }
        Arc::new(out)
    }

    /// A bank's embeddings call reported: the update goes to the bank, with the vectors,
    /// or without them (lexical rule) when the call failed.
    pub(super) fn on_embeddings(
        &mut self,
        it: &mut IterationState,
        key: &CallKey,
        outcome: &CallOutcome,
    ) -> Vec<Command> {
        let Some(t) = it.banks.iter().position(|b| {
            Some(slot(b.bank) as u32) == key.index && matches!(b.state, State::Embedding { .. })
        }) else {
            return Vec::new();
        };
        let State::Embedding { proposed, inputs } =
            std::mem::replace(&mut it.banks[t].state, State::Merging)
        else {
            return Vec::new();
        };
        let bank = it.banks[t].bank;
        // The client hands on only replies with one vector per input; anything else (a
        // test double) counts as a failed call.
        let vectors = match outcome {
            Ok(r) => r.embeddings.as_ref().filter(|v| v.len() == inputs.len()),
            Err(_) => None,
        };
        let Some(vectors) = vectors else {
            let stopping = outcome.as_ref().is_err_and(CallFailure::is_stop);
            if !stopping {
                tracing::warn!(
                    problem = %self.problem.id,
                    iteration = it.iteration,
                    bank,
                    "the bank's embeddings call failed; this update merges by the lexical rule"
                );
            }
            it.banks[t].record.lexical_fallback = true;
            return vec![update(bank, it.iteration, Some(proposed), None)];
        };
        let known = &mut self.vectors[slot(bank)];
        for (text, v) in inputs.iter().zip(vectors.iter()) {
            known.insert(text.to_string(), v.as_slice().into());
        }
        let embeddings = self.item_embeddings(bank, &proposed);
        vec![update(bank, it.iteration, Some(proposed), Some(embeddings))]
    }

    /// The bank actor applied an update: adopt its items.
    pub(super) fn on_bank_version(
        &mut self,
        it: &mut IterationState,
        version: BankVersion,
    ) -> Vec<Command> {
        let Some(task) = it
            .banks
            .iter_mut()
            .find(|b| b.bank == version.bank.as_ref() && b.state == State::Merging)
        else {
            tracing::warn!(problem = %self.problem.id, bank = %version.bank, "bank version not awaited; ignored");
            return Vec::new();
        };
        let items = version.items.to_vec();
        // Texts no longer in the bank keep no vector: if proposed again, they are
        // embedded again.
        let texts: std::collections::BTreeSet<String> =
            items.iter().map(|i| embedding_text(i)).collect();
        self.vectors[slot(task.bank)].retain(|text, _| texts.contains(text));
        if task.bank == EXPERIENCE_BANK {
            self.experience = items;
        } else {
            self.guidelines = items;
        }
        task.record.version = Some(version);
        task.state = State::Done;
        Vec::new()
    }
}
