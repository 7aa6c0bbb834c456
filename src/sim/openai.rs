//! OpenAI chat-completion wire shapes: the request fields the simulator reads and the
//! response bodies it writes (non-stream JSON, SSE chunks, errors). Responses borrow the
//! reply text so a 40 KB solution is serialized without extra copies.

use std::borrow::Cow;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::options::ReasoningField;

/// The request fields the simulator uses; everything else is ignored.
#[derive(Debug, Deserialize)]
pub struct ChatBody<'a> {
    #[serde(borrow)]
    pub messages: Vec<Message<'a>>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    #[serde(borrow)]
    pub role: Cow<'a, str>,
    #[serde(borrow, default)]
    pub content: Option<Content<'a>>,
}

/// Message content: a string or a list of typed parts (only `text` parts are read).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Parts(#[serde(borrow)] Vec<Part<'a>>),
}

#[derive(Debug, Deserialize)]
pub struct Part<'a> {
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
}

impl Message<'_> {
    /// The message's text (parts joined by newlines).
    pub fn text(&self) -> Cow<'_, str> {
        match &self.content {
            None => Cow::Borrowed(""),
            Some(Content::Text(t)) => Cow::Borrowed(t),
            Some(Content::Parts(ps)) => Cow::Owned(
                ps.iter()
                    .filter_map(|p| p.text.as_deref())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        }
    }
}

/// Token counts (the simulator counts 1 token per 4 bytes).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// Bytes per simulated token.
pub const BYTES_PER_TOKEN: usize = 4;

pub fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// Everything needed to write one completion.
pub struct Completion<'a> {
    pub id: &'a str,
    pub model: &'a str,
    pub created: u64,
    pub content: &'a str,
    pub reasoning: &'a str,
    pub reasoning_field: ReasoningField,
    pub finish_reason: &'a str,
    pub usage: Usage,
    /// Send `usage` in the final stream chunk (llama.cpp's server sends none).
    pub stream_usage: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Msg<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<Msg<'a>>,
    /// Always `null`, as vLLM and llama.cpp send it when no logprobs were asked for.
    logprobs: Option<()>,
    finish_reason: Option<&'a str>,
}

#[derive(Serialize, Default)]
struct Msg<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a str>,
}

impl<'a> Msg<'a> {
    fn with_reasoning(mut self, field: ReasoningField, text: &'a str) -> Self {
        match field {
            ReasoningField::ReasoningContent => self.reasoning_content = Some(text),
            ReasoningField::Reasoning => self.reasoning = Some(text),
            ReasoningField::None => {}
        }
        self
    }
}

fn to_vec<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

/// The non-stream `chat.completion` JSON.
pub fn completion_json(c: &Completion<'_>) -> Vec<u8> {
    let mut msg = Msg {
        role: Some("assistant"),
        content: Some(c.content),
        ..Msg::default()
    };
    if !c.reasoning.is_empty() {
        msg = msg.with_reasoning(c.reasoning_field, c.reasoning);
    }
    to_vec(&Body {
        id: c.id,
        object: "chat.completion",
        created: c.created,
        model: c.model,
        choices: [Choice {
            index: 0,
            message: Some(msg),
            delta: None,
            logprobs: None,
            finish_reason: Some(c.finish_reason),
        }],
        usage: Some(c.usage),
    })
}

fn chunk(c: &Completion<'_>, delta: Msg<'_>, finish: Option<&str>, usage: Option<Usage>) -> Bytes {
    let body = Body {
        id: c.id,
        object: "chat.completion.chunk",
        created: c.created,
        model: c.model,
        choices: [Choice {
            index: 0,
            message: None,
            delta: Some(delta),
            logprobs: None,
            finish_reason: finish,
        }],
        usage,
    };
    let mut out = Vec::with_capacity(c.content.len().min(4096) + 256);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(&to_vec(&body));
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Splits `s` into pieces of about `n` bytes at char boundaries.
fn pieces(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut cut = n.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (a, b) = rest.split_at(cut);
        out.push(a);
        rest = b;
    }
    out
}

