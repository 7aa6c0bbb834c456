//! Server-sent events for streaming chat completions. Pure: bytes in, completion out.
//!
//! Chunks arrive split anywhere (mid-line, mid-UTF-8 character), so lines are cut from
//! a byte buffer. Each `data:` payload is one JSON chunk whose `delta` carries pieces of
//! `content` and of `reasoning_content` (SGLang) or `reasoning` (vLLM); a chunk with
//! empty `choices` carries the usage; `data: [DONE]` ends the stream.
//!
//! A stream is complete when a choice carried a `finish_reason`. One that ends without
//! it was interrupted, whether or not `[DONE]` followed: llama.cpp's server, for one,
//! cuts a running stream when the next request arrives and sends only the role chunk and
//! `[DONE]`. That is a generation to re-ask, not a malformed body. A stream that has its
//! `finish_reason` but loses the connection before `[DONE]` is complete (the terminator
//! carries nothing).

use serde::Deserialize;

use super::body::{BodyProblem, Completion, WireMessage, WireUsage, check_not_empty};
use super::wire::{DeltaSink, StreamDelta};

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// Some servers report a failure mid-stream as `{"error": {...}}`.
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// Why a finished stream gave no completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamError {
    /// The bytes were not a valid completion stream.
    Malformed(BodyProblem),
    /// The generation stopped before its `finish_reason`.
    Interrupted(String),
}

/// Sends what an accumulator gained since the last look to a [`DeltaSink`]: an attempt's
/// pieces as they arrive, for a caller that passes a stream through.
pub struct Forward {
    sink: DeltaSink,
    content: usize,
    reasoning: usize,
}

impl Forward {
    /// Tells `sink` an attempt begins.
    pub fn new(sink: DeltaSink) -> Self {
        // The receiver may be gone (its client left): the call goes on regardless.
        let _ = sink.send(StreamDelta::Attempt);
        Self {
            sink,
            content: 0,
            reasoning: 0,
        }
    }

    /// Sends the reasoning and content `acc` holds beyond what was sent before.
    pub fn send_new(&mut self, acc: &SseAccumulator) {
        if acc.reasoning.len() > self.reasoning {
            let _ = self.sink.send(StreamDelta::Reasoning(
                acc.reasoning[self.reasoning..].to_string(),
            ));
            self.reasoning = acc.reasoning.len();
        }
        if acc.content.len() > self.content {
            let _ = self.sink.send(StreamDelta::Content(
                acc.content[self.content..].to_string(),
            ));
            self.content = acc.content.len();
        }
    }
}

/// Accumulates a streamed completion.
#[derive(Default)]
pub struct SseAccumulator {
    buf: Vec<u8>,
    data: Vec<u8>,
    content: String,
    reasoning: String,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    done: bool,
    /// Every byte seen so far is kept only up to a small bound, for error snippets.
    head: Vec<u8>,
}

const HEAD_BYTES: usize = 512;

