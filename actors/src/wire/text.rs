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
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Segments at least this long are kept as shared allocations by [`PromptTextBuilder`];
/// shorter text (template literals, indices, separators) is copied into one run, so a
/// prompt is a handful of segments, not hundreds of tiny ones.
pub const SHARE_AT: usize = 256;

/// Immutable prompt text made of shared segments. Cloning is one reference count.
#[derive(Clone, Default)]
pub struct PromptText {
    segments: Arc<[Arc<str>]>,
    len: usize,
}

impl PromptText {
    /// The text of `segments` in order (empty segments are dropped).
    pub fn from_segments(segments: Vec<Arc<str>>) -> Self {
        let segments: Vec<Arc<str>> = segments.into_iter().filter(|s| !s.is_empty()).collect();
        let len = segments.iter().map(|s| s.len()).sum();
        Self {
            segments: segments.into(),
            len,
        }
    }

    /// The segments in order; their concatenation is the text.
    pub fn segments(&self) -> &[Arc<str>] {
        &self.segments
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text as one allocation: shared when it is a single segment, else a copy (for
    /// code that needs contiguous text: a tokenizer, the store's prompt hash).
    pub fn flatten(&self) -> Arc<str> {
        match &*self.segments {
            [] => "".into(),
            [only] => only.clone(),
            many => {
                let mut out = String::with_capacity(self.len);
                for s in many {
                    out.push_str(s);
                }
                out.into()
            }
        }
    }

    /// True when both are the same allocation of segments (a cheap identity test; equal
    /// texts built separately are not identical).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.segments, &b.segments)
    }

    /// The characters of the text, in order.
    pub fn chars(&self) -> impl Iterator<Item = char> + '_ {
        self.segments.iter().flat_map(|s| s.chars())
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.segments.iter().flat_map(|s| s.bytes())
    }
}

impl fmt::Display for PromptText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.segments.iter().try_for_each(|s| f.write_str(s))
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
        Arc::ptr_eq(&self.segments, &other.segments)
            || (self.len == other.len && self.bytes().eq(other.bytes()))
    }
}

impl Eq for PromptText {}

impl PartialEq<str> for PromptText {
    fn eq(&self, other: &str) -> bool {
        self.len == other.len() && self.bytes().eq(other.bytes())
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
