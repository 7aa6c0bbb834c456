//! A prompt as a sequence of shared text segments.
//!
//! The refine prompts of one problem's candidates quote the same rollouts (~350 KB with
//! 40 KB solutions), and the experience and guideline prompts quote them again. Holding
//! each prompt as one flat `String` keeps a copy per call in flight; holding it as a list
//! of `Arc<str>` segments (the question, each solution and summary, the template text
//! between them) keeps one copy of each distinct text, however many calls quote it. The
//! request body is written segment by segment (see the client's escape cache), and the
//! run store sees the same bytes as the flat text ([`PromptText::flatten`]).

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Segments at least this long are kept as shared allocations by [`PromptTextBuilder`];
/// shorter text (template literals, indices, separators) is copied into one run, so a
/// prompt is a handful of segments, not hundreds of tiny ones.
pub const SHARE_AT: usize = 256;

/// Immutable prompt text made of shared segments. Cloning is one reference count.
#[derive(Clone, Default)]
pub struct PromptText {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    segments: Box<[Arc<str>]>,
    len: usize,
    /// The flat text, made on the first [`PromptText::flatten`] and shared by every clone,
    /// so the M calls that send one prompt hand the run store one allocation (its prompt
    /// cache recognizes a prompt by address and splits and hashes it once).
    flat: OnceLock<Arc<str>>,
}

impl PromptText {
    /// The text of `segments` in order (empty segments are dropped).
    pub fn from_segments(segments: Vec<Arc<str>>) -> Self {
        let segments: Vec<Arc<str>> = segments.into_iter().filter(|s| !s.is_empty()).collect();
        let len = segments.iter().map(|s| s.len()).sum();
        Self {
            inner: Arc::new(Inner {
                segments: segments.into(),
                len,
                flat: OnceLock::new(),
            }),
        }
    }

    /// The segments in order; their concatenation is the text.
    pub fn segments(&self) -> &[Arc<str>] {
        &self.inner.segments
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The text as one allocation (for code that needs contiguous text: a tokenizer, the
    /// store's prompt hash): the segment itself when there is one, else a copy made once
    /// and shared by every clone of this text.
    pub fn flatten(&self) -> Arc<str> {
        match &*self.inner.segments {
            [] => "".into(),
            [only] => only.clone(),
            many => self
                .inner
                .flat
                .get_or_init(|| {
                    let mut out = String::with_capacity(self.inner.len);
                    for s in many {
                        out.push_str(s);
                    }
                    out.into()
                })
                .clone(),
        }
    }

    /// True when both are the same allocation of segments (a cheap identity test; equal
    /// texts built separately are not identical).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    /// The characters of the text, in order.
    pub fn chars(&self) -> impl Iterator<Item = char> + '_ {
        self.segments().iter().flat_map(|s| s.chars())
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.segments().iter().flat_map(|s| s.bytes())
    }
}

impl fmt::Display for PromptText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.segments().iter().try_for_each(|s| f.write_str(s))
    }
}

impl fmt::Debug for PromptText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.flatten(), f)
    }
}

/// Equal when the texts are equal, however they are segmented.
impl PartialEq for PromptText {
    fn eq(&self, other: &Self) -> bool {
        Self::ptr_eq(self, other) || (self.len() == other.len() && self.bytes().eq(other.bytes()))
    }
}

impl Eq for PromptText {}

impl PartialEq<str> for PromptText {
    fn eq(&self, other: &str) -> bool {
        self.len() == other.len() && self.bytes().eq(other.bytes())
    }
}

impl PartialEq<&str> for PromptText {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl From<Arc<str>> for PromptText {
    fn from(s: Arc<str>) -> Self {
        Self::from_segments(vec![s])
    }
}

impl From<&Arc<str>> for PromptText {
    fn from(s: &Arc<str>) -> Self {
        Self::from_segments(vec![s.clone()])
    }
}

impl From<String> for PromptText {
    fn from(s: String) -> Self {
        Self::from_segments(vec![s.into()])
    }
}

impl From<&str> for PromptText {
    fn from(s: &str) -> Self {
        Self::from_segments(vec![s.into()])
    }
}

/// Serialized as one JSON string, exactly as the flat text would be.
impl Serialize for PromptText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PromptText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

/// Builds a [`PromptText`]: long shared texts are kept by reference, short pieces are
/// gathered into runs.
#[derive(Default)]
pub struct PromptTextBuilder {
    segments: Vec<Arc<str>>,
    pending: String,
}

impl PromptTextBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a copy of `s`.
    pub fn push_str(&mut self, s: &str) {
        self.pending.push_str(s);
    }

    /// Appends `s`, by reference when it is long enough to be worth sharing.
    pub fn push_shared(&mut self, s: &Arc<str>) {
        if s.len() >= SHARE_AT {
            self.flush();
            self.segments.push(s.clone());
        } else {
            self.pending.push_str(s);
        }
    }

    /// Appends every segment of `text` (long ones by reference).
    pub fn push_text(&mut self, text: &PromptText) {
        for s in text.segments() {
            self.push_shared(s);
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.segments.push(std::mem::take(&mut self.pending).into());
        }
    }

    pub fn finish(mut self) -> PromptText {
        self.flush();
        PromptText::from_segments(self.segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_shares_long_texts_and_gathers_short_ones() {
        let long: Arc<str> = "s".repeat(SHARE_AT).into();
        let mut b = PromptTextBuilder::new();
        b.push_str("Q: ");
        b.push_shared(&"short".into());
        b.push_shared(&long);
        b.push_str("\n");
        b.push_str("end");
        let text = b.finish();
        assert_eq!(text.segments().len(), 3);
        assert!(Arc::ptr_eq(&text.segments()[1], &long));
        let flat = format!("Q: short{long}\nend");
        assert_eq!(text.to_string(), flat);
        assert_eq!(*text.flatten(), *flat);
        assert_eq!(text.len(), flat.len());
        assert_eq!(text, PromptText::from(flat.as_str()));
        assert_eq!(text.chars().count(), flat.chars().count());
        // Every clone flattens to the same allocation (the store's prompt cache keys on it).
        assert!(Arc::ptr_eq(&text.flatten(), &text.clone().flatten()));
    }

    #[test]
    fn serializes_as_the_flat_string() {
        let text = PromptText::from_segments(vec![
            "a \"quoted\"\n".into(),
            "".into(),
            "ü \\ \u{1}".into(),
        ]);
        let flat = text.to_string();
        assert_eq!(
            serde_json::to_string(&text).unwrap(),
            serde_json::to_string(&flat).unwrap()
        );
        let back: PromptText =
            serde_json::from_str(&serde_json::to_string(&text).unwrap()).unwrap();
        assert_eq!(back, text);
        assert_eq!(PromptText::default(), PromptText::from(""));
        assert!(
            PromptText::from_segments(vec!["".into()])
                .segments()
                .is_empty()
        );
    }
}
