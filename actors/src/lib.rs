//! `tmas-actors`: the ractor runtime that carries a test-time-compute method's model calls.
//!
//! This crate knows nothing about TMAS itself. It drives any sans-IO [`strategy::Strategy`]
//! (a state machine that says which calls to make next and consumes their results) and
//! owns everything that does IO:
//!
//! - [`wire`]: the OpenAI-compatible chat request/response types shared by every layer.
//! - [`client`]: model-client actors — one per endpoint — with routing, in-flight caps,
//!   rate limits, retries, circuit breaking and streaming.
//! - [`strategy`]: the trait a method implements and the commands it emits.
//! - [`runner`]: runs many problems (admission policy, role pools, progress counters).
//! - [`coordinator`]: the per-problem actor hosting a strategy.
//! - [`pool`]: one supervised worker pool per role; crashed workers' jobs are retried.
//! - [`bank`]: one actor per (problem, bank) that serializes, merges and persists updates.

pub mod bank;
pub mod client;
pub mod coordinator;
pub mod pool;
pub mod runner;
pub mod strategy;
pub mod wire;
