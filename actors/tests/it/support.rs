//! Helpers shared by the runtime's integration tests.
//!
//! - [`toy`]: a fake call executor and a deterministic toy strategy for the runner.
//! - [`logs`]: log capture on a runtime of the test's own.
//! - [`wait`]: [`wait_until`] a condition holds, within [`TEST_TIMEOUT`].
//! - [`mock_model`]: a one-route OpenAI-compatible server on loopback, for the model
//!   client as the runtime's call executor.

pub mod logs;
pub mod mock_model;
pub mod toy;
pub mod wait;

pub use wait::{TEST_TIMEOUT, wait_until};
