//! De-duplication by sentence embeddings with the released RSE's rule
//! (WangXinglin/RSE, `code/experience_dedup.py`, `deduplicate_logic_with_trace`, lines
//! 45–151), pure: given the items of one kind (the bank's, then the current iteration's)
//! and their vectors, which are kept and what each dropped one was merged into.
//!
//! The rule, step by step as released:
//! 1. identical texts are one item; a current item takes the place of an identical older
//!    one (lines 50–63);
//! 2. the items are visited current ones first, then by length, longest first (line 87;
//!    a stable sort, ties in order of first appearance);
//! 3. an item that is a strictly shorter substring of a kept item is merged into the first
//!    such item (lines 40–43, 101–106); otherwise it is merged into the most similar kept
//!    item when their cosine is above the threshold, strictly (lines 108–120); otherwise it
//!    is kept;
//! 4. the kept items are put back in their original order (`--keep-order`, line 139; the
//!    released `run.sh` passes it), an item that took an identical older one's place
//!    at the place of the newer one.
//!
//! So of two near-duplicates the longer one stays, a current item wins over an older one
//! (the bank can lose an item to a newer rewording of it), and lengths count characters
//! (Python's `len`).

use std::collections::HashMap;

pub use crate::method::banks::similarity::cosine;

/// One item to de-duplicate.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub text: &'a str,
    /// From the current iteration's extractions (else already in the bank).
    pub current: bool,
    pub vector: &'a [f32],
}

/// Why an item was merged into another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Merge {
    /// The same text.
    Identical,
    /// A strictly shorter substring of the kept item.
    Contained,
    /// Cosine above the threshold, with the cosine.
    Cosine(f64),
}

/// What the rule made of a list of entries (indices into it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dedup {
    /// The kept entries, in original order.
    pub kept: Vec<usize>,
    /// (dropped entry, the entry it was merged into, why), in the order decided. The entry
    /// merged into may itself be dropped later only for `Identical` (follow it to a kept
    /// one with [`Dedup::head_of`]).
    pub merged: Vec<(usize, usize, Merge)>,
}

impl Dedup {
    /// The kept entry that `entry` ended up in (itself when kept).
    pub fn head_of(&self, mut entry: usize) -> usize {
        // Each step goes to an entry decided later or kept, so this ends.
        while let Some((_, into, _)) = self.merged.iter().find(|(d, _, _)| *d == entry) {
            entry = *into;
        }
        entry
    }
}

