//! A block-level prefix cache in the style of vLLM's automatic prefix caching (and
//! SGLang's radix cache): a prompt is cut into full blocks of `block_tokens` tokens, each
//! block is named by a hash chained over its own contents and its parent's hash, and a
//! prompt's cached prefix is its longest run of leading blocks whose hashes are present.
//! A partial last block is never cached (vLLM caches full blocks only).
//!
//! Eviction is least-recently-used over blocks. A prompt's blocks are stamped deepest
//! first, so of one prompt the tail blocks go before the head blocks — evicting a head
//! block first would leave its whole (now unreachable) chain occupying the cache, which
//! is why vLLM frees a request's blocks in reverse order.

use std::collections::{BTreeMap, HashMap};

use crate::sim::rng::{hash_bytes, mix};

/// What one lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixHit {
    /// Prompt tokens whose KV blocks were already cached (no prefill needed).
    pub cached_tokens: u64,
    /// Prompt tokens to prefill (the rest, partial last block included).
    pub computed_tokens: u64,
}

/// The cache: block hash → last-use stamp, and stamp → block hash for eviction.
#[derive(Debug)]
pub struct PrefixCache {
    block_bytes: usize,
    bytes_per_token: usize,
    capacity_blocks: usize,
    stamps: HashMap<u64, u64>,
    by_stamp: BTreeMap<u64, u64>,
    clock: u64,
    evicted_blocks: u64,
}

impl PrefixCache {
    /// A cache of `capacity_tokens` tokens in blocks of `block_tokens`; prompt bytes map
    /// to tokens at `bytes_per_token`.
    pub fn new(capacity_tokens: u64, block_tokens: u32, bytes_per_token: usize) -> Self {
        let block_tokens = block_tokens.max(1);
        let bytes_per_token = bytes_per_token.max(1);
        Self {
            block_bytes: block_tokens as usize * bytes_per_token,
            bytes_per_token,
            capacity_blocks: usize::try_from(capacity_tokens / u64::from(block_tokens))
                .unwrap_or(usize::MAX),
            stamps: HashMap::new(),
            by_stamp: BTreeMap::new(),
            clock: 0,
            evicted_blocks: 0,
        }
    }

    /// Blocks currently cached.
    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stamps.is_empty()
    }

    pub fn evicted_blocks(&self) -> u64 {
        self.evicted_blocks
    }

    pub fn clear(&mut self) {
        self.stamps.clear();
        self.by_stamp.clear();
        self.evicted_blocks = 0;
    }

    /// Looks the prompt's prefix up, then caches all its full blocks (the prefill just
    /// computed them) as the most recently used.
    pub fn lookup_and_insert(&mut self, prompt: &[u8]) -> PrefixHit {
        let total_tokens = prompt.len().div_ceil(self.bytes_per_token) as u64;
        let block_tokens = (self.block_bytes / self.bytes_per_token) as u64;
        let mut hashes = Vec::with_capacity(prompt.len() / self.block_bytes);
        let mut parent = 0x9E37_79B9_7F4A_7C15_u64;
        for block in prompt.chunks_exact(self.block_bytes) {
            parent = mix(parent, hash_bytes(parent, block));
            hashes.push(parent);
        }
        let cached_blocks = hashes
            .iter()
            .take_while(|h| self.stamps.contains_key(h))
            .count() as u64;
        // Deepest block first: it gets the oldest of the new stamps.
        for &h in hashes.iter().rev() {
            self.touch(h);
        }
        let cached_tokens = (cached_blocks * block_tokens).min(total_tokens);
        PrefixHit {
            cached_tokens,
            computed_tokens: total_tokens - cached_tokens,
        }
    }

    fn touch(&mut self, hash: u64) {
        if self.capacity_blocks == 0 {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.stamps.insert(hash, self.clock) {
            self.by_stamp.remove(&old);
        } else {
            while self.stamps.len() > self.capacity_blocks {
                let Some((_, victim)) = self.by_stamp.pop_first() else {
                    break;
                };
                self.stamps.remove(&victim);
                self.evicted_blocks += 1;
            }
        }
        self.by_stamp.insert(self.clock, hash);
    }
}
