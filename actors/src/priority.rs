//! Which waiting call gets a free slot: the pool priority a problem's calls carry.
//!
//! A call's priority is `base − per_step × step` (larger runs earlier), where `step` is
//! the call's progress within its problem (`iteration × stages + stage`, stage = the
//! role's place in the role list). The coordinator computes it at each dispatch.

use serde::{Deserialize, Serialize};

/// Order of calls waiting in a pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobPriority {
    /// Submission order.
    #[default]
    Fifo,
    /// Calls of earlier-admitted problems first: drives problems to completion, which
    /// frees their admission slots sooner.
    OldestProblemFirst,
    /// Calls of the problems that are least far along first — progress is (iteration,
    /// position of the call's role in the role list) — then of earlier-admitted problems.
    /// A problem held back by a slow call falls behind and then never queues behind
    /// problems that are further along, so with long-tailed latencies the unluckiest
    /// problem's dependency chain, not its waits, sets the end of the run
    /// (`tmas bench schedule`, docs/benchmarks.md).
    LeastProgressFirst,
}

impl JobPriority {
    /// (base priority of the problem admitted `seq`-th, weight subtracted per step of
    /// progress).
    pub fn for_problem(self, seq: u64) -> (i64, i64) {
        let older_first = i64::try_from(seq).map_or(i64::MIN / 2, |s| -s);
        match self {
            JobPriority::Fifo => (0, 0),
            JobPriority::OldestProblemFirst => (older_first, 0),
            // 2^32 per step dominates any admission rank below 2^32 problems.
            JobPriority::LeastProgressFirst => (older_first, 1 << 32),
        }
    }

    /// The priority of a call `step` steps into the problem admitted `seq`-th.
    pub fn of_call(self, seq: u64, step: i64) -> i64 {
        let (base, per_step) = self.for_problem(seq);
        at_step(base, per_step, step)
    }
}

/// `base − per_step × step`, saturating: the priority of a call `step` steps into a
/// problem whose calls start at `base` (what the coordinator computes at each dispatch).
pub fn at_step(base: i64, per_step: i64, step: i64) -> i64 {
    base.saturating_sub(per_step.saturating_mul(step))
}

#[cfg(test)]
mod tests {
    use super::JobPriority;

    #[test]
    fn least_progress_first_puts_earlier_steps_ahead_of_older_problems() {
        let p = JobPriority::LeastProgressFirst;
        // A newer problem one step behind beats an older one …
        assert!(p.of_call(150, 0) > p.of_call(3, 1));
        // … and at the same step the older problem goes first.
        assert!(p.of_call(3, 2) > p.of_call(150, 2));
        assert!(p.of_call(0, 99) > p.of_call(1, 99));
    }

    #[test]
    fn oldest_problem_first_ignores_iterations_and_fifo_is_flat() {
        let p = JobPriority::OldestProblemFirst;
        assert!(p.of_call(3, 4) > p.of_call(150, 0));
        assert_eq!(
            JobPriority::Fifo.of_call(3, 4),
            JobPriority::Fifo.of_call(150, 0)
        );
    }
}
