//! Which waiting call gets a free slot: the pool priority a coordinator gives each call
//! when it dispatches it (larger runs earlier; equal priorities run in submission order).
//! Priorities change only when calls run, never which calls are made or what they
//! return.
//!
//! The runtime knows roles only as opaque labels, listed in the order an iteration uses
//! them, and how many iterations a problem runs ([`StageOrder`]). A call's *step* is
//! `iteration × roles + position of its role in that list`; `seq` is its problem's
//! admission rank. The orders:
//!
//! - **oldest-problem-first**: `−seq`.
//! - **least-progress-first**: `−seq − 2³² × step`: the least advanced problems first,
//!   then the older.
//! - **latency-aware**: the estimated remaining critical path of the call's problem, in
//!   microseconds, from the latencies of calls already completed ([`latency`]):
//!
//!   ```text
//!   est(r)   = mean latency of the problem's own completed calls of role r,
//!              else the mean over every problem's completed calls of r,
//!              else unknown (costs 0)
//!   cost(s)  = max of est(r) over the roles r of stage s
//!   chain    = Σ over all stages s of cost(s)               (one iteration)
//!   estimate = Σ over stages s ≥ the call's stage of cost(s)
//!            + (T − iteration − 1) × chain
//!   priority = (roles still unknown) × 2⁵² + estimate
//!   ```
//!
//!   T is the problem's own iteration count when its job gives one
//!   (`ProblemJob::iterations`: the requests to a server each ask for theirs), else the
//!   runner's.
//!
//!   Why this formula. A problem ends when its dependency chain ends: each iteration runs
//!   its stages one after the other and the next iteration waits for the last stage, so
//!   what is left of a problem is the rest of this iteration plus T − iteration − 1 whole
//!   ones. Serving first the call whose problem has the longest way to go is
//!   critical-path list scheduling: the problem that would finish last starts its work
//!   earliest. With the true latencies (known only to `tmas bench schedule`'s oracle) it
//!   keeps nearly every slot busy where least-progress-first, which treats all problems
//!   alike, leaves the long ones running alone at the end (docs/benchmarks.md).
//!
//!   Latencies are estimated per problem first because a call's latency on a real server
//!   grows with its output length and a hard problem is long in every call, so its first
//!   replies predict the rest; the run-wide mean stands in for a role the problem has not
//!   completed yet. A stage costs the mean latency of its role, not of its slowest call:
//!   the ordering between problems is what counts, and a problem's mean grows with its
//!   difficulty as its slowest call does. Roles that run side by side in an iteration (a
//!   method's two bank updates) form one stage costing the longer of them; [`StageOrder`]
//!   is told which.
//!
//!   A role no call of the run has completed yet costs 0: there is no evidence for it,
//!   and a pool may exist for a role the method never calls. But an estimate made then
//!   leaves that stage out, so it is lower than one made later only for lack of
//!   evidence, and a priority is fixed when the call is dispatched. Ranked by estimate
//!   alone, the calls dispatched first (before the first replies, every problem's first
//!   calls) would wait behind everything dispatched after them, and the problems that
//!   started first would end last. So a priority first counts the roles still unknown at
//!   dispatch: that count only falls during a run, estimates made with the same roles
//!   known count the same stages and compare fairly, and calls from earlier in the run
//!   go first. A role the method never calls stays unknown for every call alike and
//!   changes no order.
//!
//!   Where a method's calls do not follow the stage order (a role called twice in one
//!   iteration), the estimate is a ranking of problems rather than a time.

pub mod latency;

use serde::{Deserialize, Serialize};

pub use latency::{ProblemLatencies, RunLatencies, StageOrder};

