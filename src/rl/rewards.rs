//! The paper's Hybrid-RL rewards (appendix on experimental details), pure functions.
//!
//! GRPO keeps its objective; only each rollout's reward r̃ changes, and advantages are
//! normalised within the rollout's group: A_i = (r̃_i − mean(r̃)) / (std(r̃) + δ).
//!
//! 1. Standard correctness: r = +1 correct, −1 wrong.
//! 2. Experience utilization: a prompt's rollouts form a Base group (question + history)
//!    and a Bank group (also sees the experience bank). With p_base the share of correct
//!    Base rollouts, a correct Bank rollout gets r + β·(1 − p_base); every other rollout
//!    keeps r. The bonus is largest when the bank made a question solvable that the Base
//!    prompt rarely solves.
//! 3. Novel strategy exploration: correctness r and novelty n (the rollout's strategy is not
//!    already in the guideline bank): correct & novel +1.0, correct & repeated +0.2,
//!    wrong & novel −0.5, wrong & repeated −1.0.

use serde::{Deserialize, Serialize};

/// The paper's β for the experience-utilization bonus.
pub const PAPER_BETA: f64 = 0.6;
/// δ in the advantage's denominator: keeps an all-equal group (std = 0) finite.
pub const DEFAULT_DELTA: f64 = 1e-6;

/// Which of the three rewards a group is scored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardKind {
    /// ±1 on correctness.
    Standard,
    /// Correctness plus the Bank group's bonus β·(1 − p_base).
    Experience,
    /// The correctness × novelty table.
    Novelty,
}

impl RewardKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RewardKind::Standard => "standard",
            RewardKind::Experience => "experience",
            RewardKind::Novelty => "novelty",
        }
    }
}

/// Which half of an experience-utilization prompt's rollouts a rollout belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Question and history only.
    Base,
    /// Also saw the experience bank.
    Bank,
}

/// Which standard deviation the group normalisation divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdKind {
    /// √(Σ(r − mean)² / n), the paper's std(r̃) read literally.
    #[default]
    Population,
    /// √(Σ(r − mean)² / (n − 1)), what verl's GRPO estimator computes (`torch.std`);
    /// a group of one then has std 0.
    Sample,
}

/// δ, β and the std convention.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewardParams {
    pub beta: f64,
    pub delta: f64,
    pub std: StdKind,
}

impl Default for RewardParams {
    fn default() -> Self {
        Self {
            beta: PAPER_BETA,
            delta: DEFAULT_DELTA,
            std: StdKind::Population,
        }
    }
}

impl RewardParams {
    /// Rejects values that would make rewards or advantages meaningless.
    pub fn validate(&self) -> Result<(), String> {
        if !self.beta.is_finite() || self.beta < 0.0 {
            return Err(format!(
                "beta must be a finite number ≥ 0, got {}",
                self.beta
            ));
        }
        if !self.delta.is_finite() || self.delta <= 0.0 {
            return Err(format!(
                "delta must be a finite number > 0, got {}",
                self.delta
            ));
        }
        Ok(())
    }
}

/// Reward 1: +1 correct, −1 wrong.
pub fn correctness_reward(correct: bool) -> f64 {
    if correct { 1.0 } else { -1.0 }
}

/// Reward 3: the correctness × novelty table.
pub fn novelty_reward(correct: bool, novel: bool) -> f64 {
    match (correct, novel) {
        (true, true) => 1.0,
        (true, false) => 0.2,
        (false, true) => -0.5,
        (false, false) => -1.0,
    }
}

/// An experience-utilization group without a Base rollout: p_base is undefined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an experience-utilization group needs at least one Base rollout to compute p_base")]
pub struct NoBaseRollouts;

/// Reward 2 for one prompt's rollouts, given as (group kind, correct) in any order.
pub fn experience_rewards(
    rollouts: &[(GroupKind, bool)],
    beta: f64,
) -> Result<Vec<f64>, NoBaseRollouts> {
    let p_base = base_success_rate(rollouts).ok_or(NoBaseRollouts)?;
    Ok(rollouts
        .iter()
        .map(|&(kind, correct)| {
            let r = correctness_reward(correct);
            if kind == GroupKind::Bank && correct {
                r + beta * (1.0 - p_base)
            } else {
                r
            }
        })
        .collect())
}

