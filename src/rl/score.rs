//! Judging a rollout batch and turning it into rewards and advantages: the rule check on
//! every answer, the LLM judge (role `judge`) on the answers the rules cannot decide, and
//! the guideline judge (role `guideline_judge`) on rollouts whose reward uses novelty.
//! Every judge call of a batch is issued at once; the model client's per-endpoint and
//! global in-flight caps pace them, so a 16 × 128 batch keeps the judge endpoints busy.
//! Shared by `tmas rl-score` and `tmas rl-serve`, so both give the same numbers.

use std::sync::Arc;

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use tmas_actors::strategy::CallExecutor;
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};

use super::batch::{self, Judged, RewardMode, Rollout, Scored, Source};
use super::guideline_judge;
use super::rewards::{RewardKind, RewardParams};
use crate::config::Config;
use crate::engine::judge_session::JudgeSession;
use crate::engine::judging::LlmJudge;
use crate::eval::judge::{JudgeInput, JudgeRecord, LlmJudgePolicy};
use crate::method::{PromptSet, call_key};
use crate::role::Role;

/// The guideline judge's client side.
#[derive(Clone)]
pub struct GuidelineJudge {
    pub executor: Arc<dyn CallExecutor>,
    pub group: Arc<str>,
    pub sampling: Sampling,
    pub prompts: Arc<PromptSet>,
}

impl GuidelineJudge {
    /// Novel (`Some(true)`), repeated (`Some(false)`) or no verdict (`None`: the call
    /// failed or the reply said neither; logged).
    pub async fn ask(&self, rollout: &Rollout, batch: &str, index: usize) -> Option<bool> {
        let prompt = guideline_judge::prompt(
            &self.prompts,
            &rollout.question,
            &rollout.guideline_bank,
            &rollout.response,
        );
        let problem: Arc<str> = Arc::from(format!("{batch}/{}", rollout.question_id));
        let key = call_key(
            &problem,
            0,
            Role::GuidelineJudge,
            Some(index as u32),
            None,
            0,
        );
        let request = ChatRequest {
            messages: vec![ChatMessage::user(prompt)],
            sampling: self.sampling,
            tags: CallTags {
                role: key.role.clone(),
                problem,
                iteration: 0,
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
            Ok(resp) => {
                let verdict = guideline_judge::parse_reply(&resp.content);
                if verdict.is_none() {
                    tracing::warn!(%key, "guideline judge reply has no \\boxed{{novel}} or \\boxed{{repeated}}");
                }
                verdict
            }
            Err(failure) => {
                tracing::warn!(%key, kind = %failure.kind, "guideline judge call failed: {}", failure.message);
                None
            }
        }
    }
}

/// The judges a scorer uses. Without an LLM judge, undecided answers count as wrong;
/// without a guideline judge, a batch that needs novelty against a non-empty bank is
/// refused.
#[derive(Clone, Default)]
pub struct Judges {
    pub llm: Option<LlmJudge>,
    pub guideline: Option<GuidelineJudge>,
}

/// Counts a caller should report next to the numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeCounts {
    pub rollouts: usize,
    /// Answers the rules could not decide.
    pub rule_undecided: usize,
    /// Of those, answers the LLM judge decided.
    pub llm_decided: usize,
    /// Rollouts counted as wrong because nothing decided them.
    pub undecided: usize,
    /// Novelty verdicts asked of the guideline judge.
    pub novelty_asked: usize,
    /// Rollouts whose novelty was needed but not obtained (counted as repeated).
    pub novelty_failed: usize,
}

impl JudgeCounts {
    /// True when some rollout's reward rests on a fallback rather than a verdict.
    pub fn degraded(&self) -> bool {
        self.undecided > 0 || self.novelty_failed > 0
    }
}

/// A scored batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredBatch {
    pub mode: RewardMode,
    pub params: RewardParams,
    pub rollouts: Vec<Scored>,
    pub counts: JudgeCounts,
}

