//! The OpenAI chat-completions wire format as `tmas serve` reads and writes it, and what
//! a method's outcome becomes in it: the answer (the method's final selection), the usage
//! summed over every internal call, and the error bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use tmas_client::failure::FailureKind;

use crate::method::{CallCounts, FailureRecordKind, TmasOutcome};
use crate::role::Role;

/// A `POST /v1/chat/completions` body. Fields not listed (`temperature`, `max_tokens`,
/// `top_p`, …) are accepted and not used: each role's sampling is the served config's.
#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Choices: independent runs of the method, in parallel.
    #[serde(default)]
    pub n: Option<u32>,
    /// The method and its keys (`docs/serve.md`).
    #[serde(default)]
    pub tmas: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
}

/// A message's content: a string, or a list of parts of which the text ones count.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    /// The text of the content (text parts joined by newlines).
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// The question of a conversation: its last user message's text. System messages and
/// earlier turns are not shown to the method (its prompts are its own).
pub fn question(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_ref())
        .map(Content::text)
        .filter(|t| !t.trim().is_empty())
}

/// The answer of one choice: the method's final selection.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    pub text: Arc<str>,
    /// The selected solution was cut at `max_tokens`.
    pub truncated: bool,
    pub iteration: u32,
    pub candidate: u32,
}

/// The method's final selection: in the last iteration with a solution, its best
/// candidate (TMAS: the highest average verification score, ties to the lowest index;
/// MV@k: the majority answer's first sample; Verify-Refine: the best-scored chain), or,
/// for a method that names no best (Self-Refine, PaCoRe, RSE), its first candidate with a
/// solution. `None` when no solution call was answered.
pub fn select(outcome: &TmasOutcome) -> Option<Selected> {
    outcome.iterations.iter().rev().find_map(|it| {
        let best = it
            .best
            .and_then(|b| it.candidates.iter().find(|c| c.index == b))
            .filter(|c| c.solution.is_some());
        let chosen = best.or_else(|| it.candidates.iter().find(|c| c.solution.is_some()))?;
        Some(Selected {
            text: chosen.solution.clone()?,
            truncated: chosen.truncated,
            iteration: it.iteration,
            candidate: chosen.index,
        })
    })
}

/// Token usage summed over every internal call of a request, with the `tmas` extension.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub tmas: UsageDetail,
}

/// What the tokens paid for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageDetail {
    /// Model calls the method issued, by role (re-asks included).
    pub calls_by_role: BTreeMap<&'static str, u32>,
    pub calls: u32,
    /// Calls that failed after the client's retries, or were not sent (the request
    /// cancelled, its call budget spent).
    pub calls_failed: u32,
    /// Iterations completed, summed over the choices.
    pub iterations: u32,
}

impl Usage {
    /// Adds one choice's outcome.
    pub fn add(&mut self, outcome: &TmasOutcome) {
        let c: &CallCounts = &outcome.calls;
        self.prompt_tokens += c.prompt_tokens;
        self.completion_tokens += c.completion_tokens;
        self.total_tokens = self.prompt_tokens + self.completion_tokens;
        for role in Role::ALL {
            let n = c.of(role);
            if n > 0 {
                *self.tmas.calls_by_role.entry(role.as_str()).or_default() += n;
            }
        }
        self.tmas.calls += c.total();
        self.tmas.calls_failed += c.failed;
        self.tmas.iterations += outcome.iterations.len() as u32;
    }
}

/// An OpenAI-style error: the status and the body `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `upstream_error`, …
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A bad request naming the field (`param`; empty: the body as a whole).
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        let param: String = param.into();
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: (!param.is_empty()).then_some(param),
            code: None,
        }
    }

    /// Something on this side failed (the method, the runtime).
    pub fn internal(message: String) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message,
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    pub fn body(&self) -> Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }

    /// A choice that got no answer because its calls failed: the status says whose fault
    /// it was (504 when the upstream timed out, 400 for a prompt over its context window,
    /// 502 for any other upstream failure).
    pub fn upstream(outcome: &TmasOutcome) -> Self {
        let kinds: Vec<FailureKind> = outcome
            .iterations
            .iter()
            .flat_map(|it| &it.failures)
            .filter_map(|f| match f.kind {
                FailureRecordKind::Call(kind) => Some(kind),
                FailureRecordKind::Reply(_) => None,
            })
            .collect();
        let last = outcome
            .iterations
            .iter()
            .flat_map(|it| &it.failures)
            .next_back()
            .map(|f| f.message.clone())
            .unwrap_or_else(|| "no solution was produced".into());
        let (status, code) = if kinds.contains(&FailureKind::PromptTooLong) {
            (StatusCode::BAD_REQUEST, "context_length_exceeded")
        } else if !kinds.is_empty() && kinds.iter().all(|k| *k == FailureKind::Timeout) {
            (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout")
        } else {
            (StatusCode::BAD_GATEWAY, "upstream_error")
        };
        Self {
            status,
            message: format!("the upstream model failed every solution call: {last}"),
            kind: "upstream_error",
            param: None,
            code: Some(code),
        }
    }
}

/// A call of the served model that failed (after the client's retries): 504 when it
/// timed out, else 502, with the failure's message.
pub fn upstream_call_failure(failure: tmas_actors::strategy::CallFailure) -> ApiError {
    ApiError {
        status: if failure.kind == FailureKind::Timeout {
            StatusCode::GATEWAY_TIMEOUT
        } else {
            StatusCode::BAD_GATEWAY
        },
        message: format!("the upstream model failed: {}", failure.message),
        kind: "upstream_error",
        param: None,
        code: Some("upstream_error"),
    }
}

/// `finish_reason` of a selected answer.
pub fn finish_reason(selected: &Selected) -> &'static str {
    if selected.truncated { "length" } else { "stop" }
}

/// Seconds since the epoch (`created`).
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message {
            role: "user".into(),
            content: Some(Content::Text(text.into())),
        }
    }

    #[test]
    fn the_question_is_the_last_user_messages_text() {
        let system = Message {
            role: "system".into(),
            content: Some(Content::Text("be brief".into())),
        };
        let parts = Message {
            role: "user".into(),
            content: Some(Content::Parts(vec![
                Part {
                    kind: "text".into(),
                    text: Some("What is".into()),
                },
                Part {
                    kind: "image_url".into(),
                    text: None,
                },
                Part {
                    kind: "text".into(),
                    text: Some("2+2?".into()),
                },
            ])),
        };
        let assistant = Message {
            role: "assistant".into(),
            content: Some(Content::Text("4".into())),
        };
        assert_eq!(
            question(&[system, user("first"), assistant, parts]).as_deref(),
            Some("What is\n2+2?")
        );
        assert_eq!(question(&[user("  ")]), None);
        assert_eq!(question(&[]), None);
    }
}
