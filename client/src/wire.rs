//! Chat-completion and embeddings types shared by the strategy, the model client and the
//! simulator.
//!
//! Large texts are `Arc<str>` so a 350 KB rollout context is shared, never copied, as a
//! request travels from the strategy through the pools to an endpoint; a prompt is a
//! [`PromptText`] of such segments, so prompts that quote the same rollouts share them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod embedding;
mod text;

pub use embedding::{EmbeddingRequest, Embeddings, ModelRequest};
pub use text::{PromptText, PromptTextBuilder, SHARE_AT};

/// One chat message (`system`, `user` or `assistant`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Arc<str>,
    pub content: PromptText,
}

impl ChatMessage {
    pub fn system(content: impl Into<PromptText>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<PromptText>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<PromptText>) -> Self {
        Self {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// Sampling settings of one role.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub temperature: f32,
    pub top_p: f32,
    /// The role's cap on output tokens; the client lowers it further so that
    /// prompt + output fits the chosen endpoint's context window.
    pub max_tokens: u32,
    /// Sample only from the `top_k` most likely tokens (vLLM's and SGLang's extension of
    /// the OpenAI request); sent only when set, since OpenAI's own API refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
}

/// Labels that travel with a request as `x-tmas-*` headers (useful in server logs, and
/// read by the simulator) and on spans.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTags {
    /// Agent role (`solution`, `verification`, …); also selects the endpoint group.
    pub role: Arc<str>,
    pub problem: Arc<str>,
    pub iteration: u32,
    /// The call's identity ([`crate::strategy::CallKey`] in display form, e.g.
    /// `p/it3/verification/c2/v5/a0`), sent as `x-tmas-call`. Filled in by the pool worker
    /// from the job's key when the strategy left it empty; a simulator seeds its reply by
    /// it, so a call re-sent after a crash gets the same reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Arc<str>>,
    /// The prompt prefix this call shares with other calls (e.g. `p/it3/c2` for the M
    /// verifications of one candidate, which send the same prompt): under prefix-affinity
    /// routing, calls with the same key prefer the same endpoint, whose prefix cache then
    /// holds that prefix. `None` means the problem, whose calls share its question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Arc<str>>,
}

impl CallTags {
    /// Sets [`Self::call`] to `key` (the call's key in display form) unless the strategy
    /// already named the call.
    pub fn identify(&mut self, key: &impl std::fmt::Display) {
        if self.call.is_none() {
            self.call = Some(key.to_string().into());
        }
    }

    /// The key prefix-affinity routing hashes: [`Self::affinity`], else the problem.
    pub fn affinity_key(&self) -> &str {
        self.affinity.as_deref().unwrap_or(&self.problem)
    }
}

/// A request as the strategy describes it; the client adds model name and `max_tokens`.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub sampling: Sampling,
    pub tags: CallTags,
    /// Use server-sent events; an idle timeout then detects a dead server quickly.
    pub stream: bool,
}

impl ChatRequest {
    /// Total bytes of message content: the basis of the byte-based token estimate.
    pub fn prompt_bytes(&self) -> usize {
        self.messages.iter().map(|m| m.content.len()).sum()
    }
}

/// Token usage as reported by the server, or estimated by the client when the server
/// reported none (`estimated`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The server sent no usage (llama.cpp's server on a stream, for one): both counts
    /// are the client's estimate ([`crate::tokens::TokenCounter::estimate_usage`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// Whether the server reported nothing: both counts 0 and not estimated.
    pub fn is_missing(&self) -> bool {
        !self.estimated && self.prompt_tokens == 0 && self.completion_tokens == 0
    }
}

/// A piece of a streamed chat completion as it arrives ([`crate::ModelClient::chat_streaming`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// An attempt began streaming. After the first, the pieces sent before it belong to
    /// an attempt that failed, and the retry's text starts over.
    Attempt,
    /// Text of the answer.
    Content(String),
    /// Reasoning text (`reasoning_content` or `reasoning` on the wire).
    Reasoning(String),
}

/// Where a streamed call's pieces go as they arrive.
pub type DeltaSink = tokio::sync::mpsc::UnboundedSender<StreamDelta>;

/// A finished call: a chat completion, or (with `embeddings`) an embeddings reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: Arc<str>,
    /// Reasoning text from `reasoning_content` (SGLang) or `reasoning` (vLLM), if any.
    pub reasoning: Option<Arc<str>>,
    pub usage: Usage,
    /// `stop`, `length`, …; `length` means the output was truncated.
    pub finish_reason: Option<String>,
    /// Wall time of the successful attempt.
    pub latency_ms: u64,
    /// Name of the endpoint that served it.
    pub endpoint: Arc<str>,
    /// 1 for a first-try success.
    pub attempts: u32,
    /// The `max_tokens` actually sent.
    pub max_tokens_sent: u32,
    /// The vectors of an embeddings call (`content` is then empty, `completion_tokens`
    /// 0 and `max_tokens_sent` 0); `None` for a chat completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<Embeddings>,
}
/// The prompt text stored for a request: the single message's content (the common case,
/// shared by reference with the request), else the messages as a JSON array.
pub fn prompt_text(messages: &[ChatMessage]) -> Arc<str> {
    match messages {
        [only] => only.content.flatten(),
        many => serde_json::to_string(many)
            .unwrap_or_else(|e| format!("unencodable messages: {e}"))
            .into(),
    }
}
