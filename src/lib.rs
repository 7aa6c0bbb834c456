//! `tmas`: runs TMAS (test-time scaling via multi-agent synergy) and related structured
//! test-time-compute methods against OpenAI-compatible inference endpoints.
//!
//! Module map:
//! - [`config`]: the TOML schema, defaults (in one place), layering (file → env → CLI) and
//!   validation with key paths.
//! - [`method`]: the methods as sans-IO state machines (TMAS first), their prompts,
//!   parsing and bank merge policies.
//! - [`eval`]: datasets, answer extraction and equivalence, Pass@1.
//! - [`sim`]: the simulated OpenAI-compatible endpoint with its synthetic task model.
//! - [`store`]: the run store (SQLite) behind crash-safe resume and `tmas export`.
//! - [`bench`]: benchmarks (`tmas bench …`).
//! - [`rl`]: Hybrid-RL rewards, verl training data and rollout scoring (`tmas rl-*`).
//! - [`cli`]: one module per subcommand.
//!
//! The actor runtime lives in the `tmas-actors` crate and knows nothing TMAS-specific.

pub mod bench;
pub mod cli;
pub mod config;
pub mod engine;
pub mod eval;
pub mod method;
pub mod rl;
pub mod sim;
pub mod store;
