//! The longest per-problem dependency chain of a finished run, from the call latencies
//! its run store holds: the part of `tmas bench eval`'s lower bound on wall time that no
//! amount of parallelism removes.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;

/// One call's place in a problem's dependency graph and its latency.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTiming {
    pub problem: String,
    pub iteration: u32,
    pub role: String,
    pub candidate: Option<u32>,
    pub seconds: f64,
}

/// Reads every call's client-measured latency from the run store.
fn read_timings(db: &Path) -> anyhow::Result<Vec<CallTiming>> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open run store {}", db.display()))?;
    let mut stmt = conn
        .prepare("SELECT problem_id, iteration, role, candidate, latency_ms FROM calls WHERE latency_ms IS NOT NULL")
        .with_context(|| format!("{}: reading calls", db.display()))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(CallTiming {
                problem: r.get(0)?,
                iteration: r.get(1)?,
                role: r.get(2)?,
                candidate: r.get(3)?,
                seconds: r.get::<_, i64>(4)? as f64 / 1000.0,
            })
        })
        .with_context(|| format!("{}: reading calls", db.display()))?;
    rows.collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: reading calls", db.display()))
}

/// [`longest_chain`] over the calls stored in the run store `db`.
pub fn longest_chain_seconds(db: &Path) -> anyhow::Result<f64> {
    Ok(longest_chain(&read_timings(db)?))
}

/// The longest per-problem dependency chain: per iteration, the slowest candidate path
/// (solution, then its slowest verification, then its summary) followed by the slower of
/// the two bank calls; iterations add up. Verifications of a candidate count as parallel
/// (re-asks of unparseable scores, rare without faults, are not chained).
pub fn longest_chain(calls: &[CallTiming]) -> f64 {
    #[derive(Default)]
    struct Cand {
        solution: f64,
        verification: f64,
        summary: f64,
    }
    #[derive(Default)]
    struct Iter {
        candidates: HashMap<u32, Cand>,
        banks: f64,
    }
    let mut problems: HashMap<&str, HashMap<u32, Iter>> = HashMap::new();
    for c in calls {
        let it = problems
            .entry(&c.problem)
            .or_default()
            .entry(c.iteration)
            .or_default();
        let max = |slot: &mut f64| *slot = slot.max(c.seconds);
        match (c.role.as_str(), c.candidate) {
            ("experience" | "guideline", _) => max(&mut it.banks),
            (role, Some(k)) => {
                let cand = it.candidates.entry(k).or_default();
                match role {
                    "solution" => max(&mut cand.solution),
                    "verification" => max(&mut cand.verification),
                    "summary" => max(&mut cand.summary),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    problems
        .values()
        .map(|iters| {
            iters
                .values()
                .map(|it| {
                    let slowest = it
                        .candidates
                        .values()
                        .map(|c| c.solution + c.verification + c.summary)
                        .fold(0.0, f64::max);
                    slowest + it.banks
                })
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(problem: &str, it: u32, role: &str, cand: Option<u32>, s: f64) -> CallTiming {
        CallTiming {
            problem: problem.into(),
            iteration: it,
            role: role.into(),
            candidate: cand,
            seconds: s,
        }
    }

    #[test]
    fn chain_takes_the_slowest_candidate_path_plus_the_slower_bank_per_iteration() {
        let calls = vec![
            // iteration 0: candidate 0 = 1 + 3 + 1 = 5, candidate 1 = 2 + 1 + 1 = 4; banks 2
            call("p", 0, "solution", Some(0), 1.0),
            call("p", 0, "verification", Some(0), 3.0),
            call("p", 0, "verification", Some(0), 0.5),
            call("p", 0, "summary", Some(0), 1.0),
            call("p", 0, "solution", Some(1), 2.0),
            call("p", 0, "verification", Some(1), 1.0),
            call("p", 0, "summary", Some(1), 1.0),
            call("p", 0, "experience", None, 2.0),
            call("p", 0, "guideline", None, 1.5),
            // iteration 1: 1 + 1 + 1 + 1 = 4
            call("p", 1, "solution", Some(0), 1.0),
            call("p", 1, "verification", Some(0), 1.0),
            call("p", 1, "summary", Some(0), 1.0),
            call("p", 1, "guideline", None, 1.0),
            // another problem, shorter
            call("q", 0, "solution", Some(0), 3.0),
        ];
        assert!((longest_chain(&calls) - 11.0).abs() < 1e-9);
        assert_eq!(longest_chain(&[]), 0.0);
    }
}
