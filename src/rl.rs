//! Hybrid-RL support: the paper's three rollout rewards with GRPO group normalisation
//! ([`rewards`]), training instances for verl built from stored runs ([`data`], written by
//! [`verl_table`]) and the scoring of rollout batches ([`batch`], [`score`]) behind
//! `tmas rl-score` and `tmas rl-serve`. The recipe end to end: `docs/rl.md`.

pub mod batch;
pub mod data;
pub mod guideline_judge;
pub mod rewards;
pub mod runs;
pub mod sample;
pub mod score;
pub mod verl_table;
