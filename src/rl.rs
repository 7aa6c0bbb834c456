//! Hybrid-RL support: the paper's three rollout rewards with GRPO group normalisation
//! ([`rewards`]), training instances for verl built from stored runs ([`data`], written by
//! [`verl_table`]) and the scoring of rollout batches ([`batch`], [`score`]) behind
//! `tmas rl-score` and `tmas rl-serve`. The recipe end to end: `docs/rl.md`.

pub(crate) mod batch;
pub(crate) mod data;
pub(crate) mod guideline_judge;
pub(crate) mod rewards;
pub(crate) mod runs;
pub(crate) mod sample;
pub(crate) mod score;
pub(crate) mod verl_table;
