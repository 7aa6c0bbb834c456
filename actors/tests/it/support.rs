//! Helpers shared by the runtime's integration tests.
//!
//! - [`mock_server`]: a scriptable OpenAI-compatible server for the model client, and
//!   client configs pointing at it.
//! - [`toy`]: a fake call executor and a deterministic toy strategy for the runner.
//! - [`logs`]: log capture on a runtime of the test's own.

pub mod logs;
pub mod mock_server;
pub mod toy;
