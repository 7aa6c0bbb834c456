//! Helpers shared by the integration tests.
//!
//! - [`cli`]: the built `tmas` binary and `tmas sim-server` child processes, configs for
//!   them, and readers for a run's store and exports.
//! - [`engine`]: an in-process simulator the test owns, a config pointing at it, a
//!   synthetic dataset, one engine run (in process or as a `tmas run` child process), and
//!   readers for the run directory.
//! - [`sim`]: raw HTTP requests to an in-process simulator.
//! - [`serve`]: `tmas serve` child processes, their config, and a raw HTTP client
//!   (whole replies and server-sent events as they arrive).
//! - [`otlp`]: an in-process OTLP receiver and span-attribute access.
//! - [`python`]: a Python interpreter with given modules, or a loud skip.
//! - [`rl`]: a small demo run and `tmas rl-serve` on loopback, for the Hybrid-RL tests.
//! - [`store_v3`]: run stores as the version-3 and version-4 store schemas left them.
//! - [`view`]: `tmas view` as a child process, raw GETs, headless Chromium.

pub mod cli;
pub mod engine;
pub mod otlp;
pub mod python;
pub mod rl;
pub mod serve;
pub mod sim;
pub mod store_v3;
pub mod view;
