//! Helpers shared by the client's integration tests.
//!
//! - [`mock_server`]: a scriptable OpenAI-compatible server, and client configs pointing
//!   at it.
//! - [`logs`] and [`wait`]: log capture on a runtime of the test's own, and waiting for a
//!   condition — the same files as the runtime's tests use.

#[path = "../../../actors/tests/it/support/logs.rs"]
pub mod logs;
pub mod mock_server;
#[path = "../../../actors/tests/it/support/wait.rs"]
pub mod wait;

pub use wait::wait_until;
