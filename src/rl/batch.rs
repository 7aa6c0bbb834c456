//! A batch of rollouts to score, and the pure step from judged rollouts to rewards and
//! advantages (the judging itself is IO: [`super::score`]).
//!
//! A rollout line names its question, its GRPO group (one prompt's rollouts), the group
//! kind (Base / Bank, for experience utilization), the training instance's `_source`, the
//! ground truth, the guideline bank it saw and its response. Under the **standard** mode
//! every group gets the correctness reward; under **hybrid** each group gets the reward of
//! its `_source`: `normal` → correctness, `experience` → experience utilization,
//! `guideline` → novel-strategy exploration.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::rewards::{
    GroupKind, RewardKind, RewardParams, correctness_reward, experience_rewards, group_advantages,
    novelty_reward,
};

/// Which training objective an instance was built for (the parquet `_source` column).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Standard correctness.
    #[default]
    Normal,
    /// Experience utilization (the experience bank is injected).
    Experience,
    /// Novel-strategy exploration (the guideline bank is injected).
    Guideline,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Normal, Source::Experience, Source::Guideline];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Normal => "normal",
            Source::Experience => "experience",
            Source::Guideline => "guideline",
        }
    }
}

/// Vanilla GRPO (correctness everywhere) or the paper's Hybrid-RL (reward by `_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RewardMode {
    Standard,
    #[default]
    Hybrid,
}

impl RewardMode {
    pub fn reward_for(self, source: Source) -> RewardKind {
        match (self, source) {
            (RewardMode::Standard, _) | (RewardMode::Hybrid, Source::Normal) => {
                RewardKind::Standard
            }
            (RewardMode::Hybrid, Source::Experience) => RewardKind::Experience,
            (RewardMode::Hybrid, Source::Guideline) => RewardKind::Novelty,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RewardMode::Standard => "standard",
            RewardMode::Hybrid => "hybrid",
        }
    }
}

/// One rollout to score (one line of the `tmas rl-score` input, one element of the
/// `tmas rl-serve` request). Unknown fields are ignored, so a trainer may send more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    pub question_id: String,
    /// The GRPO group: advantages are normalised over the rollouts sharing it.
    pub group_id: String,
    /// Base or Bank; only experience-utilization groups need it (default Base).
    #[serde(default)]
    pub group_kind: Option<GroupKind>,
    /// The instance's objective (`normal` / `experience` / `guideline`).
    #[serde(default, rename = "_source", alias = "source")]
    pub source: Source,
    /// The reference answer.
    pub ground_truth: String,
    /// The question (for the judges' prompts; may be empty).
    #[serde(default)]
    pub question: String,
    /// The guideline bank the rollout saw (novelty is judged against it).
    #[serde(default)]
    pub guideline_bank: Vec<String>,
    /// The model's full reply.
    pub response: String,
}

/// How one rollout was judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub correct: bool,
    /// True when the rule check could not decide and no LLM verdict replaced it (the
    /// rollout then counts as wrong).
    pub undecided: bool,
    /// Novelty; `None` when the rollout's reward does not use it.
    pub novel: Option<bool>,
    /// True when novelty was needed but the guideline judge gave no verdict (failed call
    /// or unparseable reply); the rollout then counts as repeated.
    pub novelty_failed: bool,
}

/// A scored rollout (one output line, one element of the service's reply).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub index: usize,
    pub question_id: String,
    pub group_id: String,
    #[serde(rename = "_source")]
    pub source: Source,
    pub group_kind: Option<GroupKind>,
    pub reward_kind: RewardKind,
    pub correct: bool,
    pub undecided: bool,
    pub novel: Option<bool>,
    pub novelty_failed: bool,
    pub reward: f64,
    pub advantage: f64,
}

/// A batch that cannot be scored as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("group `{group}` mixes _source `{first}` and `{other}` (rollout {index})")]
    MixedSources {
        group: String,
        first: &'static str,
        other: &'static str,
        index: usize,
    },
    #[error(
        "group `{group}` is an experience-utilization group with no Base rollout (set \
         group_kind = \"base\" on the rollouts that did not see the experience bank)"
    )]
    NoBase { group: String },
    #[error("{judged} verdicts for {rollouts} rollouts")]
    Length { rollouts: usize, judged: usize },
}

