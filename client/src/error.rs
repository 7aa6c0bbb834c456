//! Errors of the model client; each knows its [`FailureKind`].
//!
//! Every variant that concerns one endpoint names it; status errors carry a short body
//! snippet (at most [`SNIPPET_CHARS`] characters) so an operator can see what the server
//! said without a multi-megabyte page in the log. Secrets never appear here: snippets are
//! passed through [`redact`] before they are stored.

use std::sync::Arc;
use std::time::Duration;

use crate::failure::FailureKind;

use super::config::ApiKey;

/// Longest body snippet kept in an error.
pub const SNIPPET_CHARS: usize = 200;

/// Why a call (or the client's start) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    #[error("no endpoint group named `{group}` is configured")]
    UnknownGroup { group: Arc<str> },

    #[error("endpoint `{endpoint}`: no response within {after:?}")]
    Timeout { endpoint: Arc<str>, after: Duration },

    #[error("endpoint `{endpoint}`: connection failed: {message}")]
    Connect { endpoint: Arc<str>, message: String },

    #[error("endpoint `{endpoint}`: HTTP {status}: {body_snippet}")]
    Status {
        endpoint: Arc<str>,
        status: u16,
        body_snippet: String,
    },

    #[error("endpoint `{endpoint}`: malformed response (HTTP {status}): {snippet}")]
    Malformed {
        endpoint: Arc<str>,
        status: u16,
        snippet: String,
    },

    /// The generation stopped before it finished: a stream that ended without a
    /// `finish_reason`, or whose connection broke after the response began. The request
    /// itself was fine; `how` says whether the server went away or ended the stream itself,
    /// and so whether this is ill health or back-pressure.
    #[error("endpoint `{endpoint}`: generation interrupted: {message}")]
    Interrupted {
        endpoint: Arc<str>,
        message: String,
        how: Interruption,
    },

    #[error(
        "endpoint `{endpoint}`: prompt of about {prompt_tokens} tokens does not fit the \
         context window of {context_window} tokens (with the configured margin)"
    )]
    PromptTooLong {
        endpoint: Arc<str>,
        prompt_tokens: u32,
        context_window: u32,
    },

    #[error("every endpoint of group `{group}` stayed down for {waited:?} (the outage budget)")]
    Outage { group: Arc<str>, waited: Duration },

    /// A request in flight at `crashes` crashes of its endpoints, each of which answered
    /// other calls while it ran: it may be what crashes them, so it is not sent again.
    #[error(
        "endpoint `{endpoint}`: the request was in flight at {crashes} crashes of its \
         endpoints while they answered other calls; it may be what crashes the server, so it \
         is not sent again"
    )]
    SuspectedCrash { endpoint: Arc<str>, crashes: u32 },

    #[error("the model client is shut down")]
    Shutdown,

    #[error("invalid client configuration: {message}")]
    Config { message: String },

    #[error("the client's actor system failed: {message}")]
    Actor { message: String },
}

/// How a generation was interrupted.
///
/// A server that crashes or restarts cannot end a stream properly: the connection breaks,
/// or closes without `data: [DONE]`. A stream that ends with `[DONE]` but no
/// `finish_reason` was ended by a server that is alive and chose to stop it. When other
/// attempts of this client were running on the same endpoint, that server gave this one up
/// for another request: llama.cpp's server (its default, `interrupt_requests`) ends a
/// running stream whenever the next request arrives, so every request added cuts one
/// already running. That is the server's way of saying "fewer at once", like a 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// The connection broke, or closed without `[DONE]`, after the response began: the
    /// server (or a proxy in between) went away mid-generation.
    Broken,
    /// The server ended the stream (`[DONE]`, no `finish_reason`) while no other attempt
    /// of this client ran on the endpoint.
    Ended,
    /// The server ended the stream (`[DONE]`, no `finish_reason`) while other attempts of
    /// this client ran on the endpoint: it cut this one for another request. Back-pressure:
    /// it lowers the endpoint's concurrency limit (`super::limit`) and is retried for as
    /// long as the outage budget lasts, as a 503 is, never charged to the call's attempts
    /// nor counted against the endpoint's health.
    Preempted,
}

impl ClientError {
    /// Why the call failed, as [`CallFailure::kind`].
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::UnknownGroup { .. } => FailureKind::UnknownGroup,
            Self::Timeout { .. } => FailureKind::Timeout,
            Self::Connect { .. } => FailureKind::Connect,
            Self::Status { .. } if self.is_permanent() => FailureKind::Permanent,
            Self::Status { .. } => FailureKind::Status,
            Self::Malformed { .. } => FailureKind::Malformed,
            Self::Interrupted { .. } => FailureKind::Interrupted,
            Self::PromptTooLong { .. } => FailureKind::PromptTooLong,
            Self::Outage { .. } => FailureKind::Outage,
            Self::SuspectedCrash { .. } => FailureKind::SuspectedCrash,
            Self::Shutdown => FailureKind::Shutdown,
            Self::Config { .. } => FailureKind::Config,
            Self::Actor { .. } => FailureKind::Actor,
        }
    }

    /// The endpoint this error concerns, if it concerns one.
    pub fn endpoint(&self) -> Option<&Arc<str>> {
        match self {
            Self::Timeout { endpoint, .. }
            | Self::Connect { endpoint, .. }
            | Self::Status { endpoint, .. }
            | Self::Malformed { endpoint, .. }
            | Self::PromptTooLong { endpoint, .. }
            | Self::Interrupted { endpoint, .. }
            | Self::SuspectedCrash { endpoint, .. } => Some(endpoint),
            _ => None,
        }
    }

    /// A stream the server cut for another request of this client
    /// ([`Interruption::Preempted`]).
    pub fn is_preempted(&self) -> bool {
        matches!(
            self,
            Self::Interrupted {
                how: Interruption::Preempted,
                ..
            }
        )
    }

    /// An answer that will not change however often the call is sent: the request or its
    /// credentials are wrong (see [`is_permanent_status`]). Never retried; enough of them
    /// in a row from one endpoint stop the run ([`super::permanent`]).
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Status {
                status,
                body_snippet,
                ..
            } => is_permanent_status(*status, body_snippet),
            _ => false,
        }
    }

    /// A generation ended by the server going away: a refused or reset connection, a
    /// stream broken off. Its server is being restarted or has died; the generation itself
    /// was fine. A stream the server ended itself (`[DONE]` without a `finish_reason`) is
    /// not one: that server is up.
    pub fn is_crash(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::Interrupted {
                    how: Interruption::Broken,
                    ..
                }
        )
    }

    /// Worth another attempt (possibly on another endpoint of the group)?
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout { .. }
            | Self::Connect { .. }
            | Self::Malformed { .. }
            | Self::Interrupted { .. } => true,
            Self::Status { status, .. } => is_retryable_status(*status),
            _ => false,
        }
    }
}

