//! `[endpoints.NAME]`, `[groups]` and `[roles.ROLE]`: where each agent role's calls go and
//! how they are sampled.
//!
//! Endpoint entries have no defaults layer (their names are the user's), so their optional
//! keys carry serde default functions; role defaults live in `Roles::default()`. The roles
//! themselves are [`crate::role::Role`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tmas_client::wire::Sampling;

use crate::role::{PerRole, Role};

/// `base_url` value meaning "start the simulator in-process and use its URL".
pub const EMBEDDED_SIM: &str = "embedded-sim";

/// Name of the group every role uses unless told otherwise. When `[groups]` does not
/// declare it, it holds every endpoint (sorted by name).
pub const DEFAULT_GROUP: &str = "default";

/// One OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// `http(s)://host:port/v1`, or `embedded-sim`.
    pub base_url: String,
    /// Model name sent in each request.
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Cap on requests in flight to this endpoint.
    #[serde(default = "default_endpoint_max_in_flight")]
    pub max_in_flight: usize,
    /// Connections opened to this endpoint at once (handshakes in progress); the others
    /// wait their turn. Over HTTP/1.1 each call in flight holds a connection, so a run
    /// opens up to `max_in_flight` of them in its first second: a burst larger than the
    /// server's listen backlog (uvicorn's default 2,048) has connections refused, which
    /// count as connection failures.
    #[serde(default = "default_max_connecting")]
    pub max_connecting: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u32>,
    /// Whole-request timeout (non-streaming calls): long enough for a 128k-token thinking
    /// generation on a loaded server.
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    /// Streaming calls: longest silence between chunks before the server is presumed dead.
    #[serde(default = "default_stream_idle_timeout_secs")]
    pub stream_idle_timeout_secs: u64,
    /// Context window in tokens (prompt + output).
    #[serde(default = "default_context_window")]
    pub context_window: u32,
    /// Local HuggingFace `tokenizer.json`; without it prompt tokens are estimated from bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// Bytes per token for the byte-based estimate (3.0 is conservative for English/LaTeX).
    #[serde(default = "default_bytes_per_token")]
    pub bytes_per_token: f64,
    /// Use server-sent events (lets the idle timeout detect a dead server quickly).
    #[serde(default)]
    pub stream: bool,
}

fn default_endpoint_max_in_flight() -> usize {
    800
}
fn default_max_connecting() -> usize {
    tmas_client::DEFAULT_MAX_CONNECTING
}
fn default_request_timeout_secs() -> u64 {
    7200
}
fn default_stream_idle_timeout_secs() -> u64 {
    300
}
fn default_context_window() -> u32 {
    131_072
}
fn default_bytes_per_token() -> f64 {
    3.0
}

impl EndpointConfig {
    /// An endpoint with every optional key at its default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            max_in_flight: default_endpoint_max_in_flight(),
            max_connecting: default_max_connecting(),
            requests_per_minute: None,
            tokens_per_minute: None,
            request_timeout_secs: default_request_timeout_secs(),
            stream_idle_timeout_secs: default_stream_idle_timeout_secs(),
            context_window: default_context_window(),
            tokenizer: None,
            bytes_per_token: default_bytes_per_token(),
            stream: false,
        }
    }

    /// True when the runner must start the simulator in-process for this endpoint.
    pub fn is_embedded_sim(&self) -> bool {
        self.base_url == EMBEDDED_SIM
    }
}

/// `[roles.ROLE]`: one role's endpoint group, sampling and worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// Endpoint group this role's calls are routed to.
    pub group: String,
    pub temperature: f64,
    pub top_p: f64,
    /// Sample only from the `top_k` most likely tokens (sent as `top_k`, an extension
    /// vLLM and SGLang accept); unset = not sent, the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// The role's cap on output tokens; each request is lowered further to fit the window.
    pub max_tokens: u32,
    /// Prompt template file overriding the built-in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PathBuf>,
    /// Worker-pool concurrency of this role; unset = bounded only by the in-flight caps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<usize>,
}

impl RoleConfig {
    fn with_temperature(temperature: f64, max_tokens: u32) -> Self {
        Self {
            group: DEFAULT_GROUP.to_string(),
            temperature,
            top_p: 0.95,
            top_k: None,
            max_tokens,
            prompt: None,
            pool_size: None,
        }
    }

    /// The wire-level sampling settings (f64 in the file so values print as written).
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature as f32,
            top_p: self.top_p as f32,
            max_tokens: self.max_tokens,
            top_k: self.top_k,
        }
    }
}

/// `[roles]`: the five TMAS roles, the judge and the baselines' own roles, one table per
/// role keyed by its name.
pub type Roles = PerRole<RoleConfig>;

/// The released `max_tokens` (the runner then fits it into the context window).
const RELEASED_MAX_TOKENS: u32 = 128_000;

impl Default for Roles {
    /// Paper/released sampling: 1.0 for solution and verification, 0.6 for the summary and
    /// memory agents, top_p 0.95. The judge samples at 0.6 too: its R = 4 runs are averaged,
    /// which only means something if they can differ; its answer is short, hence 32768.
    fn default() -> Self {
        PerRole::from_fn(|role| match role {
            Role::Solution | Role::Verification => {
                RoleConfig::with_temperature(1.0, RELEASED_MAX_TOKENS)
            }
            Role::Summary | Role::Experience | Role::Guideline => {
                RoleConfig::with_temperature(0.6, RELEASED_MAX_TOKENS)
            }
            Role::Judge => RoleConfig::with_temperature(0.6, 32_768),
            // One short verdict per rollout, asked once: sampled cold.
            Role::GuidelineJudge => RoleConfig::with_temperature(0.0, 8_192),
            // Self-Refine's feedback is the generator's own model at its sampling.
            Role::Critique => RoleConfig::with_temperature(1.0, RELEASED_MAX_TOKENS),
            // RSE's extractor summarizes, like the memory agents.
            Role::Extraction => RoleConfig::with_temperature(0.6, RELEASED_MAX_TOKENS),
            // Sampling keys unused; set to what a deterministic call would send.
            Role::Embedding => RoleConfig::with_temperature(0.0, 1),
        })
    }
}
