//! A map keyed by the allocation of a shared text, for as long as anyone holds the text.
//!
//! The store writer remembers work per `Arc<str>`: the chunks of each prompt segment
//! ([`super::prompts`]) and which call a reply belongs to ([`super::writer`]). The same
//! allocation reaching it again (a segment quoted by another prompt, a reply quoted by a
//! record) is then recognised by address, without reading the text. An entry holds a
//! `Weak`: it keeps the allocation (so its address cannot be reused by another text while
//! the entry exists) but never keeps the text alive. A strong reference here would make
//! liveness depend on every other cache of the same text: the body encoder's escape cache
//! also keys segments by address, and two caches that each count the other's reference as
//! a user kept every such text until the run ended.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Bytes of text that may be added between sweeps however little is live: dead entries
/// keep their allocations until the next sweep, so this bounds what a sweep can find.
const SWEEP_BYTES_FLOOR: usize = 4 << 20;

/// See the module documentation.
pub struct ByAllocation<V> {
    /// By address: the text (weakly), its length, the value.
    live: HashMap<usize, (Weak<str>, usize, V)>,
    /// Entries and bytes of text added since [`Self::sweep`] last ran, and the bytes of
    /// the texts it kept.
    added_since_sweep: usize,
    bytes_since_sweep: usize,
    bytes_at_sweep: usize,
}

impl<V> Default for ByAllocation<V> {
    fn default() -> Self {
        Self {
            live: HashMap::new(),
            added_since_sweep: 0,
            bytes_since_sweep: 0,
            bytes_at_sweep: 0,
        }
    }
}

impl<V> ByAllocation<V> {
    fn address(text: &Arc<str>) -> usize {
        Arc::as_ptr(text).cast::<u8>() as usize
    }

    /// The value remembered for this very allocation.
    pub fn get(&self, text: &Arc<str>) -> Option<&V> {
        self.live
            .get(&Self::address(text))
            .filter(|(t, _, _)| std::ptr::addr_eq(t.as_ptr(), Arc::as_ptr(text)))
            .map(|(_, _, v)| v)
    }

    pub fn insert(&mut self, text: &Arc<str>, value: V) {
        // Sweeping after a quarter more entries, or a quarter more bytes of text, keeps
        // the texts held only by this map to a fraction of the live ones, at a constant
        // cost per entry. Counting bytes too matters when few large texts die among many
        // small live ones (replies of 100 KB whose calls nobody quotes).
        if self.added_since_sweep >= self.live.len() / 4 + 64
            || self.bytes_since_sweep >= self.bytes_at_sweep / 4 + SWEEP_BYTES_FLOOR
        {
            self.sweep();
        }
        self.live.insert(
            Self::address(text),
            (Arc::downgrade(text), text.len(), value),
        );
        self.added_since_sweep += 1;
        self.bytes_since_sweep += text.len();
    }

    /// Drops the entries whose text nobody holds any more: no later use can share them (a
    /// copy of the text is a different allocation).
    pub fn sweep(&mut self) {
        self.live.retain(|_, (text, _, _)| text.strong_count() > 0);
        self.added_since_sweep = 0;
        self.bytes_since_sweep = 0;
        self.bytes_at_sweep = self.live.values().map(|(_, len, _)| len).sum();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_as_long_as_their_text_and_copies_are_other_texts() {
        let mut map = ByAllocation::default();
        let kept: Arc<str> = "kept".into();
        map.insert(&kept, 1);
        for i in 0..2_000 {
            let one_off: Arc<str> = format!("one-off {i}").into();
            map.insert(&one_off, i);
        }
        assert_eq!(map.get(&kept), Some(&1));
        assert!(map.len() < 1_000, "dropped texts are swept: {}", map.len());
        let copy: Arc<str> = kept.to_string().into();
        assert_eq!(map.get(&copy), None, "a copy is another allocation");
        let watch = Arc::downgrade(&kept);
        drop(kept);
        assert!(
            watch.upgrade().is_none(),
            "the map never keeps a text alive"
        );
        map.sweep();
        assert!(map.is_empty());
    }

    /// Many small live texts do not let a few large dead ones pile up between sweeps.
    #[test]
    fn large_dead_texts_are_swept_by_their_bytes() {
        let mut map = ByAllocation::default();
        let small: Vec<Arc<str>> = (0..10_000).map(|i| Arc::from(format!("s{i}"))).collect();
        for s in &small {
            map.insert(s, ());
        }
        for i in 0..200 {
            let big: Arc<str> = format!("{i}{}", "x".repeat(100_000)).into();
            map.insert(&big, ());
        }
        // By entries alone no sweep would have run since the small texts (2,500 more
        // entries allowed); by bytes, at most the floor's worth of dead text is held.
        let held = map.len() - small.len();
        assert!(
            held * 100_000 <= SWEEP_BYTES_FLOOR + 100_001,
            "{held} dead 100 KB texts still held"
        );
    }
}
