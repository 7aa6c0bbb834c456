//! `tmas-actors`: the runtime that carries a test-time-compute method's model calls.
//!
//! This crate knows nothing about TMAS itself. It drives any sans-IO [`strategy::Strategy`]
//! (a state machine that says which calls to make next and consumes their results) and
//! owns the concurrency around it; the calls themselves go to a [`strategy::CallExecutor`],
//! in a run the model client of `tmas-client` (whose `wire` types and `FailureKind` the
//! strategy speaks):
//!
//! - [`strategy`]: the trait a method implements, the commands it emits, and
//!   [`strategy::CallExecutor`], whatever performs a call.
//! - `executor`: `tmas_client::ModelClient` as a [`strategy::CallExecutor`] (each call on
//!   a task of its own; a panic becomes a failure).
//! - [`runner`]: runs many problems — admission policy, one pool per role, progress
//!   counters. Plain async code in the caller's task; results reach the caller's
//!   `on_done` there, in completion order.
//! - [`coordinator`]: the per-problem actor hosting a strategy.
//! - [`priority`]: which waiting call gets a free slot; [`stats`]: the progress counters
//!   the runner and the coordinators update (both below `runner` and `coordinator`, which
//!   share them).
//! - [`pool`]: one supervised worker pool per role; a crashed worker's job is run again.
//! - [`bank`]: one actor per (problem, bank) that serializes and merges updates and
//!   persists each version through a [`bank::BankSink`] the application provides (the
//!   file formats of a run directory are the application's, not the runtime's).
//!
//! # What is an actor (ractor), and why
//! Actors are used where something owns state that messages must change one at a time, or
//! where a crash must be contained and answered:
//! - a **coordinator** per problem: the strategy is a synchronous state machine, and the
//!   actor's one-message-at-a-time handling feeds it call and bank outcomes in order; its
//!   bank actors are linked children that stop with it;
//! - a **pool** per role: a supervisor actor with a fixed number of worker actors (the
//!   role's concurrency limit). The supervisor keeps every job, so a worker that panics
//!   mid-call loses nothing: its job is queued again;
//! - a **bank** per (problem, bank): two memory agents finishing together cannot
//!   interleave a read-merge-write, and the merge policy is enforced in code.
//!
//! The model client is plain async code, not actors: a pool worker awaits its executor,
//! which spawns one tokio task per call; in that task the call routes, waits for its
//! slots and rate limits, sends and retries against shared state. No call goes through an
//! actor mailbox on its way to an endpoint, so thousands of calls per second cost little
//! more than their HTTP work.
//!
//! Tracing: spans and their OpenTelemetry attributes go through `tmas-observability`'s
//! span helpers (used without its default `exporters` feature, so no exporter, HTTP server
//! or progress bar is built here); they cost nothing until the application installs an
//! exporter. Metrics use the `metrics` macros, no-ops until a recorder is installed.

pub mod bank;
pub mod coordinator;
mod executor;
pub mod pool;
pub mod priority;
pub mod runner;
pub mod stats;
pub mod strategy;