impl Judges {
    /// Judges every rollout; `kinds` says which need novelty. `batch` names the batch in
    /// call keys (and so in traces and the simulator's seeding).
    pub async fn judge(
        &self,
        rollouts: &[Rollout],
        kinds: &[RewardKind],
        batch: &str,
    ) -> anyhow::Result<(Vec<Judged>, JudgeCounts)> {
        if self.guideline.is_none()
            && let Some(i) = rollouts
                .iter()
                .zip(kinds)
                .position(|(r, k)| *k == RewardKind::Novelty && !r.guideline_bank.is_empty())
        {
            anyhow::bail!(
                "rollout {i} (group `{}`) needs a novelty verdict against its guideline bank, \
                 and no guideline judge is configured (pass --config with endpoints for \
                 roles.guideline_judge)",
                rollouts[i].group_id
            );
        }
        let per_rollout = rollouts
            .iter()
            .zip(kinds)
            .enumerate()
            .map(|(i, (r, kind))| async move {
                let mut record = JudgeRecord::from_reply(&r.ground_truth, &r.response);
                // RL rewards need a boxed answer: an unboxed response is not sent to the
                // judge (JudgeInput::Boxed), it is wrong.
                let rule_undecided =
                    record.needs_llm_judge(LlmJudgePolicy::WhenUndecided, JudgeInput::Boxed);
                if rule_undecided && let Some(llm) = &self.llm {
                    let answer = record.answer.clone().unwrap_or_default();
                    let problem = format!("{batch}/{}", r.question_id);
                    let verdicts = llm
                        .ask(&r.question, &r.ground_truth, &answer, &problem, 0, i as u32)
                        .await;
                    record = record.with_llm(verdicts);
                }
                let (novel, novelty_failed, asked) = if *kind != RewardKind::Novelty {
                    (None, false, false)
                } else if r.guideline_bank.is_empty() {
                    // Nothing tried yet: every strategy is new.
                    (Some(true), false, false)
                } else {
                    match &self.guideline {
                        Some(judge) => match judge.ask(r, batch, i).await {
                            Some(v) => (Some(v), false, true),
                            None => (Some(false), true, true),
                        },
                        None => (Some(false), true, false),
                    }
                };
                let llm_decided = rule_undecided && !record.undecided && !record.llm.is_empty();
                let judged = Judged {
                    correct: crate::eval::judge::is_correct(record.score),
                    undecided: record.undecided,
                    novel,
                    novelty_failed,
                };
                (judged, rule_undecided, llm_decided, asked)
            });
        let results = join_all(per_rollout).await;
        let mut counts = JudgeCounts {
            rollouts: rollouts.len(),
            ..Default::default()
        };
        let mut judged = Vec::with_capacity(results.len());
        for (j, rule_undecided, llm_decided, asked) in results {
            counts.rule_undecided += usize::from(rule_undecided);
            counts.llm_decided += usize::from(llm_decided);
            counts.undecided += usize::from(j.undecided);
            counts.novelty_asked += usize::from(asked);
            counts.novelty_failed += usize::from(j.novelty_failed);
            judged.push(j);
        }
        Ok((judged, counts))
    }

    /// Judges and scores a batch.
    pub async fn score(
        &self,
        rollouts: &[Rollout],
        mode: RewardMode,
        params: &RewardParams,
        batch: &str,
    ) -> anyhow::Result<ScoredBatch> {
        params
            .validate()
            .map_err(|e| anyhow::anyhow!("reward parameters: {e}"))?;
        let kinds = batch::reward_kinds(rollouts, mode)?;
        let (judged, counts) = self.judge(rollouts, &kinds, batch).await?;
        let scored = batch::score(rollouts, &judged, mode, params)?;
        Ok(ScoredBatch {
            mode,
            params: *params,
            rollouts: scored,
            counts,
        })
    }
}

impl Judges {
    /// The judges of a session's config: its LLM judge, asked only where the rules are
    /// undecided and shown the boxed answer, and its guideline judge, on the session's
    /// endpoints.
    pub fn of_session(session: &JudgeSession) -> Self {
        let config = &session.config;
        Judges {
            llm: Some(LlmJudge {
                policy: LlmJudgePolicy::WhenUndecided,
                input: JudgeInput::Boxed,
                ..session.llm.clone()
            }),
            guideline: Some(GuidelineJudge {
                executor: session.executor(),
                group: Config::client_group(Role::GuidelineJudge).into(),
                sampling: config.role(Role::GuidelineJudge).sampling(),
                prompts: session.prompts.clone(),
            }),
        }
    }
}

