//! The OpenAI-compatible JSON on the wire: the request body we send and the
//! non-streaming response we parse. Pure functions, no IO.
//!
//! The body is serialized once per (call, endpoint) into a [`RequestBody`] and reused
//! across retries: a 350 KB rollout context is not re-encoded on every attempt, and its
//! long segments' escapes are shared with every other body that quotes them.

use bytes::Bytes;
use serde::Deserialize;

use super::escape_cache::EscapeCache;
use super::json_string::write_escaped;
use super::request_body::RequestBody;
use crate::wire::{ChatRequest, Usage};

/// What a finished completion contains, before the client adds endpoint/latency data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub content: String,
    pub reasoning: Option<String>,
    pub usage: Usage,
    pub finish_reason: Option<String>,
}

/// Serialize the request for one endpoint (its model name, the fitted `max_tokens`).
///
/// The bytes are exactly what `serde_json` writes for the OpenAI request object (the
/// tests compare them with a serialized struct of its fields), written by hand so that
/// the message texts go through the word-at-a-time escaper of [`super::json_string`]
/// instead of `serde_json`'s byte loop. A message's segments are written one by one; the
/// long ones are escaped once by `escapes` and their escaped bytes become pieces of the
/// body shared with every other body that quotes them (no copy).
pub fn encode_request(
    model: &str,
    request: &ChatRequest,
    max_tokens: u32,
    escapes: &EscapeCache,
) -> Result<RequestBody, serde_json::Error> {
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut buf = Vec::with_capacity(256 + model.len());
    buf.extend_from_slice(b"{\"model\":");
    write_escaped(&mut buf, model);
    buf.extend_from_slice(b",\"messages\":[");
    for (i, message) in request.messages.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"{\"role\":");
        write_escaped(&mut buf, &message.role);
        buf.extend_from_slice(b",\"content\":\"");
        for segment in message.content.segments() {
            match escapes.shared(segment) {
                Some(escaped) => {
                    if !buf.is_empty() {
                        pieces.push(Bytes::from(std::mem::take(&mut buf)));
                    }
                    pieces.push(escaped);
                }
                None => super::json_string::write_escaped_inner(&mut buf, segment),
            }
        }
        buf.extend_from_slice(b"\"}");
    }
    // Numbers through serde_json, so they are formatted as it formats them.
    buf.extend_from_slice(b"],\"temperature\":");
    serde_json::to_writer(&mut buf, &request.sampling.temperature)?;
    buf.extend_from_slice(b",\"top_p\":");
    serde_json::to_writer(&mut buf, &request.sampling.top_p)?;
    if let Some(top_k) = request.sampling.top_k {
        buf.extend_from_slice(b",\"top_k\":");
        serde_json::to_writer(&mut buf, &top_k)?;
    }
    buf.extend_from_slice(b",\"max_tokens\":");
    serde_json::to_writer(&mut buf, &max_tokens)?;
    buf.extend_from_slice(if request.stream {
        // Ask for a final usage chunk; vLLM and SGLang both honour it.
        b",\"stream\":true,\"stream_options\":{\"include_usage\":true}}".as_slice()
    } else {
        b",\"stream\":false}".as_slice()
    });
    pieces.push(Bytes::from(buf));
    Ok(RequestBody::from_pieces(pieces))
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
            estimated: false,
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
    use std::sync::Arc;

    use super::*;
    use crate::wire::{CallTags, ChatMessage, Sampling};

    fn request(stream: bool) -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::system("sys"), ChatMessage::user("hi")],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 99,
                top_k: None,
            },
            tags: CallTags::default(),
            stream,
        }
    }

    /// The body as `serde_json` writes it: the reference [`encode_request`] must match.
    #[derive(serde::Serialize)]
    struct WireRequest<'a> {
        model: &'a str,
        messages: &'a [ChatMessage],
        temperature: f32,
        top_p: f32,
        #[serde(skip_serializing_if = "Option::is_none")]
        top_k: Option<u32>,
        max_tokens: u32,
        stream: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        stream_options: Option<StreamOptions>,
    }

    #[derive(serde::Serialize)]
    struct StreamOptions {
        include_usage: bool,
    }

    fn reference(model: &str, request: &ChatRequest, max_tokens: u32) -> Vec<u8> {
        serde_json::to_vec(&WireRequest {
            model,
            messages: &request.messages,
            temperature: request.sampling.temperature,
            top_p: request.sampling.top_p,
            top_k: request.sampling.top_k,
            max_tokens,
            stream: request.stream,
            stream_options: request.stream.then_some(StreamOptions {
                include_usage: true,
            }),
        })
        .unwrap()
    }

    #[test]
    fn request_body_is_byte_for_byte_serde_jsons() {
        let texts = [
            "",
            "hi",
            "Solve: \"x\" \\ y\n\tz\r\u{1}\u{1f} ünï ∑ 数学 \u{10ffff}",
            &"a long line of a rollout with \\boxed{42} and \"quotes\"\n".repeat(500),
        ];
        for stream in [false, true] {
            for (temperature, top_p) in [(1.0, 0.95), (0.0, 1.0), (0.7, 0.1), (1e-7, 0.333_333)] {
                for text in texts {
                    let mut r = request(stream);
                    r.messages = vec![
                        ChatMessage::system(format!("sys {text}")),
                        ChatMessage::user(text),
                    ];
                    r.sampling.temperature = temperature;
                    r.sampling.top_p = top_p;
                    r.sampling.top_k = (top_p < 0.5).then_some(20);
                    for (model, max_tokens) in [("m1", 42), ("Qwen/Qwen3-8B \"q\"", u32::MAX)] {
                        let ours = encode_request(model, &r, max_tokens, &EscapeCache::new())
                            .unwrap()
                            .to_bytes();
                        assert_eq!(
                            String::from_utf8_lossy(&ours),
                            String::from_utf8_lossy(&reference(model, &r, max_tokens)),
                        );
                    }
                }
            }
        }
        let mut empty = request(false);
        empty.messages.clear();
        assert_eq!(
            encode_request("m", &empty, 1, &EscapeCache::new())
                .unwrap()
                .to_bytes(),
            reference("m", &empty, 1)
        );
    }

    #[test]
    fn a_segmented_prompt_encodes_as_its_flat_text_cached_or_not() {
        use crate::wire::{PromptText, PromptTextBuilder};
        let solution: Arc<str> = "Step \"1\": \\frac{a}{b}\n\tü 数 \u{1}\n"
            .repeat(100)
            .into();
        let mut b = PromptTextBuilder::new();
        b.push_str("Question \"q\"\n");
        b.push_shared(&solution);
        b.push_str("\n---\n");
        b.push_shared(&solution);
        let segmented = b.finish();
        assert!(segmented.segments().len() > 1);
        let flat = PromptText::from(segmented.to_string());
        let cache = EscapeCache::new();
        let mut bodies = Vec::new();
        for escapes in [&cache, &cache, &EscapeCache::disabled()] {
            let mut r = request(false);
            r.messages = vec![
                ChatMessage::system("sys"),
                ChatMessage::user(segmented.clone()),
            ];
            let ours = encode_request("m", &r, 7, escapes).unwrap();
            r.messages[1] = ChatMessage::user(flat.clone());
            assert_eq!(ours.to_bytes(), reference("m", &r, 7));
            bodies.push(ours);
        }
        // The long segment's escape is one allocation, shared within and across the
        // bodies of one cache; without a cache the body is one buffer.
        let long = |b: &RequestBody| -> Vec<*const u8> {
            b.pieces()
                .iter()
                .filter(|p| p.len() >= solution.len())
                .map(|p| p.as_ptr())
                .collect()
        };
        let (first, second) = (long(&bodies[0]), long(&bodies[1]));
        assert_eq!(first.len(), 2, "{:?}", bodies[0]);
        assert!(first.iter().all(|p| *p == first[0]));
        assert_eq!(first, second);
        assert_eq!(bodies[2].pieces().len(), 1);
    }

    #[test]
    fn request_body_has_model_and_fitted_max_tokens() {
        let body = encode_request("m1", &request(true), 42, &EscapeCache::new())
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["model"], "m1");
        assert_eq!(v["max_tokens"], 42);
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["messages"][1]["content"], "hi");
        let plain: serde_json::Value = serde_json::from_slice(
            &encode_request("m", &request(false), 1, &EscapeCache::new())
                .unwrap()
                .to_bytes(),
        )
        .unwrap();
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
                completion_tokens: 4,
                estimated: false,
            }
        );
        let vllm = br#"{"choices":[{"message":{"content":"B","reasoning":"R2"},"finish_reason":"length"}]}"#;
        let c = parse_response(vllm).unwrap();
        assert_eq!(c.reasoning.as_deref(), Some("R2"));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn reply_texts_decode_as_serde_json_decodes_them() {
        let body = serde_json::json!({
            "choices": [{
                "message": {
                    "content": "Step 1:\n\t\"x\" \\ y ü 数 \u{1}",
                    "reasoning_content": "think\r\nmore"
                },
                "finish_reason": "stop"
            }]
        })
        .to_string();
        let c = parse_response(body.as_bytes()).unwrap();
        assert_eq!(c.content, "Step 1:\n\t\"x\" \\ y ü 数 \u{1}");
        assert_eq!(c.reasoning.as_deref(), Some("think\r\nmore"));
        // Escapes serde_json would not write itself.
        let body = br#"{"choices":[{"message":{"content":"a\/b \u00e9 \ud83d\ude00"}}]}"#;
        assert_eq!(parse_response(body).unwrap().content, "a/b é 😀");
        // Content that is not a string (some servers send a list of parts).
        let body = br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}"#;
        let err = parse_response(body).unwrap_err();
        assert!(err.contains("expected a string"), "{err}");
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
