//! The simulated OpenAI-compatible endpoint with its synthetic task model.
//!
//! - [`SimServer`]: serves `/v1/chat/completions` (stream and non-stream),
//!   `/v1/embeddings` (`embeddings`: the task model's bag-of-words vectors), `/v1/models`,
//!   `/health`, `/metrics` and the test controls `/sim/stats`, `/sim/reset`, `/sim/faults`.
//! - [`options`]: the knobs ([`SimOptions`]), embedded as a config's `[simulator]` section.
//! - [`task`]: the synthetic task model (what each agent role replies).
//! - `handler`, `openai`, `faults`, `stats`: one request, its wire shapes, fault draws,
//!   counters. `latency`, `rng`, `text`: latency model, stable hashing, filler text.
//! - [`server_model`]: the optional model of one vLLM/SGLang server (queue, batch,
//!   prefix cache, per-problem output lengths) that replaces the independent latency draw.
//!
//! Replies are deterministic for a seed: each request's draws come from
//! hash(seed, role, problem, iteration, body, call identity) when the request carries an
//! `x-tmas-call` header (so a re-sent call gets the same reply, even from a restarted
//! simulator), else hash(seed, role, problem, iteration, body, occurrence of that
//! identical request); either way they do not depend on arrival order. See
//! docs/simulator.md.

pub(crate) mod dataset;
mod embeddings;
mod faults;
mod handler;
pub(crate) mod invalid_option;
pub(crate) mod latency;
mod openai;
pub(crate) mod options;
pub(crate) mod rng;
mod server;
pub mod server_model;
pub(crate) mod stats;
pub mod task;
pub(crate) mod text;

pub use dataset::load_answers;
pub use handler::PREFLIGHT_HEADER;
pub use options::{
    FaultRates, InvalidOption, LatencyModel, ReasoningField, SimOptions, TaskOptions,
};
pub use server::SimServer;
pub use stats::{RecordedRequest, SimStats};
