//! The two memory banks' merge rules, applied by the bank actor in `tmas-actors`.
//!
//! The paper wants the guideline bank append-only; the released code trusts the model to
//! obey. Here the rule is code: [`AppendOnlyMerge`] never drops or rewrites an entry and
//! refuses near-duplicates. The experience bank is meant to be rewritten each iteration,
//! so [`DedupReplaceMerge`] takes the model's list (de-duplicated) unless it is empty.
//! Near-duplicates are found by [`DuplicateRule`]: the lexical [`similarity`], which keeps
//! numbers, operators, negations and formula order (the released store's token-set
//! Jaccard does not), at the released store's 0.7 (`method.dedup_threshold`), and, when
//! the strategy hands the update the items' embeddings (`method.bank_dedup =
//! "embeddings"`), the cosine of their canonical spellings where no number, relation,
//! sign, negation or opposite word separates them. Without embeddings (none configured,
//! or the update's embeddings call failed) the lexical rule decides alone. Anchors and
//! heuristics are never compared with each other: "T(2) = 3" as a verified fact and as a
//! warning are two items.

use std::sync::Arc;

use tmas_actors::strategy::{ItemEmbeddings, MergeOutcome, MergePolicy, Rejection};

pub(crate) mod similarity;

pub use similarity::{DuplicateRule, ItemFeatures};
use similarity::{Match, canonical, cosine};

/// Bank name of the experience bank (as used in `Command::UpdateBank`).
pub const EXPERIENCE_BANK: &str = "experience";
/// Bank name of the guideline bank.
pub const GUIDELINE_BANK: &str = "guideline";
/// Prefix of a verified-anchor experience item.
pub const ANCHOR_PREFIX: &str = "Anchor: ";
/// Prefix of an error-avoidance-heuristic experience item.
pub const HEURISTIC_PREFIX: &str = "Heuristic: ";

/// What an item is, for de-duplication: items of different kinds are never duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    Anchor,
    Heuristic,
    /// A guideline, or an experience item without a known prefix.
    Plain,
}

/// An item's kind and its body (prefix removed).
fn kind_and_body(item: &str) -> (ItemKind, &str) {
    if let Some(body) = item.strip_prefix(ANCHOR_PREFIX) {
        (ItemKind::Anchor, body)
    } else if let Some(body) = item.strip_prefix(HEURISTIC_PREFIX) {
        (ItemKind::Heuristic, body)
    } else {
        (ItemKind::Plain, item)
    }
}

/// The text of `item` an embedding model is asked for: the canonical spelling of its body
/// (prefix removed, LaTeX and Unicode folded into one form), so two spellings of one fact
/// are one text. Empty when the item has no token (nothing to embed).
pub fn embedding_text(item: &str) -> String {
    canonical(kind_and_body(item.trim()).1)
}

/// An item ready for comparison.
#[derive(Debug, Clone)]
struct Kept<'e> {
    item: String,
    kind: ItemKind,
    features: ItemFeatures,
    /// Its embedding, when the update came with embeddings.
    vector: Option<&'e [f32]>,
}

impl<'e> Kept<'e> {
    fn new(item: String, embeddings: Option<&'e ItemEmbeddings>) -> Self {
        let (kind, body) = kind_and_body(&item);
        let features = ItemFeatures::of(body);
        let vector = embeddings.and_then(|e| e.get(&item)).map(|v| &v[..]);
        Self {
            item,
            kind,
            features,
            vector,
        }
    }
}

/// Similarity of two bank items: 0 across kinds (anchor vs heuristic), else
/// [`similarity::similarity`] of their bodies.
#[cfg(test)]
pub fn item_similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (
        Kept::new(a.to_string(), None),
        Kept::new(b.to_string(), None),
    );
    if a.kind == b.kind {
        a.features.similarity(&b.features)
    } else {
        0.0
    }
}