/// Order of calls waiting in a pool: `run.call_priority` in a config file and
/// `--call-priority` on a command line (the same names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CallPriority {
    /// Calls of earlier-admitted problems first: drives problems to completion, which
    /// frees their admission slots sooner.
    OldestProblemFirst,
    /// Calls of the problems that are least far along first — progress is (iteration,
    /// position of the call's role in the role list) — then of earlier-admitted problems.
    /// A problem held back by a slow call falls behind and then never queues behind
    /// problems that are further along, so with long-tailed latencies the unluckiest
    /// problem's dependency chain, not its waits, sets the end of the run.
    #[default]
    LeastProgressFirst,
    /// Calls of the problems with the longest estimated remaining chain first, estimated
    /// per role from the latencies of the problem's own completed calls (the mean over
    /// all problems until it has one). Pays off where latency is correlated within a
    /// problem (hard problems produce long outputs in every call), as on real servers.
    LatencyAware,
}

impl CallPriority {
    pub const ALL: [CallPriority; 3] = [
        CallPriority::OldestProblemFirst,
        CallPriority::LeastProgressFirst,
        CallPriority::LatencyAware,
    ];

    /// The name written in config files and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            CallPriority::OldestProblemFirst => "oldest-problem-first",
            CallPriority::LeastProgressFirst => "least-progress-first",
            CallPriority::LatencyAware => "latency-aware",
        }
    }

    /// The priority of a call of role `role` (its position in the role list) in
    /// iteration `iteration` of the problem admitted `seq`-th. `latencies` is read by the
    /// latency-aware order only.
    pub fn of_call(
        self,
        stages: &StageOrder,
        seq: u64,
        iteration: u32,
        role: usize,
        latencies: &ProblemLatencies,
    ) -> i64 {
        let older_first = i64::try_from(seq).map_or(i64::MIN / 2, |s| -s);
        match self {
            CallPriority::OldestProblemFirst => older_first,
            CallPriority::LeastProgressFirst => {
                let step = stages.step(iteration, role);
                // 2^32 per step dominates any admission rank below 2^32 problems.
                older_first.saturating_sub((1_i64 << 32).saturating_mul(step))
            }
            CallPriority::LatencyAware => latency_aware(
                latencies.unknown_roles(),
                stages.remaining_chain_us(iteration, role, |r| latencies.mean_us(r)),
            ),
        }
    }
}

/// Bits of a latency-aware priority that hold the estimate (µs; 2⁵² µs is 142 years).
const ESTIMATE_BITS: u32 = 52;

/// The latency-aware priority: first the roles still unknown when the call was
/// dispatched (more first), then the estimated remaining chain (longer first).
fn latency_aware(unknown_roles: usize, chain_us: f64) -> i64 {
    // 2¹¹ − 1 bands fit above the estimate in a positive i64.
    let band = i64::try_from(unknown_roles).map_or(2047, |n| n.min(2047));
    // `as` saturates (and maps NaN to 0).
    let estimate = (chain_us as i64).clamp(0, (1 << ESTIMATE_BITS) - 1);
    (band << ESTIMATE_BITS) | estimate
}

