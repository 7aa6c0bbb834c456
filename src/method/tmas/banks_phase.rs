//! The end of an iteration: the experience and guideline agents run concurrently, their
//! replies are parsed (re-asked while unparseable, up to `max_bank_attempts` calls), and the
//! proposals go to the bank actors, which apply the merge policies and report back.

use tmas_actors::strategy::{BankVersion, CallFailure, CallKey, CallOutcome, Command};
use tmas_client::wire::PromptText;

use super::render::{self, Rollout};
use super::{IterationState, TmasStrategy};
use crate::method::banks::{EXPERIENCE_BANK, GUIDELINE_BANK};
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the memory agent's reply.
    Asking,
    /// `UpdateBank` sent; waiting for the bank's version.
    Merging,
    Done,
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
        task.state = State::Merging;
        task.record.proposed = proposed.is_some();
        vec![Command::UpdateBank {
            bank: task.bank.into(),
            iteration: it.iteration,
            proposed,
        }]
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