/// 408, 429 and every 5xx are transient by HTTP convention.
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// The wait an HTTP `Retry-After` value asks for, from now (seconds, fractions allowed, or
/// an HTTP date; at most ten minutes), `None` if unreadable: what the client waits before
/// it sends a call again after a retryable status that carried one.
pub fn retry_after(value: &str) -> Option<Duration> {
    super::retry_after::parse(value, std::time::SystemTime::now())
}

/// 400 (unless the body says the prompt is over the context length: that one is about
/// this call's prompt, not the endpoint's settings), 401, 403, 404 and 422: the server
/// understood the request and refuses it; sending it again gets the same answer.
pub fn is_permanent_status(status: u16, body: &str) -> bool {
    match status {
        400 => !is_context_length_message(body),
        401 | 403 | 404 | 422 => true,
        _ => false,
    }
}

/// How vLLM, SGLang, llama.cpp and OpenAI word "the prompt does not fit".
fn is_context_length_message(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "too many tokens",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The first [`SNIPPET_CHARS`] characters of a body (lossy UTF-8), with any configured
/// secret replaced, so a server that echoes the `Authorization` header cannot leak it.
pub fn snippet(body: &[u8], secret: Option<&ApiKey>) -> String {
    let text = String::from_utf8_lossy(body);
    let text = redact(&text, secret);
    let mut out: String = text.chars().take(SNIPPET_CHARS).collect();
    if text.chars().nth(SNIPPET_CHARS).is_some() {
        out.push('…');
    }
    if out.trim().is_empty() {
        return "<empty body>".to_string();
    }
    out
}

/// Replace every occurrence of the secret by `[redacted]`.
pub fn redact(text: &str, secret: Option<&ApiKey>) -> String {
    match secret {
        Some(key) if !key.expose().is_empty() && text.contains(key.expose()) => {
            text.replace(key.expose(), "[redacted]")
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_is_bounded_and_redacted() {
        let key = ApiKey::new("sk-secret-123");
        let body = format!("bad key sk-secret-123 {}", "x".repeat(500));
        let s = snippet(body.as_bytes(), Some(&key));
        assert!(!s.contains("sk-secret-123"));
        assert!(s.contains("[redacted]"));
        assert!(s.chars().count() <= SNIPPET_CHARS + 1);
        assert_eq!(snippet(b"  ", None), "<empty body>");
    }

    #[test]
    fn retry_classes() {
        let status = |s| ClientError::Status {
            endpoint: "e".into(),
            status: s,
            body_snippet: String::new(),
        };
        assert!(status(429).is_retryable());
        assert!(status(503).is_retryable());
        assert!(status(408).is_retryable());
        assert!(!status(400).is_retryable());
        for permanent in [400, 401, 403, 404, 422] {
            assert!(status(permanent).is_permanent(), "{permanent}");
            assert_eq!(status(permanent).kind(), FailureKind::Permanent);
        }
        for other in [408, 409, 429, 500, 503] {
            assert!(!status(other).is_permanent(), "{other}");
            assert_eq!(status(other).kind(), FailureKind::Status);
        }
        let too_long_400 = ClientError::Status {
            endpoint: "e".into(),
            status: 400,
            body_snippet: "This model's maximum context length is 8192 tokens".into(),
        };
        assert!(!too_long_400.is_permanent() && !too_long_400.is_retryable());
        assert_eq!(status(401).endpoint().map(|e| &**e), Some("e"));
        let too_long = ClientError::PromptTooLong {
            endpoint: "e".into(),
            prompt_tokens: 9,
            context_window: 8,
        };
        assert!(!too_long.is_retryable());
        assert_eq!(too_long.kind(), FailureKind::PromptTooLong);
        for how in [
            Interruption::Broken,
            Interruption::Ended,
            Interruption::Preempted,
        ] {
            let cut = ClientError::Interrupted {
                endpoint: "e".into(),
                message: String::new(),
                how,
            };
            assert!(cut.is_retryable());
            assert_eq!(cut.is_crash(), how == Interruption::Broken, "{how:?}");
            assert_eq!(cut.is_preempted(), how == Interruption::Preempted);
            assert_eq!(cut.kind(), FailureKind::Interrupted);
            assert_eq!(
                cut.endpoint().map(|e| &**e),
                Some("e"),
                "names its endpoint"
            );
        }
    }

    #[test]
    fn display_names_endpoint_and_status() {
        let e = ClientError::Malformed {
            endpoint: "gpu-1".into(),
            status: 200,
            snippet: "{oops".into(),
        };
        let text = e.to_string();
        assert!(text.contains("gpu-1") && text.contains("200") && text.contains("{oops"));
    }
}