/// The item of `kept` of the same kind that `new` duplicates under `rule` (the strongest
/// match: a lexical one before one by meaning), with why.
fn near_duplicate<'a>(
    new: &Kept<'_>,
    kept: &'a [Kept<'_>],
    rule: &DuplicateRule,
) -> Option<(&'a str, Match)> {
    let mut best: Option<(&'a str, Match)> = None;
    for k in kept.iter().filter(|k| k.kind == new.kind) {
        let cos = k.vector.zip(new.vector).map(|(a, b)| cosine(a, b));
        if let Some(m) = rule.judge(&new.features, &k.features, cos)
            && best.is_none_or(|(_, b)| m.beats(b))
        {
            best = Some((k.item.as_str(), m));
        }
    }
    best
}

/// How a match reads in a rejection reason: `similarity 0.82 ≥ 0.70` or `cosine 0.86 ≥
/// 0.80 of the canonical spellings`.
fn detail(m: Match, rule: &DuplicateRule) -> String {
    match m {
        Match::Lexical(s) => format!("similarity {s:.2} ≥ {:.2}", rule.lexical),
        Match::Meaning(c) => format!(
            "cosine {c:.2} ≥ {:.2} of the canonical spellings",
            rule.cosine
        ),
    }
}

/// Why a merge policy refused an item, as the run store's rejection reasons start (the
/// report counts them by kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectionKind {
    /// A new entry too similar to one already in the bank or the update.
    Duplicate,
    /// A rewording of an existing guideline (append-only: the original stays).
    Rewrite,
    /// An existing guideline left out of the model's list (kept).
    Dropped,
    /// A blank entry.
    Empty,
    /// The update had no usable entry; the previous bank was kept.
    NoUsableEntries,
    /// Anything else (another policy, an older run).
    Other,
}

const REASON_DUPLICATE: &str = "duplicates entry";
const REASON_REWRITE: &str = "rewrites existing entry";
const REASON_DROPPED: &str = "dropped by the model";
const REASON_EMPTY: &str = "empty entry";
const REASON_NO_USABLE: &str = "update had no usable entries";

impl RejectionKind {
    /// The kind of a stored rejection reason written by this module's policies.
    pub fn of(reason: &str) -> Self {
        [
            (REASON_DUPLICATE, Self::Duplicate),
            (REASON_REWRITE, Self::Rewrite),
            (REASON_DROPPED, Self::Dropped),
            (REASON_EMPTY, Self::Empty),
            (REASON_NO_USABLE, Self::NoUsableEntries),
        ]
        .into_iter()
        .find(|(prefix, _)| reason.starts_with(prefix))
        .map_or(Self::Other, |(_, kind)| kind)
    }
}

/// Splits experience items into (anchors, heuristics) with prefixes removed. Items
/// without a known prefix (e.g. a hand-written bank file) count as heuristics.
pub fn split_experience(items: &[String]) -> (Vec<&str>, Vec<&str>) {
    let mut anchors = Vec::new();
    let mut heuristics = Vec::new();
    for item in items {
        if let Some(a) = item.strip_prefix(ANCHOR_PREFIX) {
            anchors.push(a);
        } else {
            heuristics.push(item.strip_prefix(HEURISTIC_PREFIX).unwrap_or(item));
        }
    }
    (anchors, heuristics)
}

/// Guideline bank rule: entries are only ever added. Entries the model dropped or
/// rewrote stay as they were (and are reported); a proposed entry that duplicates an
/// existing or already-added one (under `rule`) is not added.
#[derive(Debug, Clone, Copy)]
pub struct AppendOnlyMerge {
    pub rule: DuplicateRule,
}

