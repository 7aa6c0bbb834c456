//! Recently encoded request bodies, shared by calls that send the same prompt.
//!
//! A candidate's M verification calls (and an LLM judge's R repeats) carry one shared
//! prompt (`Arc<str>` messages) and are dispatched together. Without this cache each of
//! them counts the prompt's tokens and JSON-escapes the whole prompt into its own body:
//! at N = M = 8 that is ~40 % of all request bytes encoded 8 times over. Here the first
//! call encodes and the others reuse the same [`RequestBody`] (a reference count, no copy).
//!
//! A hit requires the *same* message allocations (pointer identity, not text equality,
//! so a lookup costs a few pointer compares, never a scan of 350 KB). Each entry holds
//! clones of the message `Arc`s, so a freed prompt's address cannot be reused by another
//! text while its entry exists. The cache is small and recency-ordered: the calls that
//! share a prompt arrive within moments of each other.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::request_body::RequestBody;

use super::escape_cache::EscapeCache;
use crate::wire::{ChatMessage, ChatRequest, PromptText, Sampling};

/// What a call needs from an encoded body besides the bytes.
#[derive(Debug, Clone)]
pub(crate) struct EncodedBody {
    pub body: RequestBody,
    /// `max_tokens` as fitted for the endpoint's context window (written in the body).
    pub max_tokens: u32,
    /// The prompt's token count (estimate or tokenizer).
    pub prompt_tokens: u32,
}

struct Entry {
    /// The endpoint's name (unique in a client): the body holds its model name and a
    /// `max_tokens` fitted to its context window.
    endpoint: Arc<str>,
    messages: Vec<ChatMessage>,
    sampling: Sampling,
    stream: bool,
    encoded: EncodedBody,
}

impl Entry {
    fn matches(&self, endpoint: &str, request: &ChatRequest) -> bool {
        *self.endpoint == *endpoint
            && self.stream == request.stream
            && self.sampling == request.sampling
            && same_messages(&self.messages, &request.messages)
    }
}

/// True when both lists hold the same content allocations (and equal roles) in the
/// same order.
fn same_messages(a: &[ChatMessage], b: &[ChatMessage]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| PromptText::ptr_eq(&x.content, &y.content) && x.role == y.role)
}

/// A small most-recent-first cache of encoded bodies.
pub(crate) struct BodyCache {
    entries: Mutex<VecDeque<Entry>>,
    capacity: usize,
    /// Long prompt segments, escaped once for all the bodies that quote them.
    pub escapes: EscapeCache,
}

impl BodyCache {
    /// Enough for every candidate of a few iterations dispatching its verifications at
    /// once; at most `capacity` prompts (up to ~350 KB each) are kept alive by it.
    pub const DEFAULT_CAPACITY: usize = 64;

    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            escapes: EscapeCache::new(),
        }
    }

    /// The body encoded earlier for the same endpoint, messages and sampling, if any.
    pub fn get(&self, endpoint: &str, request: &ChatRequest) -> Option<EncodedBody> {
        if self.capacity == 0 || !shareable(request) {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|e| e.matches(endpoint, request))
            .map(|e| e.encoded.clone())
    }

    /// Remembers a freshly encoded body, evicting the oldest entry when full.
    pub fn put(&self, endpoint: &Arc<str>, request: &ChatRequest, encoded: &EncodedBody) {
        if self.capacity == 0 || !shareable(request) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.iter().any(|e| e.matches(endpoint, request)) {
            // Two calls encoded the same prompt concurrently; keep the first.
            return;
        }
        if entries.len() == self.capacity {
            entries.pop_back();
        }
        entries.push_front(Entry {
            endpoint: endpoint.clone(),
            messages: request.messages.clone(),
            sampling: request.sampling,
            stream: request.stream,
            encoded: encoded.clone(),
        });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }
}

/// Requests worth caching: a one-off tiny prompt gains nothing from sharing, and
/// skipping it keeps the cache's slots for the large shared ones.
fn shareable(request: &ChatRequest) -> bool {
    request.prompt_bytes() >= 1024
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::CallTags;

    fn endpoint(name: &str) -> Arc<str> {
        name.into()
    }

    fn request(prompt: &PromptText) -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::user(prompt.clone())],
            sampling: Sampling {
                temperature: 1.0,
                top_p: 0.95,
                max_tokens: 100,
                top_k: None,
            },
            tags: CallTags::default(),
            stream: false,
        }
    }

    fn encoded(tag: &'static [u8]) -> EncodedBody {
        EncodedBody {
            body: RequestBody::from(bytes::Bytes::from_static(tag)),
            max_tokens: 100,
            prompt_tokens: 7,
        }
    }

    #[test]
    fn the_same_prompt_allocation_on_the_same_endpoint_hits() {
        let cache = BodyCache::new(4);
        let ep = endpoint("a");
        let prompt: PromptText = "x".repeat(2000).into();
        let first = request(&prompt);
        assert!(cache.get(&ep, &first).is_none());
        cache.put(&ep, &first, &encoded(b"one"));
        // A second call sharing the Arc (the M verifications of a candidate).
        let second = request(&prompt);
        let hit = cache.get(&ep, &second).expect("shared prompt hits");
        assert_eq!(&hit.body.to_bytes()[..], b"one");
        assert_eq!((hit.max_tokens, hit.prompt_tokens), (100, 7));
    }

    #[test]
    fn equal_text_in_another_allocation_other_endpoint_or_sampling_misses() {
        let cache = BodyCache::new(4);
        let (a, b) = (endpoint("a"), endpoint("b"));
        let prompt: PromptText = "x".repeat(2000).into();
        cache.put(&a, &request(&prompt), &encoded(b"one"));
        let copy: PromptText = prompt.to_string().into();
        assert!(
            cache.get(&a, &request(&copy)).is_none(),
            "pointer identity only"
        );
        assert!(cache.get(&b, &request(&prompt)).is_none(), "per endpoint");
        let mut hotter = request(&prompt);
        hotter.sampling.temperature = 0.5;
        assert!(cache.get(&a, &hotter).is_none(), "sampling is in the body");
        let mut streamed = request(&prompt);
        streamed.stream = true;
        assert!(
            cache.get(&a, &streamed).is_none(),
            "stream flag is in the body"
        );
    }

    #[test]
    fn oldest_entry_is_evicted_and_small_prompts_are_not_kept() {
        let cache = BodyCache::new(2);
        let ep = endpoint("a");
        let prompts: Vec<PromptText> = (0..3)
            .map(|i| format!("{i}{}", "y".repeat(2000)).into())
            .collect();
        for p in &prompts {
            cache.put(&ep, &request(p), &encoded(b"b"));
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&ep, &request(&prompts[0])).is_none());
        assert!(cache.get(&ep, &request(&prompts[2])).is_some());
        let small: PromptText = "short".into();
        cache.put(&ep, &request(&small), &encoded(b"s"));
        assert!(cache.get(&ep, &request(&small)).is_none());
        assert_eq!(cache.len(), 2);
    }
}
