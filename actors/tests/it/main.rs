//! Integration tests of `tmas-actors`: one test binary whose modules are the former test
//! files (each file in `tests/` would be linked against the whole crate on its own).
//!
//! The modules run as threads of one process: a test that captures logs installs its
//! subscriber for its own threads only ([`support::logs`]), never process-wide.

mod support;

mod runtime_executor;
mod runtime_pool;
mod runtime_priority;
mod runtime_run;
mod runtime_spans;
