//! The longest per-problem dependency chain of a finished run, from the call latencies
//! its run store holds: the part of `tmas bench eval`'s lower bound on wall time that no
//! amount of parallelism removes.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;

use crate::role::Role;

/// One call's place in a problem's dependency graph and its latency.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTiming {
    pub problem: String,
    pub iteration: u32,
    pub role: String,
    pub candidate: Option<u32>,
    pub seconds: f64,
    /// When the call completed (ms since the Unix epoch, the store's clock).
    pub completed_at_ms: i64,
}

/// The problem that finished last, and whether its own chain or waiting made it last.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LastProblem {
    pub problem: String,
    /// First call's start, seconds after the run's first call started.
    pub start_s: f64,
    /// Last call's end, seconds after the run's first call started.
    pub end_s: f64,
    /// Its own dependency chain (see `longest_chain`).
    pub chain_s: f64,
}

impl LastProblem {
    /// Time it spent neither in a call of its chain nor before its start: queueing for
    /// slots (and the orchestrator's own handling between calls).
    pub fn waited_s(&self) -> f64 {
        (self.end_s - self.start_s - self.chain_s).max(0.0)
    }
}

/// Reads every call's client-measured latency from the run store.
fn read_timings(db: &Path) -> anyhow::Result<Vec<CallTiming>> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open run store {}", db.display()))?;
    let mut stmt = conn
        .prepare(
            "SELECT problem_id, iteration, role, candidate, latency_ms, completed_at_ms \
             FROM calls WHERE latency_ms IS NOT NULL",
        )
        .with_context(|| format!("{}: reading calls", db.display()))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(CallTiming {
                problem: r.get(0)?,
                iteration: r.get(1)?,
                role: r.get(2)?,
                candidate: r.get(3)?,
                seconds: r.get::<_, i64>(4)? as f64 / 1000.0,
                completed_at_ms: r.get(5)?,
            })
        })
        .with_context(|| format!("{}: reading calls", db.display()))?;
    rows.collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: reading calls", db.display()))
}

/// `longest_chain` and [`last_problem`] over the calls stored in the run store `db`.
pub fn chain_figures(db: &Path) -> anyhow::Result<(f64, Option<LastProblem>)> {
    let calls = read_timings(db)?;
    let chains = problem_chains(&calls);
    let longest = chains.values().copied().fold(0.0, f64::max);
    Ok((longest, last_problem(&calls, &chains)))
}

/// The problem whose last call ended last, with its start, end and own chain (`chains`:
/// [`problem_chains`] of the same calls).
pub fn last_problem(calls: &[CallTiming], chains: &HashMap<&str, f64>) -> Option<LastProblem> {
    let start_ms = |c: &CallTiming| c.completed_at_ms - (c.seconds * 1000.0).round() as i64;
    let t0 = calls.iter().map(start_ms).min()?;
    let mut spans: HashMap<&str, (i64, i64)> = HashMap::new();
    for c in calls {
        let span = spans.entry(&c.problem).or_insert((i64::MAX, i64::MIN));
        span.0 = span.0.min(start_ms(c));
        span.1 = span.1.max(c.completed_at_ms);
    }
    let (&problem, &(start, end)) = spans.iter().max_by_key(|(id, (_, end))| (*end, *id))?;
    let chain = chains.get(problem).copied().unwrap_or(0.0);
    Some(LastProblem {
        problem: problem.to_owned(),
        start_s: (start - t0) as f64 / 1000.0,
        end_s: (end - t0) as f64 / 1000.0,
        chain_s: chain,
    })
}

/// The longest per-problem dependency chain: per iteration, the slowest candidate path
/// (solution, then its slowest verification, then its summary) followed by the slower of
/// the two bank calls; iterations add up. Verifications of a candidate count as parallel
/// (re-asks of unparseable scores, rare without faults, are not chained).
#[cfg(test)]
pub fn longest_chain(calls: &[CallTiming]) -> f64 {
    problem_chains(calls).into_values().fold(0.0, f64::max)
}

/// Each problem's dependency chain (see `longest_chain`).
pub fn problem_chains(calls: &[CallTiming]) -> HashMap<&str, f64> {
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
        match (Role::from_label(&c.role), c.candidate) {
            (Some(Role::Experience | Role::Guideline), _) => max(&mut it.banks),
            (Some(role), Some(k)) => {
                let cand = it.candidates.entry(k).or_default();
                match role {
                    Role::Solution => max(&mut cand.solution),
                    Role::Verification => max(&mut cand.verification),
                    Role::Summary => max(&mut cand.summary),
                    // Not on a TMAS candidate's chain.
                    Role::Experience
                    | Role::Guideline
                    | Role::Judge
                    | Role::GuidelineJudge
                    | Role::Critique
                    | Role::Extraction
                    | Role::Embedding => {}
                }
            }
            _ => {}
        }
    }
    problems
        .into_iter()
        .map(|(problem, iters)| {
            let chain = iters
                .values()
                .map(|it| {
                    let slowest = it
                        .candidates
                        .values()
                        .map(|c| c.solution + c.verification + c.summary)
                        .fold(0.0, f64::max);
                    slowest + it.banks
                })
                .sum::<f64>();
            (problem, chain)
        })
        .collect()
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
            completed_at_ms: 0,
        }
    }

    fn timed(problem: &str, role: &str, start_ms: i64, seconds: f64) -> CallTiming {
        CallTiming {
            completed_at_ms: start_ms + (seconds * 1000.0) as i64,
            ..call(problem, 0, role, Some(0), seconds)
        }
    }

    #[test]
    fn last_problem_is_the_one_ending_last_with_its_wait() {
        let calls = vec![
            // p: starts at 0, chain 1 + 1 = 2 s, ends at 2 s.
            timed("p", "solution", 1_000, 1.0),
            timed("p", "verification", 2_000, 1.0),
            // q: starts at 1 s, chain 1 + 1 = 2 s, but its verification waited 3 s.
            timed("q", "solution", 2_000, 1.0),
            timed("q", "verification", 6_000, 1.0),
        ];
        let last = last_problem(&calls, &problem_chains(&calls)).expect("two problems");
        assert_eq!(last.problem, "q");
        assert!((last.start_s - 1.0).abs() < 1e-9, "{last:?}");
        assert!((last.end_s - 6.0).abs() < 1e-9, "{last:?}");
        assert!((last.chain_s - 2.0).abs() < 1e-9, "{last:?}");
        assert!((last.waited_s() - 3.0).abs() < 1e-9, "{last:?}");
        assert_eq!(last_problem(&[], &HashMap::new()), None);
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
