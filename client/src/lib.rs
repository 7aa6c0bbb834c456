//! `tmas-client`: the model client every call of a run goes through — routing, in-flight
//! caps, rate limits, retries, circuit breaking and streaming for OpenAI-compatible
//! endpoints — and the wire types those calls carry.
//!
//! A call runs in the caller's task against state shared by all calls: atomics,
//! semaphores and rate limiters per endpoint. Its rules (retry budget, hedging, racing
//! after a crash, outage waits) live in a sans-IO plan fed events and returning actions;
//! a small driver performs the actions. The only actors are the endpoint actors that
//! probe a down endpoint until it may be used again, under a supervisor that restarts
//! them; a call never waits on an actor's mailbox. The runtime (`tmas-actors`) runs calls
//! on its own tasks through its `CallExecutor` impl for [`ModelClient`].
//!
//! ```no_run
//! use tmas_client::wire::ChatRequest;
//! use tmas_client::{ClientConfig, ClientError, ModelClient};
//!
//! async fn ask(config: ClientConfig, request: ChatRequest) -> Result<(), ClientError> {
//!     let client = ModelClient::start(config).await?;
//!     // "solver" is an endpoint group of the config; the call routes, waits for a slot,
//!     // retries and fails over within it.
//!     let reply = client.chat("solver", request).await?;
//!     println!("{} (from {})", reply.content, reply.endpoint);
//!     client.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! The modules, one concept each:
//!
//! **What other crates use**
//! - [`wire`]: the chat and embeddings request/response types.
//! - [`failure`]: [`failure::FailureKind`], why a call failed — one vocabulary for the
//!   client, the runtime's pools and coordinators and the application's store.
//! - `config` / `validate`: [`ClientConfig`] and its checks.
//! - `handle`: [`ModelClient`], the cheap-clone handle (`start`, `chat`, `embed`,
//!   `snapshot`, `shutdown`).
//! - `error`: [`ClientError`] and the HTTP status rules (`is_retryable_status`,
//!   `retry_after`) that the application's start-up check shares.
//! - `permanent`: permanent errors in a row, and the run stop they raise
//!   ([`PermanentStop`]).
//!
//! **One call** (`call`): the plan (`call/plan.rs`, events in, actions out, table-tested
//! without sockets or sleeps), the driver that performs its actions, the slot wait, one
//! attempt, chat and embeddings jobs; `retry_after` and `retry_budget` (a budget per kind
//! of failure: overload in time, timeouts, the rest in attempts).
//!
//! **One endpoint**: `endpoint` (shared state, one HTTP attempt plain or streaming),
//! `limit` (its concurrency limit: AIMD, or also following the server's queue),
//! `breaker` (when it counts as unhealthy), `connect_limit` (connections opened at once),
//! `health` / `supervisor` (the recovery actors).
//!
//! **Routing**: `router` (groups: fewest in flight, or prefix affinity by bounded-load
//! rendezvous hashing).
//!
//! **On the wire** (pure): `body` / `sse` (JSON and server-sent events), `request_body`,
//! `body_cache` and `escape_cache` (each long prompt segment JSON-escaped once for every
//! body that quotes it), `json_string`, `embeddings_body`; `tokens` (prompt-token
//! estimates and the `max_tokens` that fits); `telemetry` (each attempt's span with the
//! GenAI conventions, `traceparent`, metrics).

pub mod failure;
pub mod wire;

mod body;
mod body_cache;
mod breaker;
mod call;
mod config;
mod connect_limit;
mod embeddings_body;
mod endpoint;
mod error;
mod escape_cache;
mod handle;
mod health;
mod json_string;
mod limit;
mod permanent;
mod request_body;
mod retry_after;
mod retry_budget;
mod router;
mod sse;
mod supervisor;
mod telemetry;
mod tokens;
mod validate;

pub use body::encode_request;
pub use config::{
    ApiKey, ClientConfig, DEFAULT_MAX_CONNECTING, EndpointSpec, ResiliencePolicy, Routing,
    TokenEstimate,
};
pub use connect_limit::connect_limit_layer;
pub use embeddings_body::{EmbeddingsReply, encode_embeddings_request, parse_embeddings_response};
pub use error::{ClientError, Interruption, is_retryable_status, retry_after};
pub use escape_cache::EscapeCache;
pub use handle::{ClientSnapshot, EndpointSnapshot, ModelClient};
pub use limit::LimitAlgorithm;
pub use permanent::PermanentStop;
pub use request_body::RequestBody;
pub use supervisor::SupervisorStatus;
pub use tokens::TokenCounter;
