//! One synthetic problem: its reference answer, hidden facts and strategies, all derived
//! from the problem id (and the dataset's answer when one is given), never from the seed,
//! so a problem is the same world in every run.

use crate::sim::options::{STRATEGY_NAMES, TaskOptions};
use crate::sim::rng::{SimRng, hash_str, mix};

/// A hidden intermediate fact `a{id} = value`; `wrong` is its plausible wrong variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// 1-based.
    pub id: u32,
    pub value: u64,
    pub wrong: u64,
}

impl Fact {
    /// The statement as it appears in replies: `[fact F2: a2 = 517]`.
    pub fn statement(&self, correct: bool) -> String {
        let v = if correct { self.value } else { self.wrong };
        format!("[fact F{id}: a{id} = {v}]", id = self.id)
    }

    /// The marker of an error-avoidance heuristic about the wrong variant.
    pub fn avoid_marker(&self) -> String {
        format!("[avoid F{id}: a{id} = {v}]", id = self.id, v = self.wrong)
    }
}

/// A named strategy with its success rate (before facts) and popularity.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    pub name: &'static str,
    pub success: f64,
    pub weight: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub id: String,
    pub answer: String,
    pub facts: Vec<Fact>,
    pub strategies: Vec<Strategy>,
}

const WORLD_SALT: u64 = 0x7A5_5EED;

impl Problem {
    /// Derives the problem `id`; `reference` overrides the derived answer.
    pub fn derive(id: &str, reference: Option<&str>, task: &TaskOptions) -> Problem {
        let h = hash_str(WORLD_SALT, id);
        let answer = match reference {
            Some(a) => a.to_owned(),
            None => (1000 + mix(h, 1) % 9000).to_string(),
        };
        let facts = (1..=task.facts)
            .map(|i| {
                let f = mix(h, 100 + u64::from(i));
                let value = 10 + f % 990;
                Fact {
                    id: i,
                    value,
                    wrong: value + 1 + (f >> 32) % 9,
                }
            })
            .collect();
        // A per-problem shuffle of the pool; strategy j gets the j-th success rate.
        let mut order: Vec<(u64, &'static str)> = STRATEGY_NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| (mix(h, 1000 + i as u64), *n))
            .collect();
        order.sort_unstable();
        let strategies = order
            .iter()
            .zip(task.strategy_success.iter().zip(&task.strategy_weights))
            .map(|((_, name), (s, w))| Strategy {
                name,
                success: *s,
                weight: *w,
            })
            .collect();
        Problem {
            id: id.to_owned(),
            answer,
            facts,
            strategies,
        }
    }

    /// A wrong answer near the right one (wrong answers cluster, as with real models).
    pub fn wrong_answer(&self, rng: &mut SimRng) -> String {
        let delta = 1 + rng.below(20) as i64;
        let delta = if rng.chance(0.5) { delta } else { -delta };
        match self.answer.trim().parse::<i64>() {
            Ok(v) => (v.saturating_add(delta)).to_string(),
            Err(_) => format!("{} + {}", self.answer.trim(), delta.abs()),
        }
    }

    /// Index of fact `id` (1-based) if it exists.
    pub fn fact(&self, id: u32) -> Option<&Fact> {
        self.facts.get(id.checked_sub(1)? as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivation_is_stable_and_varies_by_id() {
        let t = TaskOptions::default();
        let a = Problem::derive("p1", None, &t);
        assert_eq!(a, Problem::derive("p1", None, &t));
        let b = Problem::derive("p2", None, &t);
        assert_ne!(a.answer, b.answer);
        assert_eq!(a.facts.len(), 4);
        assert_eq!(a.strategies.len(), 4);
        let mut names: Vec<_> = a.strategies.iter().map(|s| s.name).collect();
        names.dedup();
        assert_eq!(names.len(), 4);
        assert!(a.facts.iter().all(|f| f.value != f.wrong));
        assert_eq!(Problem::derive("p1", Some("42"), &t).answer, "42");
    }

    #[test]
    fn wrong_answers_differ_from_the_reference() {
        let t = TaskOptions::default();
        let mut rng = SimRng::new(1);
        for (id, r) in [("a", None), ("b", Some("\\frac{1}{2}")), ("c", Some("-3"))] {
            let p = Problem::derive(id, r, &t);
            for _ in 0..50 {
                assert_ne!(p.wrong_answer(&mut rng), p.answer);
            }
        }
    }
}