impl SseAccumulator {
    /// True once `data: [DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The first bytes of the stream (for error snippets).
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Feed one network chunk.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), BodyProblem> {
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &self.buf[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = line.to_vec();
            start = end + 1;
            self.line(&line)?;
        }
        self.buf.drain(..start);
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), BodyProblem> {
        if line.is_empty() {
            // Blank line: dispatch the event.
            let data = std::mem::take(&mut self.data);
            return self.event(&data);
        }
        if let Some(rest) = line.strip_prefix(b"data:") {
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            if !self.data.is_empty() {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(rest);
        }
        // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        Ok(())
    }

    fn event(&mut self, data: &[u8]) -> Result<(), BodyProblem> {
        if data.is_empty() || self.done {
            return Ok(());
        }
        if data == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_slice(data).map_err(|e| {
            format!(
                "invalid JSON in stream chunk: {e}: {}",
                String::from_utf8_lossy(&data[..data.len().min(120)])
            )
        })?;
        if let Some(err) = chunk.error {
            return Err(format!("server reported an error mid-stream: {err}"));
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices {
            if let Some(mut delta) = choice.delta {
                if let Some(r) = delta.take_reasoning() {
                    self.reasoning.push_str(&r);
                }
                if let Some(c) = delta.content {
                    self.content.push_str(&c);
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(())
    }

    /// The stream ended (connection closed cleanly or `[DONE]`): build the completion.
    pub fn finish(mut self) -> Result<Completion, StreamError> {
        // A final event without its trailing blank line still counts.
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.line(&rest).map_err(StreamError::Malformed)?;
        }
        let data = std::mem::take(&mut self.data);
        self.event(&data).map_err(StreamError::Malformed)?;
        if self.finish_reason.is_none() {
            return Err(StreamError::Interrupted(self.interruption()));
        }
        check_not_empty(Completion {
            content: self.content,
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            usage: self.usage.map(Into::into).unwrap_or_default(),
            finish_reason: self.finish_reason,
        })
        .map_err(StreamError::Malformed)
    }

    /// How far the interrupted stream got, for the error.
    pub fn interruption(&self) -> String {
        format!(
            "stream ended without a finish_reason ({}; {} content and {} reasoning bytes received)",
            if self.done {
                "[DONE] received"
            } else {
                "no [DONE]"
            },
            self.content.len(),
            self.reasoning.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Usage;

    fn feed(acc: &mut SseAccumulator, text: &str, split: usize) {
        for piece in text.as_bytes().chunks(split) {
            acc.push(piece).unwrap();
        }
    }

    const SGLANG: &str = "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"thi\"}}]}\n\n\
        data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"nk\"}}]}\r\n\r\n\
        : keep-alive\n\n\
        data: {\"choices\":[{\"delta\":{\"content\":\"héllo\"},\"finish_reason\":null}]}\n\n\
        data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\n\
        data: [DONE]\n\n";

    #[test]
    fn forward_sends_each_new_piece_once_after_the_attempt_marker() {
        let (sink, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut acc = SseAccumulator::default();
        let mut forward = Forward::new(sink);
        for part in SGLANG.split_inclusive("\n\n") {
            acc.push(part.as_bytes()).unwrap();
            forward.send_new(&acc);
        }
        let mut got = Vec::new();
        while let Ok(p) = rx.try_recv() {
            got.push(p);
        }
        assert_eq!(got[0], StreamDelta::Attempt);
        let text =
            |f: fn(&StreamDelta) -> Option<&str>| -> String { got.iter().filter_map(f).collect() };
        assert_eq!(
            text(|p| match p {
                StreamDelta::Reasoning(t) => Some(t),
                _ => None,
            }),
            "think"
        );
        assert_eq!(
            text(|p| match p {
                StreamDelta::Content(t) => Some(t),
                _ => None,
            }),
            "héllo"
        );
        assert!(
            got.len() >= 4,
            "reasoning in two pieces, then the content: {got:?}"
        );
    }

    #[test]
    fn any_split_gives_the_same_completion() {
        for split in [1, 2, 3, 7, 1000] {
            let mut acc = SseAccumulator::default();
            feed(&mut acc, SGLANG, split);
            assert!(acc.is_done());
            let c = acc.finish().unwrap();
            assert_eq!(c.content, "héllo");
            assert_eq!(c.reasoning.as_deref(), Some("think"));
            assert_eq!(c.finish_reason.as_deref(), Some("stop"));
            assert_eq!(
                c.usage,
                Usage {
                    prompt_tokens: 5,
                    completion_tokens: 7,
                    estimated: false,
                }
            );
        }
    }

    #[test]
    fn vllm_reasoning_field_and_length() {
        let text = "data: {\"choices\":[{\"delta\":{\"reasoning\":\"r\"}}]}\n\n\
            data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}\n\n";
        let mut acc = SseAccumulator::default();
        feed(&mut acc, text, 5);
        let c = acc.finish().unwrap();
        assert_eq!(c.reasoning.as_deref(), Some("r"));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn truncated_or_garbage_streams_are_errors() {
        let mut acc = SseAccumulator::default();
        feed(
            &mut acc,
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
            4,
        );
        assert!(
            matches!(acc.finish(), Err(StreamError::Interrupted(_))),
            "no finish_reason and no [DONE]"
        );

        // llama.cpp cutting a stream for the next request: role chunk, then [DONE].
        let mut acc = SseAccumulator::default();
        feed(
            &mut acc,
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n",
            7,
        );
        match acc.finish() {
            Err(StreamError::Interrupted(m)) => assert!(m.contains("[DONE] received"), "{m}"),
            other => panic!("expected an interruption, got {other:?}"),
        }

        let mut acc = SseAccumulator::default();
        assert!(acc.push(b"data: {oops\n\n").is_err());

        let mut acc = SseAccumulator::default();
        assert!(
            acc.push(b"data: {\"error\":{\"message\":\"boom\"}}\n\n")
                .is_err()
        );
    }
}
