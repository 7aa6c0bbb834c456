//! Prompt-token estimates and the `max_tokens` each request may ask for.
//!
//! A request must fit the endpoint's context window: the server rejects (vLLM) or
//! silently truncates a request whose prompt + `max_tokens` is too large, and either way
//! the call is wasted. The client therefore lowers the role's `max_tokens` to
//! `context_window − prompt_tokens − margin`. Prompt tokens are counted with a local
//! HuggingFace `tokenizer.json` when one is configured, else estimated from bytes.

use std::fmt;
use std::sync::Arc;

use crate::wire::{ChatMessage, Usage};

use super::config::TokenEstimate;
use super::error::ClientError;

/// Tokens a chat template adds around each message (role markers, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u32 = 4;
/// Tokens the template adds to prime the assistant's reply.
pub const REPLY_PRIMING_TOKENS: u32 = 3;

/// Counts the prompt tokens of a list of messages.
#[derive(Clone)]
pub enum TokenCounter {
    Bytes {
        bytes_per_token: f32,
    },
    Tokenizer {
        tokenizer: Arc<tokenizers::Tokenizer>,
        path: Arc<str>,
    },
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bytes { bytes_per_token } => write!(f, "Bytes({bytes_per_token})"),
            Self::Tokenizer { path, .. } => write!(f, "Tokenizer({path})"),
        }
    }
}

impl TokenCounter {
    /// Build a counter; loads the tokenizer file if one is configured.
    pub fn from_estimate(estimate: &TokenEstimate) -> Result<Self, ClientError> {
        match estimate {
            TokenEstimate::Bytes { bytes_per_token } => {
                if !(bytes_per_token.is_finite() && *bytes_per_token > 0.0) {
                    return Err(ClientError::Config {
                        message: format!(
                            "token_estimate.bytes_per_token must be > 0, got {bytes_per_token}"
                        ),
                    });
                }
                Ok(Self::Bytes {
                    bytes_per_token: *bytes_per_token,
                })
            }
            TokenEstimate::Tokenizer { path } => {
                let tokenizer =
                    tokenizers::Tokenizer::from_file(path).map_err(|e| ClientError::Config {
                        message: format!("cannot load tokenizer file {}: {e}", path.display()),
                    })?;
                Ok(Self::Tokenizer {
                    tokenizer: Arc::new(tokenizer),
                    path: path.display().to_string().into(),
                })
            }
        }
    }

    /// Prompt tokens of `messages`, template overhead included. A text the tokenizer
    /// cannot encode falls back to a 1-token-per-byte bound (never an underestimate).
    pub fn count(&self, messages: &[ChatMessage]) -> u32 {
        let overhead = REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS * messages.len() as u32;
        let content: u64 = match self {
            Self::Bytes { bytes_per_token } => {
                let bytes: usize = messages.iter().map(|m| m.content.len()).sum();
                (bytes as f64 / f64::from(*bytes_per_token)).ceil() as u64
            }
            Self::Tokenizer { tokenizer, .. } => messages
                .iter()
                .map(|m| match tokenizer.encode(&*m.content.flatten(), false) {
                    Ok(enc) => enc.len() as u64,
                    Err(_) => m.content.len() as u64,
                })
                .sum(),
        };
        u32::try_from(content)
            .unwrap_or(u32::MAX)
            .saturating_add(overhead)
    }
}

/// Bytes per token of a usage estimate without a tokenizer. The prompt-fitting estimate
/// (`bytes_per_token`, 3 by default) leans high on purpose, so a request never overflows
/// the window; a usage estimate should be neither high nor low, and 4 bytes a token is the
/// usual figure for English and LaTeX.
pub const USAGE_BYTES_PER_TOKEN: u64 = 4;

impl TokenCounter {
    /// The usage of a call whose server reported none: the prompt's tokens (template
    /// overhead included) and the reply's (`content` and `reasoning`) with the
    /// endpoint's tokenizer when one is configured, else bytes ÷
    /// [`USAGE_BYTES_PER_TOKEN`], marked `estimated`. Runs a real tokenizer off the async
    /// worker threads.
    pub async fn estimate_usage(&self, messages: &[ChatMessage], reply: &[&str]) -> Usage {
        match self {
            Self::Bytes { .. } => {
                let prompt: usize = messages.iter().map(|m| m.content.len()).sum();
                let completion: usize = reply.iter().map(|t| t.len()).sum();
                Usage {
                    prompt_tokens: (prompt as u64).div_ceil(USAGE_BYTES_PER_TOKEN),
                    completion_tokens: (completion as u64).div_ceil(USAGE_BYTES_PER_TOKEN),
                    estimated: true,
                }
            }
            Self::Tokenizer { tokenizer, .. } => {
                let prompt = u64::from(self.count_async(messages).await);
                let (tokenizer, texts) = (
                    tokenizer.clone(),
                    reply.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(),
                );
                let encode = move || -> u64 {
                    texts
                        .iter()
                        .filter(|t| !t.is_empty())
                        .map(|t| match tokenizer.encode(t.as_str(), false) {
                            Ok(enc) => enc.len() as u64,
                            Err(_) => (t.len() as u64).div_ceil(USAGE_BYTES_PER_TOKEN),
                        })
                        .sum()
                };
                let completion = match tokio::task::spawn_blocking(encode.clone()).await {
                    Ok(n) => n,
                    // The blocking pool is gone (runtime shutting down): count here.
                    Err(_) => encode(),
                };
                Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    estimated: true,
                }
            }
        }
    }
}

