//! JSON escapes of long prompt segments, shared by every body that quotes them.
//!
//! A prompt is a list of shared segments ([`crate::wire::PromptText`]); the N refine
//! prompts of a problem and its two memory-agent prompts quote the same solutions and
//! summaries. Each long segment is escaped once here and its escaped bytes are copied
//! into every body that quotes it, so the word-at-a-time escaper runs once per distinct
//! text, not once per call.
//!
//! An entry is keyed by the segment's address and holds a `Weak` to it: that keeps the
//! allocation, so the address cannot be reused by another text while the entry exists,
//! but never keeps the text alive. An entry whose segment nothing references any more is
//! dropped at the next sweep; sweeps run when the map has doubled since the last one, so
//! their cost is amortized and the cache holds only the text of prompts still alive.
//! (A strong reference here would make liveness depend on every other cache of the same
//! text: the run store's prompt cache also keys texts by address, and two caches that
//! each counted the other's reference as a user kept every such text until the run ended.)
//!
//! The escape itself is held weakly too: it lives while a request body holds it (bodies
//! are built from it, [`super::request_body`]), not as long as its segment. A problem
//! keeps its solutions until it finishes, so escapes held for as long as their segments
//! lived doubled the memory of every solution ever quoted (~0.3 GiB at 800 in flight,
//! T = 5). A segment quoted again after its bodies are gone (the bank prompts after the
//! refine prompts) is escaped again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use super::json_string::write_escaped_inner;

/// Segments shorter than this are escaped in place: a lookup would cost about as much.
pub const MIN_CACHED_BYTES: usize = 1024;

/// The smallest map size that triggers a sweep.
const FIRST_SWEEP: usize = 64;

struct Inner {
    entries: HashMap<usize, (Weak<str>, Weak<Vec<u8>>)>,
    sweep_at: usize,
}

/// The owner of an escape's bytes inside every [`Bytes`] made from it.
struct Held(Arc<Vec<u8>>);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn shared_bytes(escaped: Arc<Vec<u8>>) -> Bytes {
    Bytes::from_owner(Held(escaped))
}

/// Escaped long segments, keyed by allocation.
pub struct EscapeCache {
    inner: Option<Mutex<Inner>>,
}

impl Default for EscapeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl EscapeCache {
    pub fn new() -> Self {
        Self {
            inner: Some(Mutex::new(Inner {
                entries: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            })),
        }
    }

    /// A cache that keeps nothing: every segment is escaped where it is written.
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// Appends `segment` JSON-escaped (no quotes) to `out`.
    pub fn write(&self, out: &mut Vec<u8>, segment: &Arc<str>) {
        match self.shared(segment) {
            Some(bytes) => out.extend_from_slice(&bytes),
            None => write_escaped_inner(out, segment),
        }
    }

    /// `segment` JSON-escaped (no quotes) as bytes every body that quotes it shares, or
    /// `None` when it is short (escape it in place: a lookup would cost about as much) or
    /// the cache is disabled.
    pub fn shared(&self, segment: &Arc<str>) -> Option<Bytes> {
        let inner = self
            .inner
            .as_ref()
            .filter(|_| segment.len() >= MIN_CACHED_BYTES)?;
        let key = Arc::as_ptr(segment).cast::<u8>() as usize;
        let hit = {
            let guard = inner.lock().unwrap_or_else(|p| p.into_inner());
            guard
                .entries
                .get(&key)
                .and_then(|(_, bytes)| bytes.upgrade())
        };
        if let Some(escaped) = hit {
            return Some(shared_bytes(escaped));
        }
        let mut fresh = Vec::with_capacity(segment.len() + segment.len() / 16);
        write_escaped_inner(&mut fresh, segment);
        let fresh = Arc::new(fresh);
        let mut guard = inner.lock().unwrap_or_else(|p| p.into_inner());
        // Another body may have escaped the same segment meanwhile: both use the first.
        let entry = guard
            .entries
            .entry(key)
            .or_insert_with(|| (Arc::downgrade(segment), Weak::new()));
        let escaped = match entry.1.upgrade() {
            Some(live) => live,
            None => {
                entry.1 = Arc::downgrade(&fresh);
                fresh
            }
        };
        if guard.entries.len() >= guard.sweep_at {
            guard
                .entries
                .retain(|_, (text, bytes)| text.strong_count() > 0 && bytes.strong_count() > 0);
            guard.sweep_at = (guard.entries.len() * 2).max(FIRST_SWEEP);
        }
        Some(shared_bytes(escaped))
    }

    /// Entries held (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .as_ref()
            .map_or(0, |i| i.lock().map_or(0, |g| g.entries.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(cache: &EscapeCache, s: &Arc<str>) -> Vec<u8> {
        let mut out = Vec::new();
        cache.write(&mut out, s);
        out
    }

    #[test]
    fn cached_escapes_match_direct_ones_and_dead_segments_are_swept() {
        let cache = EscapeCache::new();
        let long: Arc<str> = "line \"q\" \\ ü\n".repeat(200).into();
        let mut direct = Vec::new();
        write_escaped_inner(&mut direct, &long);
        assert_eq!(escaped(&cache, &long), direct);
        assert_eq!(escaped(&cache, &long), direct, "second write hits");
        assert_eq!(cache.len(), 1);
        let short: Arc<str> = "x\n".into();
        assert_eq!(escaped(&cache, &short), b"x\\n");
        assert_eq!(cache.len(), 1, "short segments are not kept");
        // Segments that only the cache still references go at the next sweep.
        for i in 0..FIRST_SWEEP {
            let dead: Arc<str> = format!("{i}{}", "y".repeat(MIN_CACHED_BYTES)).into();
            escaped(&cache, &dead);
        }
        assert!(cache.len() < FIRST_SWEEP, "{}", cache.len());
        assert_eq!(escaped(&cache, &long), direct, "a live segment survives");
        assert_eq!(escaped(&EscapeCache::disabled(), &long), direct);
    }

    #[test]
    fn an_escape_is_shared_while_a_body_holds_it_and_freed_after() {
        let cache = EscapeCache::new();
        let long: Arc<str> = "w\"".repeat(MIN_CACHED_BYTES).into();
        let first = cache.shared(&long).expect("a long segment");
        let second = cache.shared(&long).expect("a long segment");
        assert_eq!(first.as_ptr(), second.as_ptr(), "one allocation while held");
        let weak = {
            let inner = cache.inner.as_ref().expect("enabled");
            let guard = inner.lock().expect("lock");
            guard.entries.values().next().expect("an entry").1.clone()
        };
        drop((first, second));
        assert!(weak.upgrade().is_none(), "the escape outlived its bodies");
        let mut direct = Vec::new();
        write_escaped_inner(&mut direct, &long);
        let again = cache.shared(&long).expect("a long segment");
        assert_eq!(&again[..], &direct[..]);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_never_keeps_a_segment_alive() {
        let cache = EscapeCache::new();
        let long: Arc<str> = "z".repeat(MIN_CACHED_BYTES * 4).into();
        let watch = Arc::downgrade(&long);
        escaped(&cache, &long);
        assert_eq!(cache.len(), 1);
        drop(long);
        assert!(watch.upgrade().is_none(), "a dropped segment stays alive");
    }
}
