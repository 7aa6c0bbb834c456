//! The paper's hard-subset selection (IMO-AnswerBench-50): k independent samples per
//! problem, keep the problems with fewer than c correct, then draw n of them with a
//! seeded draw. Pure; `tmas select-hard` runs the samples and writes the subset.

use serde::{Deserialize, Serialize};

/// One problem's sample counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleCount {
    pub problem_id: String,
    pub question: String,
    pub answer: String,
    /// Samples judged correct (judge score above one half).
    pub correct: u32,
    /// Samples with a judged solution (failed calls are not counted).
    pub samples: u32,
}

pub use super::judge::is_correct;

/// The problems with fewer than `below` correct samples (in input order), then `n` of
/// them drawn without replacement by a generator seeded with `seed`, kept in input
/// order. Fewer than `n` hard problems: all of them.
pub fn select_hard(counts: &[SampleCount], below: u32, n: usize, seed: u64) -> Vec<SampleCount> {
    let pool: Vec<&SampleCount> = counts.iter().filter(|c| c.correct < below).collect();
    let mut rng = crate::sim::rng::SimRng::new(seed);
    // Partial Fisher–Yates over indices, then back to input order.
    let mut idx: Vec<usize> = (0..pool.len()).collect();
    let k = n.min(pool.len());
    for i in 0..k {
        let j = i + rng.below((pool.len() - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut picked = idx[..k].to_vec();
    picked.sort_unstable();
    picked.into_iter().map(|i| pool[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(id: &str, correct: u32) -> SampleCount {
        SampleCount {
            problem_id: id.into(),
            question: format!("q {id}"),
            answer: "1".into(),
            correct,
            samples: 8,
        }
    }

    #[test]
    fn keeps_hard_problems_and_draws_reproducibly() {
        let counts: Vec<_> = (0..20).map(|i| count(&format!("p{i}"), i % 4)).collect();
        let all = select_hard(&counts, 2, 100, 1);
        assert_eq!(all.len(), 10, "half the problems have 0 or 1 correct");
        assert!(all.iter().all(|c| c.correct < 2));
        let a = select_hard(&counts, 2, 4, 7);
        assert_eq!(a.len(), 4);
        assert_eq!(a, select_hard(&counts, 2, 4, 7), "same seed, same draw");
        let ids = |v: &[SampleCount]| v.iter().map(|c| c.problem_id.clone()).collect::<Vec<_>>();
        let draws: std::collections::BTreeSet<_> = (0..10)
            .map(|s| ids(&select_hard(&counts, 2, 4, s)))
            .collect();
        assert!(draws.len() > 1, "the seed changes the draw");
        let order: Vec<usize> = a
            .iter()
            .map(|c| {
                counts
                    .iter()
                    .position(|x| x.problem_id == c.problem_id)
                    .unwrap()
            })
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "input order kept");
        assert!(is_correct(0.75) && !is_correct(0.5));
    }
}
