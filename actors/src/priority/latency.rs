//! The latency-aware order's estimator: per-role mean latencies of completed calls, per
//! problem ([`ProblemLatencies`], owned by the problem's coordinator) and over the whole
//! run ([`RunLatencies`], shared by every coordinator of one runner), and the remaining
//! chain they give ([`StageOrder::remaining_chain_us`]). The formula and why it is this
//! one are in the parent module's doc.
//!
//! A latency here is the time the endpoint took for the call's successful attempt
//! ([`tmas_client::wire::ChatResponse::latency_ms`]), not the time the call waited for a slot
//! in this process: the wait depends on the order itself, the server's time does not.
//! Failed calls carry no latency and are not counted.
//!
//! `tmas bench schedule`'s model uses these same types, so the order it measures is the
//! order that runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the call orders know of an iteration: the roles in the order an iteration uses
/// them (a call's role is its position in that list), which of them run side by side,
/// and how many iterations a problem runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageOrder {
    /// Per role: its stage. Nondecreasing, starting at 0; roles side by side share one.
    stage_of: Box<[u32]>,
    stages: u32,
    iterations: Option<u32>,
}

impl StageOrder {
    /// `beside_previous[i]`: role `i` runs side by side with role `i − 1` (same stage).
    /// `iterations`: how many iterations each problem runs, when known.
    pub fn new(beside_previous: &[bool], iterations: Option<u32>) -> Result<Self, String> {
        if beside_previous.first() == Some(&true) {
            return Err("the first role has no previous role to run beside".into());
        }
        let mut stage = 0u32;
        let mut stage_of = Vec::with_capacity(beside_previous.len());
        for (i, &beside) in beside_previous.iter().enumerate() {
            if i > 0 && !beside {
                stage += 1;
            }
            stage_of.push(stage);
        }
        let stages = if stage_of.is_empty() { 0 } else { stage + 1 };
        Ok(Self {
            stage_of: stage_of.into(),
            stages,
            iterations,
        })
    }

    /// The same roles and stages, for a problem that runs `iterations`.
    pub fn for_iterations(&self, iterations: u32) -> Self {
        Self {
            iterations: Some(iterations),
            ..self.clone()
        }
    }

    /// Number of roles.
    pub fn roles(&self) -> usize {
        self.stage_of.len()
    }

    /// Iterations a problem runs, when known.
    pub fn iterations(&self) -> Option<u32> {
        self.iterations
    }

    /// `iteration × roles + role`: how far along a call is in its problem (the
    /// least-progress-first order). Roles side by side keep their own positions here.
    pub fn step(&self, iteration: u32, role: usize) -> i64 {
        let roles = i64::try_from(self.roles()).unwrap_or(i64::MAX);
        let role = i64::try_from(role).unwrap_or(i64::MAX);
        i64::from(iteration)
            .saturating_mul(roles)
            .saturating_add(role)
    }

    /// The estimated remaining critical path (µs) of a problem whose call of role `role`
    /// in iteration `iteration` is being dispatched, given each role's estimated latency
    /// (`mean_us`, `None` while unknown; an unknown role costs 0): the rest of this
    /// iteration from the call's stage on, plus every later iteration. Unknown iterations
    /// count as none later.
    pub fn remaining_chain_us(
        &self,
        iteration: u32,
        role: usize,
        mean_us: impl Fn(usize) -> Option<f64>,
    ) -> f64 {
        let mut cost = vec![0.0_f64; self.stages as usize];
        for (r, &s) in self.stage_of.iter().enumerate() {
            if let Some(m) = mean_us(r) {
                let c = &mut cost[s as usize];
                *c = c.max(m);
            }
        }
        let from = self.stage_of.get(role).map_or(cost.len(), |&s| s as usize);
        let this: f64 = cost[from..].iter().sum();
        let chain: f64 = cost.iter().sum();
        let later = self
            .iterations
            .map_or(0, |t| t.saturating_sub(iteration.saturating_add(1)));
        this + f64::from(later) * chain
    }
}

/// Sum and count of latencies of one role.
#[derive(Debug, Default)]
struct Tally {
    sum_us: AtomicU64,
    calls: AtomicU64,
}

/// Per role: the latencies of every completed call of the run, for the mean a problem
/// falls back to before it has completed a call of that role. One per runner, shared by
/// its coordinators (not process-wide: two runs in one process learn separately).
///
/// Sum and count are two relaxed atomics: a reader racing a writer may see one updated
/// and not the other, a mean off by one call, which only shifts a priority a little.
#[derive(Debug)]
pub struct RunLatencies {
    roles: Box<[Tally]>,
}

impl RunLatencies {
    pub fn new(roles: usize) -> Self {
        Self {
            roles: (0..roles).map(|_| Tally::default()).collect(),
        }
    }

