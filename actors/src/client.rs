//! The model client: routing, in-flight caps, rate limits, retries, circuit breaking and
//! streaming for OpenAI-compatible endpoints.
//!
//! A call runs in the caller's task (or, through the [`crate::strategy::CallExecutor`]
//! impl, in a task of its own) against state shared by all calls: atomics, semaphores and
//! rate limiters per endpoint. The only actors are the endpoint actors that probe a down
//! endpoint until it may be used again, under a supervisor that restarts them; a call
//! never waits on an actor's mailbox.
//!
//! Layout (one concept per module):
//! - [`config`] / `validate`: the settings and their checks.
//! - [`handle`]: [`ModelClient`], the cheap-clone handle (`start`, `chat`, `embed`,
//!   `snapshot`, `shutdown`) and its [`crate::strategy::CallExecutor`] impl.
//! - `call`: one call's path — outage wait, global and endpoint slots, rate limits,
//!   retries with exponential backoff and jitter, `Retry-After` (`retry_after`), a
//!   budget per kind of failure (`retry_budget`: overload in time, timeouts, the rest in
//!   attempts); `call/embeddings.rs` is the same path for an embeddings call.
//! - `limit`: each endpoint's concurrency limit: AIMD (overload is back-pressure), or
//!   also following the server's queue (gradient).
//! - `breaker`: when an endpoint counts as unhealthy (consecutive hard failures, or a
//!   failure ratio over a sliding window).
//! - `router`: groups and their routing (fewest in flight, or prefix affinity by
//!   bounded-load rendezvous hashing).
//! - `connect_limit`: how many connections an endpoint's client opens at once.
//! - `endpoint`: an endpoint's shared state (atomics, semaphore, limiters, HTTP client)
//!   and one HTTP attempt (plain or streaming).
//! - [`health`] / [`supervisor`]: the actors — one per endpoint owning breaker recovery
//!   (probing `GET /health`, falling back to `/models`), under a restarting supervisor.
//! - [`embeddings_body`]: the embeddings request and the checks a reply must pass (pure).
//! - `body` / `sse`: the JSON and server-sent events on the wire (pure); `escape_cache`:
//!   each long prompt segment JSON-escaped once for every body that quotes it.
//! - [`tokens`] — prompt-token estimates and the `max_tokens` that fits.
//! - [`error`] — [`ClientError`].
//! - [`permanent`] — permanent errors in a row, and the run stop they raise.
//! - `telemetry`: each HTTP attempt's span (GenAI conventions), `traceparent`, metrics.

mod body;
mod body_cache;
mod breaker;
mod call;
pub mod config;
mod connect_limit;
pub mod embeddings_body;
mod endpoint;
pub mod error;
mod escape_cache;
pub mod handle;
pub mod health;
mod json_string;
mod limit;
pub mod permanent;
mod request_body;
mod retry_after;
mod retry_budget;
mod router;
mod sse;
pub mod supervisor;
mod telemetry;
pub mod tokens;
mod validate;

pub use body::encode_request;
pub use config::{ApiKey, ClientConfig, EndpointSpec, ResiliencePolicy, Routing, TokenEstimate};
pub use connect_limit::connect_limit_layer;
pub use embeddings_body::{EmbeddingsReply, encode_embeddings_request, parse_embeddings_response};
pub use error::ClientError;
pub use escape_cache::EscapeCache;
pub use handle::{ClientSnapshot, EndpointSnapshot, ModelClient};
pub use limit::LimitAlgorithm;
pub use permanent::PermanentStop;
pub use request_body::RequestBody;
pub use supervisor::SupervisorStatus;
