//! Embeddings requests (`POST {base_url}/embeddings`, OpenAI format), and the request
//! kinds a call can carry.
//!
//! An embeddings call is made like a chat call — same roles, pools, client, limits,
//! retries, run store — and its outcome reaches the strategy as a
//! [`super::ChatResponse`] whose `embeddings` holds the vectors (its `content` is empty),
//! so every layer that counts, records or traces calls handles both without a second
//! outcome type.

use std::sync::Arc;

use super::{CallTags, ChatRequest, prompt_text};

/// The embeddings of `inputs`, one vector per input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingRequest {
    pub inputs: Vec<Arc<str>>,
    pub tags: CallTags,
}

impl EmbeddingRequest {
    /// Total bytes of the inputs: the basis of the byte-based token estimate.
    pub fn input_bytes(&self) -> usize {
        self.inputs.iter().map(|s| s.len()).sum()
    }

    /// The text the run store keys this request by: the inputs as a JSON array of strings
    /// (so a changed, added or reordered input is a different prompt).
    pub fn prompt_text(&self) -> Arc<str> {
        serde_json::to_string(&self.inputs)
            .unwrap_or_else(|e| format!("unencodable inputs: {e}"))
            .into()
    }
}

/// The vectors of an embeddings reply: one per input, in input order, all of one
/// dimension, every number finite (the client checks all of it before handing them on).
pub type Embeddings = Arc<[Vec<f32>]>;

/// What one call asks of a model.
#[derive(Debug, Clone)]
pub enum ModelRequest {
    Chat(ChatRequest),
    Embeddings(EmbeddingRequest),
}

impl ModelRequest {
    pub fn tags(&self) -> &CallTags {
        match self {
            Self::Chat(r) => &r.tags,
            Self::Embeddings(r) => &r.tags,
        }
    }

    pub fn tags_mut(&mut self) -> &mut CallTags {
        match self {
            Self::Chat(r) => &mut r.tags,
            Self::Embeddings(r) => &mut r.tags,
        }
    }

    /// The text the run store keys the call's prompt by ([`prompt_text`] of a chat
    /// request's messages, [`EmbeddingRequest::prompt_text`] of an embeddings request).
    pub fn prompt_text(&self) -> Arc<str> {
        match self {
            Self::Chat(r) => prompt_text(&r.messages),
            Self::Embeddings(r) => r.prompt_text(),
        }
    }

    /// Bytes of prompt text (messages or inputs).
    pub fn prompt_bytes(&self) -> usize {
        match self {
            Self::Chat(r) => r.prompt_bytes(),
            Self::Embeddings(r) => r.input_bytes(),
        }
    }
}

impl From<ChatRequest> for ModelRequest {
    fn from(r: ChatRequest) -> Self {
        Self::Chat(r)
    }
}

impl From<EmbeddingRequest> for ModelRequest {
    fn from(r: EmbeddingRequest) -> Self {
        Self::Embeddings(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_prompt_of_an_embeddings_request_tells_inputs_apart() {
        let req = |inputs: &[&str]| EmbeddingRequest {
            inputs: inputs.iter().map(|s| Arc::from(*s)).collect(),
            tags: CallTags::default(),
        };
        assert_eq!(&*req(&["a \"b\"", "c"]).prompt_text(), r#"["a \"b\"","c"]"#);
        // Joined texts would make these two equal; the JSON array does not.
        assert_ne!(
            req(&["ab", "c"]).prompt_text(),
            req(&["a", "bc"]).prompt_text()
        );
        assert_eq!(req(&["ab", "c"]).input_bytes(), 3);
    }
}
