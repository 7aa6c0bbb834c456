//! Model-client actors: one actor per endpoint, grouped for routing.
//!
//! See [`config`] for the settings they take.

pub mod config;

pub use config::{ApiKey, ClientConfig, EndpointSpec, ResiliencePolicy, TokenEstimate};