    fn observe(&self, role: usize, latency_us: u64) {
        if let Some(t) = self.roles.get(role) {
            t.sum_us.fetch_add(latency_us, Ordering::Relaxed);
            t.calls.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Roles of which no call of the run has completed yet.
    pub fn unknown_roles(&self) -> usize {
        self.roles
            .iter()
            .filter(|t| t.calls.load(Ordering::Relaxed) == 0)
            .count()
    }

    /// Mean latency (µs) of the run's completed calls of `role`; `None` before the first.
    pub fn mean_us(&self, role: usize) -> Option<f64> {
        let t = self.roles.get(role)?;
        let calls = t.calls.load(Ordering::Relaxed);
        (calls > 0).then(|| t.sum_us.load(Ordering::Relaxed) as f64 / calls as f64)
    }
}

/// One problem's per-role latencies, with the run's for roles it has not completed yet.
#[derive(Debug)]
pub struct ProblemLatencies {
    /// Per role: (sum µs, calls).
    own: Box<[(u64, u64)]>,
    run: Arc<RunLatencies>,
}

impl ProblemLatencies {
    pub fn new(run: Arc<RunLatencies>) -> Self {
        Self {
            own: vec![(0, 0); run.roles.len()].into(),
            run,
        }
    }

    /// A call of `role` completed in `latency_us`: counted for this problem and the run.
    pub fn observe(&mut self, role: usize, latency_us: u64) {
        if let Some((sum, calls)) = self.own.get_mut(role) {
            *sum = sum.saturating_add(latency_us);
            *calls += 1;
        }
        self.run.observe(role, latency_us);
    }

    /// Roles of which no call of the run (this problem's or another's) has completed yet:
    /// the stages an estimate made now leaves out.
    pub fn unknown_roles(&self) -> usize {
        self.run.unknown_roles()
    }

    /// The estimated latency (µs) of a call of `role`: this problem's mean, else the run's;
    /// `None` before any call of the role has completed.
    pub fn mean_us(&self, role: usize) -> Option<f64> {
        match self.own.get(role) {
            Some(&(sum, calls)) if calls > 0 => Some(sum as f64 / calls as f64),
            _ => self.run.mean_us(role),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TMAS-like: solution, verification, summary, then two bank updates side by side.
    fn tmas_like(iterations: u32) -> StageOrder {
        StageOrder::new(&[false, false, false, false, true], Some(iterations)).unwrap()
    }

    #[test]
    fn stages_group_roles_side_by_side() {
        let s = tmas_like(5);
        assert_eq!(s.roles(), 5);
        assert_eq!(&*s.stage_of, &[0, 1, 2, 3, 3]);
        assert!(StageOrder::new(&[true], None).is_err());
        let empty = StageOrder::new(&[], Some(3)).unwrap();
        assert_eq!(empty.remaining_chain_us(0, 0, |_| Some(1.0)), 0.0);
        // Steps count roles, not stages: the guideline stays one step after experience.
        assert_eq!(s.step(0, 4), 4);
        assert_eq!(s.step(2, 1), 11);
    }

    #[test]
    fn the_remaining_chain_is_the_rest_of_this_iteration_plus_every_later_one() {
        let s = tmas_like(5);
        // 1, 2, 3 s, then bank updates of 4 and 6 s side by side: 12 s per iteration.
        let mean = |r: usize| Some([1.0, 2.0, 3.0, 4.0, 6.0][r] * 1e6);
        let chain = |iteration, role| s.remaining_chain_us(iteration, role, mean) / 1e6;
        assert_eq!(chain(0, 0), 60.0);
        assert_eq!(chain(0, 1), 11.0 + 48.0);
        // Either bank update has the longer of the two left.
        assert_eq!(chain(4, 3), 6.0);
        assert_eq!(chain(4, 4), 6.0);
        assert_eq!(chain(4, 2), 9.0);
        // A strategy that runs past the iterations it was announced with has no later ones.
        assert_eq!(chain(9, 0), 12.0);
        // Unknown iterations: only the rest of this one.
        let open = StageOrder::new(&[false, false, false, false, true], None).unwrap();
        assert_eq!(open.remaining_chain_us(0, 0, mean), 12e6);
        // A role not known yet costs nothing.
        let partly = |r: usize| (r == 1).then_some(2e6);
        assert_eq!(s.remaining_chain_us(0, 0, partly), 10e6);
        assert_eq!(s.remaining_chain_us(0, 2, partly), 8e6);
        assert_eq!(s.remaining_chain_us(0, 0, |_| None), 0.0);
    }

    #[test]
    fn a_problem_uses_its_own_mean_then_the_runs_then_zero() {
        let run = Arc::new(RunLatencies::new(3));
        let mut a = ProblemLatencies::new(run.clone());
        let mut b = ProblemLatencies::new(run.clone());
        assert_eq!(a.mean_us(0), None);
        assert_eq!(run.mean_us(0), None);
        assert_eq!(a.unknown_roles(), 3);
        a.observe(0, 3_000);
        a.observe(0, 5_000);
        b.observe(0, 10_000);
        b.observe(1, 7_000);
        // Its own mean first …
        assert_eq!(a.mean_us(0), Some(4_000.0));
        assert_eq!(b.mean_us(0), Some(10_000.0));
        // … the run's mean for a role it has not completed …
        assert_eq!(a.mean_us(1), Some(7_000.0));
        assert_eq!(run.mean_us(0), Some(6_000.0));
        // … and nothing for a role no call has completed.
        assert_eq!(a.mean_us(2), None);
        assert_eq!((a.unknown_roles(), b.unknown_roles()), (1, 1));
        // A role outside the list is ignored, not a panic.
        a.observe(9, 1);
        assert_eq!(a.mean_us(9), None);
    }

    #[test]
    fn two_runs_learn_separately() {
        let (one, two) = (
            Arc::new(RunLatencies::new(1)),
            Arc::new(RunLatencies::new(1)),
        );
        ProblemLatencies::new(one.clone()).observe(0, 8_000);
        assert_eq!(one.mean_us(0), Some(8_000.0));
        assert_eq!(two.mean_us(0), None);
        assert_eq!(ProblemLatencies::new(two).mean_us(0), None);
    }
}