/// Group ids in order of first appearance, each with its rollout indices.
pub fn groups(rollouts: &[Rollout]) -> Vec<(&str, Vec<usize>)> {
    let mut order: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (i, r) in rollouts.iter().enumerate() {
        let slot = *at.entry(r.group_id.as_str()).or_insert_with(|| {
            order.push((r.group_id.as_str(), Vec::new()));
            order.len() - 1
        });
        order[slot].1.push(i);
    }
    order
}

/// The reward each rollout's group uses under `mode`, checking that a group has one
/// `_source`.
pub fn reward_kinds(rollouts: &[Rollout], mode: RewardMode) -> Result<Vec<RewardKind>, BatchError> {
    let mut out = vec![RewardKind::Standard; rollouts.len()];
    for (group, members) in groups(rollouts) {
        let first = rollouts[members[0]].source;
        for &i in &members {
            if rollouts[i].source != first {
                return Err(BatchError::MixedSources {
                    group: group.to_owned(),
                    first: first.as_str(),
                    other: rollouts[i].source.as_str(),
                    index: i,
                });
            }
            out[i] = mode.reward_for(first);
        }
    }
    Ok(out)
}

/// Rewards and advantages of a judged batch, in input order.
pub fn score(
    rollouts: &[Rollout],
    judged: &[Judged],
    mode: RewardMode,
    params: &RewardParams,
) -> Result<Vec<Scored>, BatchError> {
    if rollouts.len() != judged.len() {
        return Err(BatchError::Length {
            rollouts: rollouts.len(),
            judged: judged.len(),
        });
    }
    let kinds = reward_kinds(rollouts, mode)?;
    let mut rewards = vec![0.0; rollouts.len()];
    let mut advantages = vec![0.0; rollouts.len()];
    for (group, members) in groups(rollouts) {
        let kind = kinds[members[0]];
        let group_rewards: Vec<f64> = match kind {
            RewardKind::Standard => members
                .iter()
                .map(|&i| correctness_reward(judged[i].correct))
                .collect(),
            RewardKind::Novelty => members
                .iter()
                .map(|&i| novelty_reward(judged[i].correct, judged[i].novel == Some(true)))
                .collect(),
            RewardKind::Experience => {
                let pairs: Vec<(GroupKind, bool)> = members
                    .iter()
                    .map(|&i| {
                        (
                            rollouts[i].group_kind.unwrap_or(GroupKind::Base),
                            judged[i].correct,
                        )
                    })
                    .collect();
                experience_rewards(&pairs, params.beta).map_err(|_| BatchError::NoBase {
                    group: group.to_owned(),
                })?
            }
        };
        let group_advantages = group_advantages(&group_rewards, params);
        for (k, &i) in members.iter().enumerate() {
            rewards[i] = group_rewards[k];
            advantages[i] = group_advantages[k];
        }
    }
    Ok(rollouts
        .iter()
        .enumerate()
        .map(|(i, r)| Scored {
            index: i,
            question_id: r.question_id.clone(),
            group_id: r.group_id.clone(),
            source: r.source,
            group_kind: r.group_kind,
            reward_kind: kinds[i],
            correct: judged[i].correct,
            undecided: judged[i].undecided,
            novel: judged[i].novel,
            novelty_failed: judged[i].novelty_failed,
            reward: rewards[i],
            advantage: advantages[i],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(group: &str, source: Source, kind: Option<GroupKind>) -> Rollout {
        Rollout {
            question_id: format!("q-{group}"),
            group_id: group.to_owned(),
            group_kind: kind,
            source,
            ground_truth: "3".into(),
            question: String::new(),
            guideline_bank: Vec::new(),
            response: String::new(),
        }
    }

    fn judged(correct: bool, novel: Option<bool>) -> Judged {
        Judged {
            correct,
            undecided: false,
            novel,
            novelty_failed: false,
        }
    }

    #[test]
    fn hybrid_uses_each_groups_source_and_standard_ignores_it() {
        use GroupKind::{Bank, Base};
        let rollouts = vec![
            rollout("n", Source::Normal, None),
            rollout("e", Source::Experience, Some(Base)),
            rollout("g", Source::Guideline, None),
            rollout("n", Source::Normal, None),
            rollout("e", Source::Experience, Some(Bank)),
            rollout("g", Source::Guideline, None),
        ];
        let verdicts = vec![
            judged(true, None),
            judged(false, None),
            judged(true, Some(false)),
            judged(false, None),
            judged(true, None),
            judged(false, Some(true)),
        ];
        let p = RewardParams::default();
        let hybrid = score(&rollouts, &verdicts, RewardMode::Hybrid, &p).unwrap();
        let r: Vec<f64> = hybrid.iter().map(|s| s.reward).collect();
        // p_base = 0 → the Bank rollout gets 1 + 0.6.
        assert_eq!(r, vec![1.0, -1.0, 0.2, -1.0, 1.6, -0.5]);
        assert_eq!(hybrid[2].reward_kind, RewardKind::Novelty);
        // Two-rollout groups: advantages ±d/(d+δ) with d = half the spread, so ±1 up to δ,
        // the better rollout positive.
        for pair in [[0, 3], [1, 4], [2, 5]] {
            let [a, b] = pair.map(|i| &hybrid[i]);
            let d = (a.reward - b.reward).abs() / 2.0;
            let expected = d / (d + 1e-6);
            let sign = if a.reward > b.reward { 1.0 } else { -1.0 };
            assert!((a.advantage - sign * expected).abs() < 1e-12, "{a:?}");
            assert!((b.advantage + sign * expected).abs() < 1e-12, "{b:?}");
        }
        let standard = score(&rollouts, &verdicts, RewardMode::Standard, &p).unwrap();
        let r: Vec<f64> = standard.iter().map(|s| s.reward).collect();
        assert_eq!(r, vec![1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
        assert!(
            standard
                .iter()
                .all(|s| s.reward_kind == RewardKind::Standard)
        );
    }

    #[test]
    fn bad_batches_are_named() {
        let mixed = vec![
            rollout("a", Source::Normal, None),
            rollout("a", Source::Guideline, None),
        ];
        let v = vec![judged(true, None); 2];
        let e = score(&mixed, &v, RewardMode::Hybrid, &RewardParams::default()).unwrap_err();
        assert!(e.to_string().contains("group `a` mixes"), "{e}");
        let bank_only = vec![rollout("b", Source::Experience, Some(GroupKind::Bank))];
        let e = score(
            &bank_only,
            &v[..1],
            RewardMode::Hybrid,
            &RewardParams::default(),
        )
        .unwrap_err();
        assert_eq!(e, BatchError::NoBase { group: "b".into() });
        // Under the standard mode the same group is fine.
        assert!(
            score(
                &bank_only,
                &v[..1],
                RewardMode::Standard,
                &RewardParams::default()
            )
            .is_ok()
        );
        assert!(matches!(
            score(
                &bank_only,
                &[],
                RewardMode::Hybrid,
                &RewardParams::default()
            ),
            Err(BatchError::Length { .. })
        ));
    }

    #[test]
    fn rollout_lines_parse_with_defaults() {
        let r: Rollout = serde_json::from_str(
            r#"{"question_id":"q","group_id":"g","ground_truth":"3","response":"\\boxed{3}","extra":1}"#,
        )
        .unwrap();
        assert_eq!((r.source, r.group_kind), (Source::Normal, None));
        let r: Rollout = serde_json::from_str(
            r#"{"question_id":"q","group_id":"g","group_kind":"bank","_source":"experience","ground_truth":"3","response":""}"#,
        )
        .unwrap();
        assert_eq!(
            (r.source, r.group_kind),
            (Source::Experience, Some(GroupKind::Bank))
        );
    }
}