/// The released rule (see the module documentation) on `entries` at `threshold`.
pub fn dedup_released(entries: &[Entry<'_>], threshold: f64) -> Dedup {
    let mut merged = Vec::new();
    // Step 1: one representative per text, in order of first appearance.
    let mut reps: Vec<usize> = Vec::new();
    let mut slot_of: HashMap<&str, usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        match slot_of.get(e.text) {
            None => {
                slot_of.insert(e.text, reps.len());
                reps.push(i);
            }
            Some(&slot) if e.current => {
                merged.push((reps[slot], i, Merge::Identical));
                reps[slot] = i;
            }
            Some(&slot) => merged.push((i, reps[slot], Merge::Identical)),
        }
    }
    // Step 2: current first, then longest first; stable.
    let chars: Vec<usize> = entries.iter().map(|e| e.text.chars().count()).collect();
    let mut order = reps;
    order.sort_by_key(|&i| (!entries[i].current, std::cmp::Reverse(chars[i])));
    // Step 3.
    let mut heads: Vec<usize> = Vec::new();
    for i in order {
        let text = entries[i].text;
        let contained = heads
            .iter()
            .find(|&&h| chars[i] < chars[h] && entries[h].text.contains(text));
        if let Some(&h) = contained {
            merged.push((i, h, Merge::Contained));
            continue;
        }
        let mut best: Option<(usize, f64)> = None;
        for &h in &heads {
            let c = cosine(entries[i].vector, entries[h].vector);
            if best.is_none_or(|(_, b)| c > b) {
                best = Some((h, c));
            }
        }
        match best {
            Some((h, c)) if c > threshold => merged.push((i, h, Merge::Cosine(c))),
            _ => heads.push(i),
        }
    }
    // Step 4.
    heads.sort_unstable();
    Dedup {
        kept: heads,
        merged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_parallel_orthogonal_and_zero_vectors() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert!((cosine(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        // 45°: cos = 0.7071…
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-9);
    }

    fn e<'a>(text: &'a str, current: bool, vector: &'a [f32]) -> Entry<'a> {
        Entry {
            text,
            current,
            vector,
        }
    }

    #[test]
    fn of_two_near_duplicates_the_longer_is_kept() {
        // cos(a, b) ≈ 0.994 > 0.8.
        let (a, b) = ([1.0, 0.0], [0.9, 0.1]);
        let items = [
            e("x equals 3", true, &a),
            e("x = 3 by the sum rule", true, &b),
        ];
        let got = dedup_released(&items, 0.8);
        assert_eq!(got.kept, [1]);
        assert!(matches!(got.merged[..], [(0, 1, Merge::Cosine(c))] if c > 0.99));
    }

    #[test]
    fn a_current_item_wins_over_an_older_one_even_when_shorter() {
        let (a, b) = ([1.0, 0.0], [0.9, 0.1]);
        let items = [e("the long older wording", false, &a), e("short", true, &b)];
        let got = dedup_released(&items, 0.8);
        assert_eq!(got.kept, [1]);
        assert_eq!(got.head_of(0), 1);
    }

    #[test]
    fn a_contained_item_is_merged_whatever_its_cosine() {
        // Orthogonal vectors: only the substring rule can merge them.
        let (a, b) = ([1.0, 0.0], [0.0, 1.0]);
        let items = [e("x = 3", true, &a), e("we find x = 3 here", true, &b)];
        let got = dedup_released(&items, 0.8);
        assert_eq!(got.kept, [1]);
        assert_eq!(got.merged, [(0, 1, Merge::Contained)]);
        // Not contained, same vectors: both kept.
        let items = [e("x = 4", true, &a), e("we find x = 3 here", true, &b)];
        assert_eq!(dedup_released(&items, 0.8).kept, [0, 1]);
    }

    #[test]
    fn the_threshold_itself_is_not_a_duplicate() {
        // Exactly representable: cos([3, 4], [1, 0]) = 0.6 in f64.
        let (a, b) = ([1.0, 0.0], [3.0, 4.0]);
        let items = [e("first item", true, &a), e("other item", true, &b)];
        assert_eq!(dedup_released(&items, 0.6).kept, [0, 1]);
        let below = dedup_released(&items, 0.599_999);
        assert_eq!(below.kept, [0]);
        assert!(matches!(below.merged[..], [(1, 0, Merge::Cosine(c))] if c == 0.6));
    }

    #[test]
    fn identical_texts_are_one_item_placed_where_the_current_one_is() {
        let (a, b, c) = ([1.0, 0.0], [0.0, 1.0], [0.7, 0.7]);
        let items = [
            e("same", false, &a),
            e("older other", false, &b),
            e("same", true, &a),
            e("far", true, &c), // cos ≈ 0.71 with both: kept
        ];
        let got = dedup_released(&items, 0.8);
        // Original order, "same" at the current occurrence's place.
        assert_eq!(got.kept, [1, 2, 3]);
        assert_eq!(got.merged[0], (0, 2, Merge::Identical));
        assert_eq!(got.head_of(0), 2);
    }

    #[test]
    fn an_item_is_merged_into_the_most_similar_kept_one() {
        let (near, nearer, item) = ([0.8, 0.6], [0.99, 0.14], [1.0, 0.0]);
        // Longest first: the two heads are visited before the short item.
        let items = [
            e("head one is long", true, &near),
            e("head two, longer", true, &nearer),
            e("item", true, &item),
        ];
        // cos(near, nearer) ≈ 0.87: at 0.9 both are kept.
        let got = dedup_released(&items, 0.9);
        assert_eq!(got.kept, [0, 1]);
        assert!(matches!(got.merged[..], [(2, 1, Merge::Cosine(_))]));
    }
}