impl TokenCounter {
    /// [`TokenCounter::count`] off the async worker threads when a real tokenizer runs:
    /// encoding a 350 KB rollout context takes long enough to stall other calls.
    pub async fn count_async(&self, messages: &[ChatMessage]) -> u32 {
        match self {
            Self::Bytes { .. } => self.count(messages),
            Self::Tokenizer { .. } => {
                let (me, owned) = (self.clone(), messages.to_vec());
                match tokio::task::spawn_blocking(move || me.count(&owned)).await {
                    Ok(n) => n,
                    // The blocking pool is gone (runtime shutting down): count here.
                    Err(_) => self.count(messages),
                }
            }
        }
    }
}

/// The `max_tokens` to send: `min(role_max, window − prompt − margin)`, or a
/// non-retryable [`ClientError::PromptTooLong`] when nothing is left for the output.
pub fn fit_max_tokens(
    endpoint: &Arc<str>,
    role_max: u32,
    prompt_tokens: u32,
    context_window: u32,
    margin: u32,
) -> Result<u32, ClientError> {
    let room = context_window
        .saturating_sub(prompt_tokens)
        .saturating_sub(margin);
    if room == 0 {
        return Err(ClientError::PromptTooLong {
            endpoint: endpoint.clone(),
            prompt_tokens,
            context_window,
        });
    }
    Ok(role_max.min(room))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_estimate_rounds_up_and_adds_overhead() {
        let c = TokenCounter::from_estimate(&TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        })
        .unwrap();
        let msgs = [ChatMessage::user("abcdefg")]; // 7 bytes -> 3 tokens
        assert_eq!(
            c.count(&msgs),
            3 + MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMING_TOKENS
        );
        assert!(
            TokenCounter::from_estimate(&TokenEstimate::Bytes {
                bytes_per_token: 0.0
            })
            .is_err()
        );
    }

    #[test]
    fn fit_takes_the_smaller_and_rejects_overflow() {
        let ep: Arc<str> = "e1".into();
        assert_eq!(fit_max_tokens(&ep, 1000, 100, 8192, 256).unwrap(), 1000);
        assert_eq!(
            fit_max_tokens(&ep, 100_000, 100, 8192, 256).unwrap(),
            8192 - 100 - 256
        );
        let err = fit_max_tokens(&ep, 10, 8000, 8192, 256).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("e1") && text.contains("8000") && text.contains("8192"),
            "{text}"
        );
        assert!(!err.is_retryable());
    }

    #[test]
    fn usage_without_a_tokenizer_is_bytes_over_four() {
        let c = TokenCounter::from_estimate(&TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        })
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let msgs = [ChatMessage::user("x".repeat(10))];
        let usage = rt.block_on(c.estimate_usage(&msgs, &["y".repeat(9).as_str(), ""]));
        assert_eq!(
            usage,
            Usage {
                prompt_tokens: 3,
                completion_tokens: 3,
                estimated: true
            }
        );
        assert!(!usage.is_missing() && Usage::default().is_missing());
    }

    #[test]
    fn tokenizer_json_is_loaded_and_used() {
        let dir = std::env::temp_dir().join(format!("tmas-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        let json = r#"{
          "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
          "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2},
                    "unk_token": "[UNK]"}
        }"#;
        std::fs::write(&path, json).unwrap();
        let c =
            TokenCounter::from_estimate(&TokenEstimate::Tokenizer { path: path.clone() }).unwrap();
        // "hello world, hello!" -> hello / world / , / hello / ! = 5 tokens
        let msgs = [ChatMessage::user("hello world, hello!")];
        assert_eq!(
            c.count(&msgs),
            5 + MESSAGE_OVERHEAD_TOKENS + REPLY_PRIMING_TOKENS
        );
        // A reply without usage: the prompt as counted above, the reply word by word.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let usage = rt.block_on(c.estimate_usage(&msgs, &["hello hello", "world"]));
        assert_eq!(
            usage,
            Usage {
                prompt_tokens: u64::from(c.count(&msgs)),
                completion_tokens: 3,
                estimated: true
            }
        );
        std::fs::remove_dir_all(&dir).ok();

        let missing = TokenCounter::from_estimate(&TokenEstimate::Tokenizer {
            path: dir.join("nope.json"),
        });
        let text = missing.unwrap_err().to_string();
        assert!(text.contains("nope.json"), "{text}");
    }
}
