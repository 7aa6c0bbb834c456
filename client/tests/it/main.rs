//! Integration tests of `tmas-client`: one test binary whose modules each cover one part
//! of the client against a scriptable OpenAI-compatible server on loopback
//! ([`support::mock_server`]).
//!
//! The modules run as threads of one process: a test that captures logs installs its
//! subscriber for its own threads only ([`support::logs`]), never process-wide.

mod support;

mod body;
mod burst;
mod embeddings;
mod failover;
mod retry;
mod secrets;
mod stream;
