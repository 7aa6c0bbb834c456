//! Stable hashing and the draws of the crate's one seeded generator ([`SimRng`] over
//! `rand_xoshiro`'s SplitMix64).
//!
//! The simulator must give the same replies for the same seed on every machine and Rust
//! version, and a strategy the same choices (`crate::method::rng`, which seeds this
//! generator per decision), so neither uses `std`'s hasher (unspecified across releases)
//! or `rand`'s `StdRng` (allowed to change between versions). SplitMix64 is fully
//! specified (Steele, Lea and Flood; `rand_xoshiro` implements it and pins its stream
//! against the reference). The draws live here, in the lowest layer that draws, so the
//! simulator, the strategies, the benchmarks and the hard-subset selection all use them.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

/// Mixes one 64-bit value (the SplitMix64 finalizer).
pub fn fmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines a running hash with one more value.
pub fn mix(h: u64, v: u64) -> u64 {
    fmix(
        h ^ v
            .wrapping_add(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(h << 6)
            .wrapping_add(h >> 2),
    )
}

/// Hashes bytes quickly (one multiply per 8 bytes): prompts reach 350 KB and are hashed
/// on every request.
pub fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = fmix(seed ^ (bytes.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h ^= u64::from_le_bytes(tail);
    fmix(h)
}

/// Hashes a string.
pub fn hash_str(seed: u64, s: &str) -> u64 {
    hash_bytes(seed, s.as_bytes())
}

/// The draws of simulated replies and a strategy's choices, from SplitMix64 (deterministic,
/// fast, fully specified, good enough statistically for both).
#[derive(Debug, Clone)]
pub struct SimRng(SplitMix64);

impl SimRng {
    /// The generator whose state starts at `seed` (SplitMix64's first output is the
    /// finalizer of `seed` + the golden-ratio increment).
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Standard normal draw (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // in (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Index drawn with probability proportional to `weights` (non-negative); uniform
    /// when they sum to zero.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        if weights.is_empty() {
            return 0;
        }
        if total <= 0.0 {
            return self.below(weights.len() as u64) as usize;
        }
        let mut x = self.unit() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_sensitive() {
        assert_eq!(hash_str(1, "abc"), hash_str(1, "abc"));
        assert_ne!(hash_str(1, "abc"), hash_str(2, "abc"));
        assert_ne!(hash_str(1, "abcdefgh1"), hash_str(1, "abcdefgh2"));
        assert_ne!(hash_str(1, ""), hash_str(1, "\0"));
    }

    /// Seeded simulations stay byte-identical: these draws are pinned (computed
    /// independently from the SplitMix64 definition).
    #[test]
    fn the_draws_of_a_seed_are_pinned() {
        let mut r = SimRng::new(7);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [
                0x63cb_e1e4_5932_0dd7,
                0x044c_3cd7_f43c_661c,
                0xe698_4080_bab1_2a02
            ]
        );
        assert_eq!(r.unit(), 0.5829302930280781);
        assert_eq!(r.below(10), 4);
    }

    #[test]
    fn unit_and_normal_are_sane() {
        let mut r = SimRng::new(7);
        let n = 20_000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..n {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            let z = r.normal();
            sum += z;
            sq += z * z;
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((var - 1.0).abs() < 0.1, "var {var}");
    }

    #[test]
    fn weighted_follows_weights() {
        let mut r = SimRng::new(3);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            counts[r.weighted(&[0.0, 1.0, 3.0])] += 1;
        }
        assert_eq!(counts[0], 0);
        assert!(counts[2] > counts[1] * 2, "{counts:?}");
    }
}
