//! `tmas`: runs TMAS (test-time scaling via multi-agent synergy) and related structured
//! test-time-compute methods against OpenAI-compatible inference endpoints.
//!
//! Module map:
//! - [`config`]: the TOML schema, defaults (in one place), layering (file → env → CLI) and
//!   validation with key paths.
//! - [`method`]: the methods as sans-IO state machines (TMAS first), their prompts,
//!   parsing and bank merge policies.
//! - [`eval`]: datasets, answer extraction and equivalence (the `tmas-equivalence`
//!   crate, re-exported), the LLM judge's protocol, Pass@1, charts and the paper's
//!   analyses.
//! - [`engine`]: a run from start to end (`tmas run`, `--resume`, experiments): endpoints
//!   and the start-up check, the run store's executor under the actor runtime, judging and
//!   storing each finished problem, the outputs, observation (spans, metrics, progress).
//! - [`sim`]: the simulated OpenAI-compatible endpoint with its synthetic task model.
//! - [`record`]: the records the store and the engine share (one problem's result, …).
//! - [`resources`]: CPU time and peak memory of this process and thread.
//! - [`role`]: the agent roles ([`role::Role`]) and a value per role ([`role::PerRole`]).
//! - [`store`]: the run store (SQLite) behind crash-safe resume and `tmas export`, and
//!   the run directory's bank files.
//! - [`serve`]: `tmas serve`, the methods as an OpenAI-compatible model on one
//!   long-lived runtime.
//! - [`bench`]: benchmarks (`tmas bench …`).
//! - [`rl`]: Hybrid-RL rewards, verl training data and rollout scoring (`tmas rl-*`).
//! - [`cli`]: one module per subcommand.
//! - [`text`]: counted nouns (`1 problem`, `3 problems`) for every line a person reads.
//!
//! Layers point one way (checked by `architecture_tests`): cli → bench/rl/view → serve →
//! engine → store → record → eval → method → config → sim → resources → role, text.
//!
//! The runtime (coordinators, role pools, bank actors) lives in the `tmas-actors` crate
//! and the model client with the wire types in `tmas-client`; neither knows anything
//! TMAS-specific, and this crate's methods implement the runtime's `Strategy` trait. Tracing, metrics and progress output live in `tmas-observability`;
//! the rule-based answer-equivalence check is the `tmas-equivalence` crate.

pub(crate) mod bench;
pub mod cli;
pub mod config;
pub mod engine;
pub mod eval;
pub mod method;
pub(crate) mod record;
pub(crate) mod resources;
pub(crate) mod rl;
pub mod role;
pub mod serve;
pub mod sim;
pub mod store;
pub mod text;
pub mod view;

#[cfg(test)]
mod architecture_tests;
