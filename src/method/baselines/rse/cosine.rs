//! De-duplication by sentence embeddings (the original RSE's rule), pure: given the
//! vectors, which new bank items duplicate an item already in the bank or an earlier new
//! item (cosine ≥ threshold, compared only with items of the same kind).

/// Cosine similarity of two vectors; 0 when either is all zeros (such a vector says
/// nothing about its text, so it duplicates nothing). Summed in `f64` in index order:
/// the same vectors always give the same value, so a resumed run decides the same.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    dot / (aa.sqrt() * bb.sqrt())
}

/// What a new item duplicates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Duplicate {
    /// The bank item at this index of `existing`.
    Existing(usize),
    /// The earlier new item at this index of `new`.
    New(usize),
}

/// One item to compare: its kind (only items of equal kinds are compared) and vector.
pub type Item<'a, K> = (K, &'a [f32]);

/// For each of `new`, in order: `None` when it is kept, or the most similar item of its
/// kind — among `existing` and the new items kept before it — when that one's cosine is
/// at or above `threshold` (ties: the earlier item, bank items first), with the cosine.
pub fn deduplicate<K: PartialEq>(
    existing: &[Item<'_, K>],
    new: &[Item<'_, K>],
    threshold: f64,
) -> Vec<Option<(Duplicate, f64)>> {
    let mut verdicts: Vec<Option<(Duplicate, f64)>> = Vec::with_capacity(new.len());
    for (i, (kind, vector)) in new.iter().enumerate() {
        let earlier_kept = new[..i]
            .iter()
            .enumerate()
            .filter(|(j, _)| verdicts[*j].is_none())
            .map(|(j, item)| (Duplicate::New(j), item));
        let candidates = existing
            .iter()
            .enumerate()
            .map(|(j, item)| (Duplicate::Existing(j), item))
            .chain(earlier_kept);
        let mut best: Option<(Duplicate, f64)> = None;
        for (which, (k, v)) in candidates {
            if k != kind {
                continue;
            }
            let c = cosine(vector, v);
            if c >= threshold && best.is_none_or(|(_, b)| c > b) {
                best = Some((which, c));
            }
        }
        verdicts.push(best);
    }
    verdicts
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

    #[test]
    fn new_items_at_or_above_the_threshold_are_dropped_against_the_bank_and_each_other() {
        let (a, a2, b, c) = ([1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.5, 0.9]);
        let existing = [("p", &a[..])];
        let new = [
            ("p", &a2[..]), // ≈ a (cos 0.994): duplicate of the bank item
            ("p", &b[..]),  // orthogonal to a: kept
            ("p", &c[..]),  // cos(c, b) ≈ 0.87, cos(c, a) ≈ 0.49: a duplicate of b
            ("q", &a[..]),  // same vector as the bank item, other kind: kept
            ("q", &a[..]),  // repeats the new `q` item: duplicate of it (cosine 1)
        ];
        let got = deduplicate(&existing, &new, 0.8);
        assert!(matches!(got[0], Some((Duplicate::Existing(0), c)) if c > 0.99));
        assert_eq!(got[1], None);
        assert!(matches!(got[2], Some((Duplicate::New(1), c)) if (c - 0.874).abs() < 1e-3));
        assert_eq!(got[3], None);
        assert!(matches!(got[4], Some((Duplicate::New(3), c)) if (c - 1.0).abs() < 1e-12));
        // Just above every cosine of a kept pair: only the exact repeat is dropped.
        let strict = deduplicate(&existing, &new, 0.999);
        assert_eq!(
            strict.iter().map(Option::is_some).collect::<Vec<_>>(),
            [false, false, false, false, true]
        );
    }

    #[test]
    fn the_threshold_itself_counts_as_a_duplicate() {
        // Exactly representable: cos([3, 4], [1, 0]) = 0.6 in f64.
        let (bank, item) = ([1.0, 0.0], [3.0, 4.0]);
        let at = deduplicate(&[((), &bank[..])], &[((), &item[..])], 0.6);
        assert!(matches!(at[0], Some((Duplicate::Existing(0), c)) if c == 0.6));
        let above = deduplicate(&[((), &bank[..])], &[((), &item[..])], 0.600_001);
        assert_eq!(above[0], None);
    }

    #[test]
    fn a_dropped_item_is_not_compared_with_later_ones() {
        // x duplicates the bank's item; y is close to x but not to the bank's item: y is
        // kept, because x never entered the bank.
        let bank = [1.0, 0.0];
        let x = [0.95, 0.31]; // cos(bank, x) ≈ 0.95
        let y = [0.6, 0.8]; //    cos(bank, y) = 0.6, cos(x, y) ≈ 0.82
        let got = deduplicate(&[((), &bank[..])], &[((), &x[..]), ((), &y[..])], 0.8);
        assert!(matches!(got[0], Some((Duplicate::Existing(0), _))));
        assert_eq!(got[1], None);
    }

    #[test]
    fn the_most_similar_match_is_reported() {
        let (near, nearer, item) = ([0.8, 0.6], [0.99, 0.14], [1.0, 0.0]);
        let got = deduplicate(
            &[((), &near[..]), ((), &nearer[..])],
            &[((), &item[..])],
            0.5,
        );
        assert!(matches!(got[0], Some((Duplicate::Existing(1), _))));
    }
}