impl MergePolicy for AppendOnlyMerge {
    fn merge(
        &self,
        current: &[String],
        proposed: Vec<String>,
        embeddings: Option<&ItemEmbeddings>,
    ) -> MergeOutcome {
        let mut kept: Vec<Kept> = current
            .iter()
            .map(|c| Kept::new(c.clone(), embeddings))
            .collect();
        let mut rejected = Vec::new();
        let proposed: Vec<String> = proposed.into_iter().map(|p| p.trim().to_string()).collect();
        let mut rewritten: Vec<String> = Vec::new();
        for item in &proposed {
            if item.is_empty() {
                rejected.push(reject(item, REASON_EMPTY.into()));
                continue;
            }
            if current.iter().any(|c| c.trim() == item) {
                continue; // an existing entry, repeated as asked
            }
            let new = Kept::new(item.clone(), embeddings);
            if let Some((dup, m)) = near_duplicate(&new, &kept, &self.rule) {
                let is_current = current.iter().any(|c| c == dup);
                let detail = detail(m, &self.rule);
                let reason = if is_current && !proposed.iter().any(|p| p == dup.trim()) {
                    rewritten.push(dup.to_string());
                    format!(
                        "{REASON_REWRITE} {dup:?} ({detail}); the bank is append-only, the original is kept"
                    )
                } else {
                    format!("{REASON_DUPLICATE} {dup:?} ({detail})")
                };
                rejected.push(reject(item, reason));
                continue;
            }
            kept.push(new);
        }
        for c in current {
            if !rewritten.contains(c) && !proposed.iter().any(|p| p == c.trim()) {
                rejected.push(reject(
                    c,
                    format!("{REASON_DROPPED}; kept (the bank is append-only)"),
                ));
            }
        }
        MergeOutcome {
            items: kept.into_iter().map(|k| k.item).collect(),
            rejected,
        }
    }
}

/// Experience bank rule: the model's new list replaces the bank, minus blanks and
/// near-duplicates of the same kind under `rule` (the first of a similar pair wins). An
/// empty list keeps the bank.
#[derive(Debug, Clone, Copy)]
pub struct DedupReplaceMerge {
    pub rule: DuplicateRule,
}

impl MergePolicy for DedupReplaceMerge {
    fn merge(
        &self,
        current: &[String],
        proposed: Vec<String>,
        embeddings: Option<&ItemEmbeddings>,
    ) -> MergeOutcome {
        let mut kept: Vec<Kept> = Vec::new();
        let mut rejected = Vec::new();
        for item in proposed.into_iter().map(|p| p.trim().to_string()) {
            if item.is_empty() {
                rejected.push(reject(&item, REASON_EMPTY.into()));
                continue;
            }
            let new = Kept::new(item, embeddings);
            if let Some((dup, m)) = near_duplicate(&new, &kept, &self.rule) {
                let reason = format!("{REASON_DUPLICATE} {dup:?} ({})", detail(m, &self.rule));
                rejected.push(reject(&new.item, reason));
                continue;
            }
            kept.push(new);
        }
        if kept.is_empty() {
            rejected.push(reject(
                "",
                format!("{REASON_NO_USABLE}; previous bank kept"),
            ));
            return MergeOutcome {
                items: current.to_vec(),
                rejected,
            };
        }
        MergeOutcome {
            items: kept.into_iter().map(|k| k.item).collect(),
            rejected,
        }
    }
}

/// A new item refused as a near-duplicate of `dup` at `similarity ≥ threshold` by a
/// `measure`, as the analyses' tests build one.
#[cfg(test)]
pub fn duplicate_rejection(
    item: &str,
    dup: &str,
    measure: &str,
    similarity: f64,
    threshold: f64,
) -> Rejection {
    merged_rejection(
        item,
        dup,
        &format!("{measure} {similarity:.2} ≥ {threshold:.2}"),
    )
}

/// An item merged into the kept entry `dup` for the reason `detail` (e.g. `cosine 0.91 >
/// 0.80`); the reason reads like the merge policies' own, so reports count it as a
/// duplicate.
pub fn merged_rejection(item: &str, dup: &str, detail: &str) -> Rejection {
    reject(item, format!("{REASON_DUPLICATE} {dup:?} ({detail})"))
}

fn reject(item: &str, reason: String) -> Rejection {
    Rejection {
        item: item.to_string(),
        reason,
    }
}

/// The merge policy of each TMAS bank, for wiring bank actors.
pub fn tmas_merge_policies(rule: DuplicateRule) -> Vec<(Arc<str>, Arc<dyn MergePolicy>)> {
    vec![
        (
            Arc::from(EXPERIENCE_BANK),
            Arc::new(DedupReplaceMerge { rule }),
        ),
        (
            Arc::from(GUIDELINE_BANK),
            Arc::new(AppendOnlyMerge { rule }),
        ),
    ]
}

#[cfg(test)]
mod tests;