/// p_base: the share of correct Base rollouts (`None` without Base rollouts).
pub fn base_success_rate(rollouts: &[(GroupKind, bool)]) -> Option<f64> {
    let base: Vec<bool> = rollouts
        .iter()
        .filter(|(kind, _)| *kind == GroupKind::Base)
        .map(|(_, correct)| *correct)
        .collect();
    if base.is_empty() {
        return None;
    }
    Some(base.iter().filter(|c| **c).count() as f64 / base.len() as f64)
}

/// GRPO advantages of one group: (r − mean) / (std + δ). An empty group gives nothing;
/// a group whose rewards are all equal gives zeros (std = 0, numerator 0).
pub fn group_advantages(rewards: &[f64], params: &RewardParams) -> Vec<f64> {
    let n = rewards.len();
    if n == 0 {
        return Vec::new();
    }
    let mean = rewards.iter().sum::<f64>() / n as f64;
    let squares: f64 = rewards.iter().map(|r| (r - mean).powi(2)).sum();
    let divisor = match params.std {
        StdKind::Population => n as f64,
        StdKind::Sample => (n - 1) as f64,
    };
    let std = if divisor > 0.0 {
        (squares / divisor).sqrt()
    } else {
        0.0
    };
    rewards
        .iter()
        .map(|r| (r - mean) / (std + params.delta))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f64 = 1e-9;

    fn close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < EPS, "{actual:?} vs {expected:?}");
        }
    }

    #[test]
    fn standard_reward_table() {
        assert_eq!(correctness_reward(true), 1.0);
        assert_eq!(correctness_reward(false), -1.0);
    }

    #[test]
    fn novelty_reward_table() {
        assert_eq!(novelty_reward(true, true), 1.0);
        assert_eq!(novelty_reward(true, false), 0.2);
        assert_eq!(novelty_reward(false, true), -0.5);
        assert_eq!(novelty_reward(false, false), -1.0);
    }

    #[test]
    fn standard_advantages_by_hand() {
        // Rewards 1, 1, −1, −1: mean 0, population std 1.
        let p = RewardParams::default();
        let r: Vec<f64> = [true, true, false, false].map(correctness_reward).to_vec();
        close(
            &group_advantages(&r, &p),
            &[
                1.0 / (1.0 + 1e-6),
                1.0 / (1.0 + 1e-6),
                -1.0 / (1.0 + 1e-6),
                -1.0 / (1.0 + 1e-6),
            ],
        );
        // 1, −1, −1, −1: mean −0.5, std √0.75.
        let r = [1.0, -1.0, -1.0, -1.0];
        let s = 0.75f64.sqrt() + 1e-6;
        close(
            &group_advantages(&r, &p),
            &[1.5 / s, -0.5 / s, -0.5 / s, -0.5 / s],
        );
        // Sample std (verl): √(3/3) = 1.
        let sample = RewardParams {
            std: StdKind::Sample,
            ..p
        };
        let s = 1.0 + 1e-6;
        close(
            &group_advantages(&r, &sample),
            &[1.5 / s, -0.5 / s, -0.5 / s, -0.5 / s],
        );
    }

    #[test]
    fn all_correct_and_all_wrong_groups_have_zero_advantages() {
        for params in [
            RewardParams::default(),
            RewardParams {
                std: StdKind::Sample,
                ..Default::default()
            },
        ] {
            close(&group_advantages(&[1.0; 16], &params), &[0.0; 16]);
            close(&group_advantages(&[-1.0; 16], &params), &[0.0; 16]);
            close(&group_advantages(&[0.2; 3], &params), &[0.0; 3]);
            close(&group_advantages(&[1.0], &params), &[0.0]);
        }
        assert!(group_advantages(&[], &RewardParams::default()).is_empty());
    }

    #[test]
    fn experience_rewards_by_hand() {
        use GroupKind::{Bank, Base};
        // Base 1 of 4 correct: p_base = 0.25, a correct Bank rollout gets 1 + 0.6·0.75 = 1.45.
        let rollouts = [
            (Base, true),
            (Base, false),
            (Base, false),
            (Base, false),
            (Bank, true),
            (Bank, true),
            (Bank, false),
            (Bank, true),
        ];
        let r = experience_rewards(&rollouts, PAPER_BETA).unwrap();
        close(&r, &[1.0, -1.0, -1.0, -1.0, 1.45, 1.45, -1.0, 1.45]);
        // mean = (1 − 3 + 4.35 − 1)/8 = 0.16875; population std by hand:
        let mean = 0.16875;
        let var = [1.0, -1.0, -1.0, -1.0, 1.45, 1.45, -1.0, 1.45]
            .iter()
            .map(|x: &f64| (x - mean).powi(2))
            .sum::<f64>()
            / 8.0;
        assert!((var - 1.3849609375).abs() < EPS, "{var}");
        let s = 1.3849609375f64.sqrt() + 1e-6;
        close(
            &group_advantages(&r, &RewardParams::default()),
            &[
                (1.0 - mean) / s,
                (-1.0 - mean) / s,
                (-1.0 - mean) / s,
                (-1.0 - mean) / s,
                (1.45 - mean) / s,
                (1.45 - mean) / s,
                (-1.0 - mean) / s,
                (1.45 - mean) / s,
            ],
        );
    }

    #[test]
    fn experience_bonus_edges() {
        use GroupKind::{Bank, Base};
        // Base all correct: no bonus; every rollout correct → all advantages 0.
        let all = [(Base, true), (Base, true), (Bank, true), (Bank, true)];
        let r = experience_rewards(&all, PAPER_BETA).unwrap();
        close(&r, &[1.0; 4]);
        close(&group_advantages(&r, &RewardParams::default()), &[0.0; 4]);
        // Base all wrong: full bonus β.
        let r = experience_rewards(&[(Base, false), (Bank, true)], 0.6).unwrap();
        close(&r, &[-1.0, 1.6]);
        // Everything wrong: −1 everywhere, advantages 0.
        let none = [(Base, false), (Bank, false), (Bank, false)];
        let r = experience_rewards(&none, PAPER_BETA).unwrap();
        close(&r, &[-1.0; 3]);
        close(&group_advantages(&r, &RewardParams::default()), &[0.0; 3]);
        // β is configurable.
        let r = experience_rewards(&[(Base, true), (Base, false), (Bank, true)], 1.0).unwrap();
        close(&r, &[1.0, -1.0, 1.5]);
        assert_eq!(
            experience_rewards(&[(Bank, true)], 0.6),
            Err(NoBaseRollouts)
        );
        assert_eq!(base_success_rate(&[(Base, true), (Base, false)]), Some(0.5));
    }

    #[test]
    fn novelty_advantages_by_hand() {
        // Rewards 1, 0.2, −0.5, −1: mean −0.075, var = (1.155625 + 0.075625 + 0.180625
        // + 0.855625)/4 = 0.566875.
        let r = [
            novelty_reward(true, true),
            novelty_reward(true, false),
            novelty_reward(false, true),
            novelty_reward(false, false),
        ];
        let s = 0.566875f64.sqrt() + 1e-6;
        close(
            &group_advantages(&r, &RewardParams::default()),
            &[1.075 / s, 0.275 / s, -0.425 / s, -0.925 / s],
        );
        // All correct & repeated: 0.2 each, advantages 0.
        close(
            &group_advantages(&[novelty_reward(true, false); 4], &RewardParams::default()),
            &[0.0; 4],
        );
    }

    #[test]
    fn delta_is_configurable_and_validated() {
        let p = RewardParams {
            delta: 1.0,
            ..Default::default()
        };
        // 1, −1: std 1, divided by 2.
        close(&group_advantages(&[1.0, -1.0], &p), &[0.5, -0.5]);
        assert!(p.validate().is_ok());
        assert!(RewardParams { delta: 0.0, ..p }.validate().is_err());
        assert!(RewardParams { beta: -0.1, ..p }.validate().is_err());
        assert!(
            RewardParams {
                beta: f64::NAN,
                ..p
            }
            .validate()
            .is_err()
        );
    }
}
