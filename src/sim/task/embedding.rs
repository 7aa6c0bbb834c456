//! The simulated embeddings model: a hashed bag of words, normalized. Texts with the same
//! words point the same way (cosine 1), texts that share most of their words are close,
//! unrelated texts are nearly orthogonal. Like real sentence embeddings it barely sees
//! one changed number: `[fact F1: a1 = 7] was derived` and its wrong variant
//! `[fact F1: a1 = 8] was derived` share five of six words (cosine ≈ 0.83), so at
//! RSE's threshold 0.8 they count as duplicates. A test and demo device, not a model of
//! any real embedding model's geometry.

use crate::sim::rng::hash_str;

/// Dimension of every simulated vector.
pub const DIMENSIONS: usize = 256;

/// Separates the word hashes from the simulator's other uses of the same hash.
const WORD_SALT: u64 = 0xE3B0_C442_98FC_1C14;

/// The words of a text: maximal runs of letters and digits, lower-cased.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The vector of `text`: each word adds ±1 to one of [`DIMENSIONS`] coordinates (both
/// from the word's hash), then the vector is scaled to length 1. A text without words
/// gets the zero vector (it resembles nothing).
pub fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f64; DIMENSIONS];
    for word in words(text) {
        let h = hash_str(WORD_SALT, &word);
        let slot = (h % DIMENSIONS as u64) as usize;
        v[slot] += if h >> 63 == 0 { 1.0 } else { -1.0 };
    }
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        return vec![0.0; DIMENSIONS];
    }
    v.into_iter().map(|x| (x / norm) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &str, b: &str) -> f64 {
        let (a, b) = (embed(a), embed(b));
        a.iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    #[test]
    fn near_duplicates_are_close_and_unrelated_texts_are_not() {
        let v = embed("Anything at all");
        assert_eq!(v.len(), DIMENSIONS);
        let norm: f64 = v.iter().map(|x| f64::from(*x).powi(2)).sum();
        assert!((norm - 1.0).abs() < 1e-6, "unit length: {norm}");
        assert_eq!(
            embed("x = 3, y"),
            embed("X=3 y"),
            "punctuation and case do not count"
        );
        let same_words = cos("the sum is even", "even is the sum");
        assert!((same_words - 1.0).abs() < 1e-6, "{same_words}");
        let variant = cos(
            "[fact F1: a1 = 7] was derived",
            "[fact F1: a1 = 8] was derived",
        );
        assert!(
            (0.8..0.9).contains(&variant),
            "one number changed: {variant}"
        );
        let other_fact = cos(
            "[fact F1: a1 = 7] was derived",
            "[fact F2: a2 = 3] was derived",
        );
        assert!(other_fact < 0.7, "another fact: {other_fact}");
        let unrelated = cos(
            "the triangle inequality bounds the third side",
            "recompute the modular inverse before dividing",
        );
        assert!(unrelated.abs() < 0.3, "{unrelated}");
        assert_eq!(embed(" ,; "), vec![0.0; DIMENSIONS]);
    }
}
