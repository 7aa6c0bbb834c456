//! The two memory banks' merge rules, applied by the bank actor in `tmas-actors`.
//!
//! The paper wants the guideline bank append-only; the released code trusts the model to
//! obey. Here the rule is code: [`AppendOnlyMerge`] never drops or rewrites an entry and
//! refuses near-duplicates. The experience bank is meant to be rewritten each iteration,
//! so [`DedupReplaceMerge`] takes the model's list (de-duplicated) unless it is empty.
//! Similarity is the Jaccard index of normalized token sets (the released memory store
//! de-duplicates at 0.7).

use std::collections::BTreeSet;
use std::sync::Arc;

use tmas_actors::strategy::{MergeOutcome, MergePolicy, Rejection};

/// Bank name of the experience bank (as used in `Command::UpdateBank`).
pub const EXPERIENCE_BANK: &str = "experience";
/// Bank name of the guideline bank.
pub const GUIDELINE_BANK: &str = "guideline";
/// Prefix of a verified-anchor experience item.
pub const ANCHOR_PREFIX: &str = "Anchor: ";
/// Prefix of an error-avoidance-heuristic experience item.
pub const HEURISTIC_PREFIX: &str = "Heuristic: ";

/// Lower-cased alphanumeric tokens, ignoring an `Anchor:`/`Heuristic:` prefix so that the
/// prefix alone does not make two short items look alike.
pub fn normalized_tokens(item: &str) -> BTreeSet<String> {
    let body = item
        .strip_prefix(ANCHOR_PREFIX)
        .or_else(|| item.strip_prefix(HEURISTIC_PREFIX))
        .unwrap_or(item);
    body.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Jaccard similarity of the normalized token sets (1.0 for two token-less items).
pub fn jaccard(a: &str, b: &str) -> f64 {
    token_jaccard(&normalized_tokens(a), &normalized_tokens(b))
}

fn token_jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    inter as f64 / union as f64
}

/// The most similar item of `kept` at or above `threshold`, with its similarity.
fn near_duplicate<'a>(
    tokens: &BTreeSet<String>,
    kept: &'a [(String, BTreeSet<String>)],
    threshold: f64,
) -> Option<(&'a str, f64)> {
    kept.iter()
        .map(|(item, t)| (item.as_str(), token_jaccard(tokens, t)))
        .filter(|(_, sim)| *sim >= threshold)
        .max_by(|x, y| x.1.total_cmp(&y.1))
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
/// existing or already-added one (Jaccard ≥ threshold) is not added.
#[derive(Debug, Clone, Copy)]
pub struct AppendOnlyMerge {
    pub threshold: f64,
}

impl MergePolicy for AppendOnlyMerge {
    fn merge(&self, current: &[String], proposed: Vec<String>) -> MergeOutcome {
        let mut kept: Vec<(String, BTreeSet<String>)> = current
            .iter()
            .map(|c| (c.clone(), normalized_tokens(c)))
            .collect();
        let mut rejected = Vec::new();
        let proposed: Vec<String> = proposed.into_iter().map(|p| p.trim().to_string()).collect();
        let mut rewritten: BTreeSet<String> = BTreeSet::new();
        for item in &proposed {
            if item.is_empty() {
                rejected.push(reject(item, "empty entry".into()));
                continue;
            }
            if current.iter().any(|c| c.trim() == item) {
                continue; // an existing entry, repeated as asked
            }
            let tokens = normalized_tokens(item);
            if let Some((dup, sim)) = near_duplicate(&tokens, &kept, self.threshold) {
                let is_current = current.iter().any(|c| c == dup);
                let reason = if is_current && !proposed.iter().any(|p| p == dup.trim()) {
                    rewritten.insert(dup.to_string());
                    format!(
                        "rewrites existing entry {dup:?} (Jaccard {sim:.2}); the bank is append-only, the original is kept"
                    )
                } else {
                    format!(
                        "duplicates entry {dup:?} (Jaccard {sim:.2} ≥ {:.2})",
                        self.threshold
                    )
                };
                rejected.push(reject(item, reason));
                continue;
            }
            kept.push((item.clone(), tokens));
        }
        for c in current {
            if !rewritten.contains(c) && !proposed.iter().any(|p| p == c.trim()) {
                rejected.push(reject(
                    c,
                    "dropped by the model; kept (the bank is append-only)".into(),
                ));
            }
        }
        MergeOutcome {
            items: kept.into_iter().map(|(i, _)| i).collect(),
            rejected,
        }
    }
}

/// Experience bank rule: the model's new list replaces the bank, minus blanks and
/// near-duplicates (the first of a similar pair wins). An empty list keeps the bank.
#[derive(Debug, Clone, Copy)]
pub struct DedupReplaceMerge {
    pub threshold: f64,
}

impl MergePolicy for DedupReplaceMerge {
    fn merge(&self, current: &[String], proposed: Vec<String>) -> MergeOutcome {
        let mut kept: Vec<(String, BTreeSet<String>)> = Vec::new();
        let mut rejected = Vec::new();
        for item in proposed.into_iter().map(|p| p.trim().to_string()) {
            if item.is_empty() {
                rejected.push(reject(&item, "empty entry".into()));
                continue;
            }
            let tokens = normalized_tokens(&item);
            if let Some((dup, sim)) = near_duplicate(&tokens, &kept, self.threshold) {
                let reason = format!(
                    "duplicates entry {dup:?} (Jaccard {sim:.2} ≥ {:.2})",
                    self.threshold
                );
                rejected.push(reject(&item, reason));
                continue;
            }
            kept.push((item, tokens));
        }
        if kept.is_empty() {
            rejected.push(reject(
                "",
                "update had no usable entries; previous bank kept".into(),
            ));
            return MergeOutcome {
                items: current.to_vec(),
                rejected,
            };
        }
        MergeOutcome {
            items: kept.into_iter().map(|(i, _)| i).collect(),
            rejected,
        }
    }
}

fn reject(item: &str, reason: String) -> Rejection {
    Rejection {
        item: item.to_string(),
        reason,
    }
}

/// The merge policy of each TMAS bank, for wiring bank actors.
pub fn tmas_merge_policies(dedup_threshold: f64) -> Vec<(Arc<str>, Arc<dyn MergePolicy>)> {
    vec![
        (
            Arc::from(EXPERIENCE_BANK),
            Arc::new(DedupReplaceMerge {
                threshold: dedup_threshold,
            }),
        ),
        (
            Arc::from(GUIDELINE_BANK),
            Arc::new(AppendOnlyMerge {
                threshold: dedup_threshold,
            }),
        ),
    ]
}

#[cfg(test)]
#[path = "banks_tests.rs"]
mod tests;