/// The SSE frames of a streamed completion: a role chunk, reasoning chunks, content
/// chunks, a final chunk with `finish_reason` and `usage`, then `data: [DONE]`. The second
/// value is the index of the first content frame (where a stream hang is inserted).
pub fn sse_frames(c: &Completion<'_>, chunk_bytes: usize) -> (Vec<Bytes>, usize) {
    let mut frames = vec![chunk(
        c,
        Msg {
            role: Some("assistant"),
            content: Some(""),
            ..Msg::default()
        },
        None,
        None,
    )];
    if c.reasoning_field != ReasoningField::None {
        for p in pieces(c.reasoning, chunk_bytes) {
            frames.push(chunk(
                c,
                Msg::default().with_reasoning(c.reasoning_field, p),
                None,
                None,
            ));
        }
    }
    let first_content = frames.len();
    for p in pieces(c.content, chunk_bytes) {
        frames.push(chunk(
            c,
            Msg {
                content: Some(p),
                ..Msg::default()
            },
            None,
            None,
        ));
    }
    frames.push(chunk(
        c,
        Msg::default(),
        Some(c.finish_reason),
        c.stream_usage.then_some(c.usage),
    ));
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    (frames, first_content)
}

/// An OpenAI-style error body.
pub fn error_json(message: &str, kind: &str, code: u16) -> Vec<u8> {
    to_vec(&serde_json::json!({ "error": { "message": message, "type": kind, "code": code } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(field: ReasoningField) -> Completion<'static> {
        Completion {
            id: "x",
            model: "m",
            created: 1,
            content: "héllo world",
            reasoning: "think",
            reasoning_field: field,
            finish_reason: "stop",
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                total_tokens: 3,
            },
            stream_usage: true,
        }
    }

    #[test]
    fn non_stream_shape() {
        let v: serde_json::Value =
            serde_json::from_slice(&completion_json(&sample(ReasoningField::Reasoning))).unwrap();
        assert_eq!(v["object"], "chat.completion");
        assert!(
            v["choices"][0]["logprobs"].is_null(),
            "sent as null, as real servers do"
        );
        assert_eq!(v["choices"][0]["message"]["content"], "héllo world");
        assert_eq!(v["choices"][0]["message"]["reasoning"], "think");
        assert!(
            v["choices"][0]["message"]
                .get("reasoning_content")
                .is_none()
        );
        assert_eq!(v["usage"]["total_tokens"], 3);
    }

    #[test]
    fn stream_frames_reassemble() {
        let (frames, first) = sse_frames(&sample(ReasoningField::ReasoningContent), 3);
        assert_eq!(&frames[frames.len() - 1][..], b"data: [DONE]\n\n");
        let mut content = String::new();
        let mut reasoning = String::new();
        for f in &frames[..frames.len() - 1] {
            let s = std::str::from_utf8(f).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(s.strip_prefix("data: ").unwrap().trim()).unwrap();
            let d = &v["choices"][0]["delta"];
            content += d["content"].as_str().unwrap_or("");
            reasoning += d["reasoning_content"].as_str().unwrap_or("");
        }
        assert_eq!(content, "héllo world");
        assert_eq!(reasoning, "think");
        assert!(
            std::str::from_utf8(&frames[first])
                .unwrap()
                .contains("\"content\":\"hé")
        );
        let last = std::str::from_utf8(&frames[frames.len() - 2]).unwrap();
        assert!(last.contains("\"finish_reason\":\"stop\"") && last.contains("\"usage\""));
        // Like llama.cpp's server: no usage in any chunk.
        let c = Completion {
            stream_usage: false,
            ..sample(ReasoningField::None)
        };
        let (frames, _) = sse_frames(&c, 4);
        assert!(
            frames
                .iter()
                .all(|f| !std::str::from_utf8(f).unwrap().contains("\"usage\""))
        );
    }
}