/// Mean reward and advantage of one `_source` in a scored batch (for reports).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SourceSummary {
    pub source: Source,
    pub rollouts: usize,
    pub correct: usize,
    pub mean_reward: f64,
    pub mean_advantage: f64,
    /// Mean advantage of the correct rollouts (what a correct answer is pushed up by).
    pub mean_advantage_correct: Option<f64>,
    pub mean_advantage_wrong: Option<f64>,
}

/// Per-`_source` means, in `normal`, `experience`, `guideline` order (empty sources left out).
pub fn summarize(scored: &[Scored]) -> Vec<SourceSummary> {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    Source::ALL
        .into_iter()
        .filter_map(|source| {
            let of: Vec<&Scored> = scored.iter().filter(|s| s.source == source).collect();
            if of.is_empty() {
                return None;
            }
            let rewards: Vec<f64> = of.iter().map(|s| s.reward).collect();
            let advantages: Vec<f64> = of.iter().map(|s| s.advantage).collect();
            let right: Vec<f64> = of
                .iter()
                .filter(|s| s.correct)
                .map(|s| s.advantage)
                .collect();
            let wrong: Vec<f64> = of
                .iter()
                .filter(|s| !s.correct)
                .map(|s| s.advantage)
                .collect();
            Some(SourceSummary {
                source,
                rollouts: of.len(),
                correct: right.len(),
                mean_reward: mean(&rewards).unwrap_or(0.0),
                mean_advantage: mean(&advantages).unwrap_or(0.0),
                mean_advantage_correct: mean(&right),
                mean_advantage_wrong: mean(&wrong),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rl::rewards::GroupKind;

    fn rollout(group: &str, source: Source, response: &str, bank: &[&str]) -> Rollout {
        Rollout {
            question_id: "q".into(),
            group_id: group.into(),
            group_kind: Some(GroupKind::Base),
            source,
            ground_truth: "12".into(),
            question: "Q".into(),
            guideline_bank: bank.iter().map(|s| s.to_string()).collect(),
            response: response.into(),
        }
    }

    #[tokio::test]
    async fn rule_only_scoring_and_refusals() {
        let judges = Judges::default();
        let batch = vec![
            rollout("a", Source::Normal, "so \\boxed{12}", &[]),
            rollout("a", Source::Normal, "\\boxed{13}", &[]),
            Rollout {
                ground_truth: "no solutions".into(),
                ..rollout("a", Source::Normal, "\\boxed{none exist}", &[])
            },
            rollout("g", Source::Guideline, "\\boxed{12}", &[]),
            rollout("g", Source::Guideline, "no answer", &[]),
        ];
        let out = judges
            .score(&batch, RewardMode::Hybrid, &RewardParams::default(), "b")
            .await
            .unwrap();
        let r: Vec<f64> = out.rollouts.iter().map(|s| s.reward).collect();
        // Empty guideline bank: novel without a judge.
        assert_eq!(r, vec![1.0, -1.0, -1.0, 1.0, -0.5]);
        assert_eq!(out.counts.undecided, 1);
        assert!(out.counts.degraded());
        let summary = summarize(&out.rollouts);
        assert_eq!(summary.len(), 2);
        assert_eq!((summary[0].rollouts, summary[0].correct), (3, 1));

        let needs_judge = vec![rollout(
            "g",
            Source::Guideline,
            "\\boxed{12}",
            &["induction"],
        )];
        let e = judges
            .score(
                &needs_judge,
                RewardMode::Hybrid,
                &RewardParams::default(),
                "b",
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no guideline judge"), "{e}");
        // The standard mode needs no novelty.
        assert!(
            judges
                .score(
                    &needs_judge,
                    RewardMode::Standard,
                    &RewardParams::default(),
                    "b"
                )
                .await
                .is_ok()
        );
    }
}