impl std::fmt::Display for CallPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Two roles in sequence, 5 iterations.
    fn two_stages() -> StageOrder {
        StageOrder::new(&[false, false], Some(5)).unwrap()
    }

    fn none_observed(stages: &StageOrder) -> ProblemLatencies {
        ProblemLatencies::new(Arc::new(RunLatencies::new(stages.roles())))
    }

    #[test]
    fn least_progress_first_puts_earlier_steps_ahead_of_older_problems() {
        let s = two_stages();
        let l = none_observed(&s);
        let p = |seq, iteration, role| {
            CallPriority::LeastProgressFirst.of_call(&s, seq, iteration, role, &l)
        };
        // A newer problem one step behind beats an older one …
        assert!(p(150, 0, 0) > p(3, 0, 1));
        assert!(p(150, 0, 1) > p(3, 1, 0));
        // … and at the same step the older problem goes first.
        assert!(p(3, 1, 0) > p(150, 1, 0));
        assert!(p(0, 49, 1) > p(1, 49, 1));
    }

    #[test]
    fn oldest_problem_first_ignores_progress() {
        let s = two_stages();
        let l = none_observed(&s);
        let p = |seq, iteration, role| {
            CallPriority::OldestProblemFirst.of_call(&s, seq, iteration, role, &l)
        };
        assert!(p(3, 4, 1) > p(150, 0, 0));
        assert_eq!(p(3, 4, 1), p(3, 0, 0));
    }

    #[test]
    fn latency_aware_serves_the_problem_with_the_longest_estimated_chain() {
        let s = two_stages();
        let run = Arc::new(RunLatencies::new(2));
        let mut slow = ProblemLatencies::new(run.clone());
        let mut fast = ProblemLatencies::new(run.clone());
        let aware = |l: &ProblemLatencies, iteration, role| {
            CallPriority::LatencyAware.of_call(&s, 0, iteration, role, l)
        };
        // Nothing observed: every call ties (submission order decides), in the top band.
        assert_eq!(aware(&slow, 0, 0), aware(&fast, 4, 1));
        let nothing_known = aware(&slow, 0, 0);
        slow.observe(0, 9_000_000);
        fast.observe(0, 1_000_000);
        // A call dispatched before anything was known stays ahead of every later one …
        assert!(nothing_known > aware(&slow, 0, 0));
        // … and from now on calls compare by their estimates: each problem's own
        // solution mean, the second role unknown (0) so far.
        let band = 1_i64 << ESTIMATE_BITS;
        assert_eq!(aware(&slow, 0, 0), band + 5 * 9_000_000);
        assert_eq!(aware(&fast, 0, 0), band + 5 * 1_000_000);
        // The slow problem goes first even though it is further along.
        assert!(aware(&slow, 2, 0) > aware(&fast, 0, 0));
        // The newer problem has no call of its own yet: the run-wide mean (5 s).
        let new = ProblemLatencies::new(run);
        assert_eq!(aware(&new, 0, 0), band + 5 * 5_000_000);
        // A later stage of the same iteration has less left.
        assert!(aware(&slow, 0, 1) < aware(&slow, 0, 0));
        // Once the second role is known too, estimates count both stages.
        slow.observe(1, 1_000_000);
        assert_eq!(aware(&slow, 0, 0), 5 * 10_000_000);
        assert_eq!(aware(&fast, 0, 0), 5 * 2_000_000);
    }

    #[test]
    fn latency_aware_priorities_stay_in_range() {
        assert_eq!(latency_aware(0, f64::NAN), 0);
        assert_eq!(latency_aware(0, -5.0), 0);
        assert_eq!(latency_aware(0, 1e300), (1 << ESTIMATE_BITS) - 1);
        assert!(latency_aware(1, 0.0) > latency_aware(0, 1e300));
        assert!(latency_aware(usize::MAX, 1e300) > 0);
        assert_eq!(latency_aware(usize::MAX, 0.0), latency_aware(2047, 0.0));
    }

    #[test]
    fn names_are_the_same_in_serde_display_and_on_the_command_line() {
        for p in CallPriority::ALL {
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json, serde_json::Value::String(p.as_str().into()));
            assert_eq!(p.to_string(), p.as_str());
            let back: CallPriority = serde_json::from_value(json).unwrap();
            assert_eq!(back, p);
            #[cfg(feature = "clap")]
            {
                use clap::ValueEnum;
                let v = p.to_possible_value().unwrap();
                assert_eq!(v.get_name(), p.as_str());
            }
        }
        // The names config files have always used.
        let parsed: Vec<CallPriority> = serde_json::from_str(
            r#"["oldest-problem-first", "least-progress-first", "latency-aware"]"#,
        )
        .unwrap();
        assert_eq!(parsed, CallPriority::ALL);
        assert_eq!(CallPriority::default(), CallPriority::LeastProgressFirst);
    }
}
