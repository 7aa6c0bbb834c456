//! Sampling rollouts of RL instances from the `solution` role, as a training loop's
//! rollout workers would: a group of k rollouts per instance; an experience-utilization
//! instance's group is split into a Base half (its prompt) and a Bank half (its
//! `bank_prompt`). On the simulator this shows, before any GPU time, what each reward
//! makes of a policy's rollouts (`tmas rl-rollouts`, then `tmas rl-score --compare`).

use std::sync::Arc;

use futures::future::join_all;
use tmas_actors::strategy::{CallExecutor, CallKey};
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};

use super::batch::{Rollout, Source};
use super::data::Instance;
use super::rewards::GroupKind;

/// Where solution calls go.
#[derive(Clone)]
pub struct Sampler {
    pub executor: Arc<dyn CallExecutor>,
    pub group: Arc<str>,
    pub role: Arc<str>,
    pub sampling: Sampling,
}

/// The sampled batch and what could not be sampled.
#[derive(Debug, Clone, Default)]
pub struct Sampled {
    pub rollouts: Vec<Rollout>,
    /// Solution calls that failed (their rollouts are missing from the batch).
    pub failed: usize,
}

impl Sampler {
    /// `per_prompt` rollouts per instance (for experience instances, half Base and half
    /// Bank, Base getting the odd one). Group ids are `SOURCE-ROW`, rows numbered in
    /// `instances` order; rollouts come out grouped, in that order.
    pub async fn sample(&self, instances: &[Instance], per_prompt: usize) -> Sampled {
        let calls = instances.iter().enumerate().flat_map(|(row, inst)| {
            (0..per_prompt).map(move |k| {
                let bank_half = inst.source == Source::Experience && k >= per_prompt.div_ceil(2);
                let (kind, prompt) = match (&inst.bank_prompt, bank_half) {
                    (Some(bank), true) => (GroupKind::Bank, bank.as_str()),
                    _ => (GroupKind::Base, inst.prompt.as_str()),
                };
                self.one(row, k, inst, kind, prompt)
            })
        });
        let results = join_all(calls).await;
        let mut out = Sampled::default();
        for r in results {
            match r {
                Some(rollout) => out.rollouts.push(rollout),
                None => out.failed += 1,
            }
        }
        out
    }

    async fn one(
        &self,
        row: usize,
        k: usize,
        inst: &Instance,
        kind: GroupKind,
        prompt: &str,
    ) -> Option<Rollout> {
        let problem: Arc<str> = Arc::from(inst.question_id.as_str());
        let key = CallKey {
            problem: problem.clone(),
            iteration: inst.iteration,
            role: self.role.clone(),
            candidate: Some(row as u32),
            index: Some(k as u32),
            attempt: 0,
        };
        let request = ChatRequest {
            messages: vec![ChatMessage::user(prompt.to_owned())],
            sampling: self.sampling,
            tags: CallTags {
                role: self.role.clone(),
                problem,
                iteration: inst.iteration,
                call: None,
                affinity: None,
            },
            stream: false,
        };
        match self
            .executor
            .execute_call(&key, self.group.clone(), request)
            .await
        {
            Ok(resp) => Some(Rollout {
                question_id: inst.question_id.clone(),
                group_id: format!("{}-{row}", inst.source.as_str()),
                group_kind: (inst.source == Source::Experience).then_some(kind),
                source: inst.source,
                ground_truth: inst.ground_truth.clone(),
                question: inst.question.clone(),
                guideline_bank: inst.guideline_bank.clone(),
                response: resp.content.to_string(),
            }),
            Err(failure) => {
                tracing::warn!(%key, kind = %failure.kind, "rollout call failed: {}", failure.message);
                None
            }
        }
    }
}
