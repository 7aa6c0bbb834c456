//! The OpenAI-compatible JSON on the wire: the request body we send and the
//! non-streaming response we parse. Pure functions, no IO.
//!
//! The body is serialized once per (call, endpoint) into [`Bytes`] and reused across
//! retries: a 350 KB rollout context is not re-encoded on every attempt.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::wire::{ChatMessage, ChatRequest, Usage};

/// What a finished completion contains, before the client adds endpoint/latency data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub content: String,
    pub reasoning: Option<String>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    temperature: f32,
    top_p: f32,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Serialize the request for one endpoint (its model name, the fitted `max_tokens`).
pub fn encode_request(
    model: &str,
    request: &ChatRequest,
    max_tokens: u32,
) -> Result<Bytes, serde_json::Error> {
    let wire = WireRequest {
        model,
        messages: &request.messages,
        temperature: request.sampling.temperature,
        top_p: request.sampling.top_p,
        max_tokens,
        stream: request.stream,
        // Ask for a final usage chunk; vLLM and SGLang both honour it.
        stream_options: request.stream.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    // Sized up front: growing a Vec by doubling to hold a 350 KB prompt copies it ~7
    // times and, above glibc's mmap threshold, faults every new block in page by page
    // (tmas bench eval profile, docs/benchmarks.md). Escaping rarely adds more than 1/16.
    let prompt = request.prompt_bytes();
    let mut buf = Vec::with_capacity(prompt + prompt / 16 + 256 + model.len());
    serde_json::to_writer(&mut buf, &wire)?;
    Ok(Bytes::from(buf))
}

#[derive(Deserialize, Default)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        }
    }
}

/// `message` (non-streaming) or `delta` (streaming): the same three text fields.
#[derive(Deserialize, Default)]
pub(crate) struct WireMessage {
    #[serde(default)]
    pub content: Option<String>,
    /// SGLang (and older vLLM).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Current vLLM.
    #[serde(default)]
    pub reasoning: Option<String>,
}

impl WireMessage {
    /// Whichever reasoning field the server used.
    pub fn take_reasoning(&mut self) -> Option<String> {
        self.reasoning_content
            .take()
            .or_else(|| self.reasoning.take())
    }
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// Why a 2xx body is not a usable completion (reported as `Malformed`).
pub type BodyProblem = String;

/// Parse a non-streaming response body.
pub fn parse_response(body: &[u8]) -> Result<Completion, BodyProblem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err("empty body".to_string());
    }
    let parsed: WireResponse =
        serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let Some(choice) = parsed.choices.into_iter().next() else {
        return Err("no `choices` in the response".to_string());
    };
    let mut message = choice
        .message
        .ok_or_else(|| "choice has no `message`".to_string())?;
    let completion = Completion {
        reasoning: message.take_reasoning().filter(|r| !r.is_empty()),
        content: message.content.unwrap_or_default(),
        usage: parsed.usage.map(Usage::from).unwrap_or_default(),
        finish_reason: choice.finish_reason,
    };
    check_not_empty(completion)
}

/// A completion with neither text nor reasoning is only acceptable when it was cut off
/// (`finish_reason = "length"`, reported as such); otherwise the server misbehaved.
pub fn check_not_empty(c: Completion) -> Result<Completion, BodyProblem> {
    let has_text = !c.content.is_empty() || c.reasoning.as_deref().is_some_and(|r| !r.is_empty());
    if has_text || c.finish_reason.as_deref() == Some("length") {
        Ok(c)
    } else {
        Err("empty completion (no content, no reasoning)".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{CallTags, Sampling};

    fn request(stream: bool) -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::system("sys"), ChatMessage::user("hi")],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 99,
            },
            tags: CallTags::default(),
            stream,
        }
    }

    #[test]
    fn request_body_has_model_and_fitted_max_tokens() {
        let body = encode_request("m1", &request(true), 42).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["model"], "m1");
        assert_eq!(v["max_tokens"], 42);
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["messages"][1]["content"], "hi");
        let plain: serde_json::Value =
            serde_json::from_slice(&encode_request("m", &request(false), 1).unwrap()).unwrap();
        assert!(plain.get("stream_options").is_none());
    }

    #[test]
    fn parses_both_reasoning_fields() {
        let sglang = br#"{"choices":[{"message":{"content":"A","reasoning_content":"R1"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let c = parse_response(sglang).unwrap();
        assert_eq!(
            (c.content.as_str(), c.reasoning.as_deref()),
            ("A", Some("R1"))
        );
        assert_eq!(
            c.usage,
            Usage {
                prompt_tokens: 3,
                completion_tokens: 4
            }
        );
        let vllm = br#"{"choices":[{"message":{"content":"B","reasoning":"R2"},"finish_reason":"length"}]}"#;
        let c = parse_response(vllm).unwrap();
        assert_eq!(c.reasoning.as_deref(), Some("R2"));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn malformed_bodies_are_rejected() {
        assert!(parse_response(b"").is_err());
        assert!(parse_response(b"{not json").is_err());
        assert!(parse_response(br#"{"choices":[]}"#).is_err());
        assert!(
            parse_response(br#"{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}"#)
                .is_err()
        );
        // Cut off before any text: legitimate, reported through finish_reason.
        assert!(
            parse_response(
                br#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#
            )
            .is_ok()
        );
    }
}
