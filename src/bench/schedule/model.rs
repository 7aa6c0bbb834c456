//! A zero-overhead discrete-event model of the runtime's scheduling: TMAS's call graph
//! per problem, the runner's admission policy and call priority, one pool per role and a
//! global cap on calls in flight. Calls cost nothing but their drawn latency, so the
//! model's utilization is the ceiling a policy can reach on a workload — what is left
//! between it and `tmas bench eval` is the orchestrator's own cost.
//!
//! It uses the runtime's own policy code ([`Admission::admits`], [`CallPriority::of_call`]
//! with the runtime's latency estimator, the pools' [`JobQueue`]) so a policy measured
//! here is the policy that runs. Every call's latency is drawn from its identity
//! (problem, iteration, role, candidate, slot), not from the order calls are issued in,
//! so every policy meets exactly the same latencies (common random numbers), and
//! [`CallOrder::CriticalPath`] can know them in advance.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use tmas_actors::pool::JobQueue;
use tmas_actors::priority::{ProblemLatencies, RunLatencies, StageOrder};
use tmas_actors::runner::{Admission, CallPriority};

use crate::method::TmasStrategy;
use crate::role::{PerRole, Role};
use crate::sim::latency::LatencyModel;
use crate::sim::rng::SimRng;

/// TMAS's roles in the runner's order: a call's stage is the position of its role here,
/// as in a run's pools (`engine::runner_settings`).
const ROLES: &[Role] = TmasStrategy::ROLES;

/// The stage of `role`'s calls (the runtime's index for its latencies).
fn stage(role: Role) -> usize {
    ROLES
        .iter()
        .position(|&r| r == role)
        .unwrap_or_else(|| unreachable!("{role} is not in TMAS's call graph"))
}

/// Where calls wait for the global cap once a role pool's worker has taken them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    /// First come, first served (a plain semaphore).
    Fifo,
    /// Highest call priority first (ties: first come).
    Priority,
}

/// How calls waiting in the pools (and at a priority gate) are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOrder {
    /// The runtime's call priority, computed by the runtime's code. Its latency-aware
    /// order learns from the latencies of completed calls exactly as a coordinator does
    /// (`tmas_actors::priority`).
    Runtime(CallPriority),
    /// Clairvoyant: longest remaining critical path first — the call's own latency plus
    /// the longest dependency chain after it in its problem, computed from latencies no
    /// runtime can know before the call ends (classic critical-path list scheduling).
    /// Not a policy; an estimate of what perfect foresight of every latency would buy,
    /// which bounds how far any online policy could get above the runtime's.
    CriticalPath,
}

/// The workload and the policies.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub problems: usize,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    /// Global cap on calls in flight.
    pub cap: usize,
    /// Workers of every role pool.
    pub pool_size: usize,
    pub admission: Admission,
    pub priority: CallOrder,
    pub gate: Gate,
    pub latency: LatencyModel,
    /// σ of a per-problem difficulty scaling every latency of the problem (with a
    /// per-(problem, role) factor of σ 0.2), drawn as the simulator's server model draws
    /// output lengths; 0 = independent draws per call.
    pub difficulty_sigma: f64,
    pub seed: u64,
}

/// What the model measured (seconds of model time).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub calls: u64,
    pub wall_secs: f64,
    /// Sum of all calls' latencies.
    pub busy_secs: f64,
    /// Longest per-problem dependency chain (as `tmas bench eval` computes it).
    pub chain_secs: f64,
    /// busy ÷ (cap × wall).
    pub utilization: f64,
    /// max(busy ÷ cap, chain).
    pub bound_secs: f64,
    pub wall_over_bound: f64,
    /// busy ÷ (cap × chain) when the chain binds: no schedule can do better.
    pub best_utilization: f64,
}

/// One call waiting or running.
#[derive(Debug, Clone, Copy)]
struct Call {
    problem: usize,
    role: Role,
    candidate: u32,
    priority: i64,
    latency: f64,
}

/// Per candidate of the current iteration.
#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    verifications_left: u32,
    solution_secs: f64,
    slowest_verification_secs: f64,
}

struct ProblemState {
    seq: u64,
    iteration: u32,
    candidates: Vec<Candidate>,
    candidates_left: u32,
    banks_left: u32,
    slowest_candidate_secs: f64,
    slowest_bank_secs: f64,
    chain_secs: f64,
    /// Every call's latency, by [`CallIndex::of`].
    latencies: Vec<f64>,
    /// Every call's remaining critical path ([`CallOrder::CriticalPath`] only).
    critical_paths: Vec<f64>,
    /// Latencies of the problem's completed calls, per role (with the run's): what the
    /// latency-aware order knows.
    observed: ProblemLatencies,
    done: bool,
}

/// Where a call's latency (and critical path) lies in its problem's tables: per
/// iteration, the N solutions, the N × M verifications, the N summaries, then the two
/// bank calls.
#[derive(Debug, Clone, Copy)]
struct CallIndex {
    n: usize,
    m: usize,
}

impl CallIndex {
    fn per_iteration(self) -> usize {
        2 * self.n + self.n * self.m + 2
    }

    fn of(self, iteration: u32, role: Role, candidate: u32, slot: u32) -> usize {
        let (c, v) = (candidate as usize, slot as usize);
        let within = match role {
            Role::Solution => c,
            Role::Verification => self.n + c * self.m + v,
            Role::Summary => self.n + self.n * self.m + c,
            Role::Experience => 2 * self.n + self.n * self.m,
            // The guideline update: TMAS calls no other role.
            _ => 2 * self.n + self.n * self.m + 1,
        };
        iteration as usize * self.per_iteration() + within
    }

    /// The role of the call at `within` (an index inside one iteration).
    fn role_at(self, within: usize) -> Role {
        match within {
            w if w < self.n => Role::Solution,
            w if w < self.n + self.n * self.m => Role::Verification,
            w if w < 2 * self.n + self.n * self.m => Role::Summary,
            w if w == 2 * self.n + self.n * self.m => Role::Experience,
            _ => Role::Guideline,
        }
    }
}

/// A running call's end: earliest first (`id` breaks ties by dispatch order).
struct Finish {
    at: f64,
    id: u64,
    call: Call,
}

impl PartialEq for Finish {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Finish {}
impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Finish {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at
            .total_cmp(&other.at)
            .then_with(|| self.id.cmp(&other.id))
    }
}

struct Model<'a> {
    s: &'a Scenario,
    index: CallIndex,
    now: f64,
    /// Calls dispatched so far (breaks ties between equal finish times).
    dispatched: u64,
    /// Per role: calls submitted, waiting for one of the pool's workers (the pool's own
    /// queue type).
    pools: PerRole<JobQueue<Call>>,
    /// Per role: workers holding a call (waiting at the gate or running).
    busy_workers: PerRole<usize>,
    gate: GateQueue,
    running: BinaryHeap<Reverse<Finish>>,
    in_flight: usize,
    outstanding: u64,
    problems: Vec<ProblemState>,
    admitted: usize,
    active: usize,
    busy_secs: f64,
    calls: u64,
    /// The runtime's stage order for TMAS's roles.
    stages: StageOrder,
    /// Per stage: every completed call's latency.
    observed: Arc<RunLatencies>,
}

/// Calls holding a pool worker, waiting for the global cap.
enum GateQueue {
    Fifo(VecDeque<Call>),
    Priority(JobQueue<Call>),
}

impl GateQueue {
    fn push(&mut self, call: Call) {
        match self {
            GateQueue::Fifo(q) => q.push_back(call),
            GateQueue::Priority(q) => {
                q.push(call.priority, call);
            }
        }
    }

    fn pop(&mut self) -> Option<Call> {
        match self {
            GateQueue::Fifo(q) => q.pop_front(),
            GateQueue::Priority(q) => q.pop().map(|(_, call)| call),
        }
    }
}

/// Runs the scenario to the end.
pub fn simulate(s: &Scenario) -> Outcome {
    let mut model = Model::new(s);
    model.run();
    let cap = s.cap.max(1) as f64;
    let chain = model
        .problems
        .iter()
        .map(|p| p.chain_secs)
        .fold(0.0, f64::max);
    let wall = model.now;
    let bound = (model.busy_secs / cap).max(chain);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Outcome {
        calls: model.calls,
        wall_secs: wall,
        busy_secs: model.busy_secs,
        chain_secs: chain,
        utilization: ratio(model.busy_secs, cap * wall),
        bound_secs: bound,
        wall_over_bound: ratio(wall, bound),
        best_utilization: ratio(model.busy_secs, cap * bound),
    }
}

impl<'a> Model<'a> {
    fn new(s: &'a Scenario) -> Self {
        let beside: Vec<bool> = ROLES.iter().map(|r| r.runs_beside_previous()).collect();
        Model {
            s,
            index: CallIndex {
                n: s.n as usize,
                m: s.m as usize,
            },
            now: 0.0,
            dispatched: 0,
            pools: PerRole::from_fn(|_| JobQueue::default()),
            busy_workers: PerRole::from_fn(|_| 0),
            gate: match s.gate {
                Gate::Fifo => GateQueue::Fifo(VecDeque::new()),
                Gate::Priority => GateQueue::Priority(JobQueue::default()),
            },
            running: BinaryHeap::new(),
            in_flight: 0,
            outstanding: 0,
            problems: Vec::with_capacity(s.problems),
            admitted: 0,
            active: 0,
            busy_secs: 0.0,
            calls: 0,
            // TMAS's two bank updates run side by side, as a run tells the runtime.
            stages: StageOrder::new(&beside, Some(s.iterations))
                .unwrap_or_else(|e| unreachable!("TMAS's stage order is valid: {e}")),
            observed: Arc::new(RunLatencies::new(ROLES.len())),
        }
    }

    fn run(&mut self) {
        loop {
            self.admit();
            self.dispatch();
            let Some(Reverse(Finish { at, call, .. })) = self.running.pop() else {
                break;
            };
            self.now = at;
            self.in_flight -= 1;
            self.outstanding -= 1;
            self.busy_workers[call.role] -= 1;
            self.on_done(call);
        }
    }

    fn admit(&mut self) {
        while self.admitted < self.s.problems {
            let waiting = self.s.problems - self.admitted;
            if !self
                .s
                .admission
                .admits(self.active, self.outstanding, Some(waiting))
            {
                break;
            }
            let seq = self.admitted as u64;
            self.admitted += 1;
            self.active += 1;
            let latencies = self.draw_latencies(seq);
            let critical_paths = match self.s.priority {
                CallOrder::CriticalPath => self.critical_paths(&latencies),
                CallOrder::Runtime(_) => Vec::new(),
            };
            self.problems.push(ProblemState {
                seq,
                iteration: 0,
                candidates: Vec::new(),
                candidates_left: 0,
                banks_left: 0,
                slowest_candidate_secs: 0.0,
                slowest_bank_secs: 0.0,
                chain_secs: 0.0,
                latencies,
                critical_paths,
                observed: ProblemLatencies::new(self.observed.clone()),
                done: false,
            });
            self.start_iteration(self.problems.len() - 1);
        }
    }

    /// The latency of every call of the problem admitted `seq`-th, each drawn from the
    /// call's identity.
    fn draw_latencies(&self, seq: u64) -> Vec<f64> {
        let per_problem = crate::sim::rng::mix(self.s.seed, seq);
        let total = self.index.per_iteration() * self.s.iterations as usize;
        let factors = self.role_factors(seq);
        let per_iteration = self.index.per_iteration();
        (0..total as u64)
            .map(|i| {
                let mut rng = SimRng::new(crate::sim::rng::mix(per_problem, i));
                let role = self.index.role_at(i as usize % per_iteration);
                self.s.latency.draw(&mut rng).as_secs_f64() * factors[role]
            })
            .collect()
    }

    /// The problem's latency factor per role (all 1 without difficulty).
    fn role_factors(&self, seq: u64) -> PerRole<f64> {
        if self.s.difficulty_sigma <= 0.0 {
            return PerRole::from_fn(|_| 1.0);
        }
        let model = crate::sim::server_model::ServerModelOptions {
            difficulty_sigma: self.s.difficulty_sigma,
            ..Default::default()
        };
        // Named like `tmas bench eval`'s problems.
        let problem = format!("bench-{seq:05}");
        PerRole::from_fn(|role| model.problem_factor(self.s.seed, &problem, role.as_str()))
    }

    /// Each call's latency plus the longest chain of calls after it, last iteration
    /// first: a bank call leads to every solution of the next iteration, a summary to
    /// both bank calls, a verification to its summary, a solution to its verifications.
    fn critical_paths(&self, latencies: &[f64]) -> Vec<f64> {
        let (n, m, ix) = (self.s.n, self.s.m, self.index);
        let mut paths = vec![0.0; latencies.len()];
        let mut next_iteration = 0.0_f64;
        for it in (0..self.s.iterations).rev() {
            let mut after_summaries = 0.0_f64;
            for role in [Role::Experience, Role::Guideline] {
                let i = ix.of(it, role, 0, 0);
                paths[i] = latencies[i] + next_iteration;
                after_summaries = after_summaries.max(paths[i]);
            }
            let mut longest_solution = 0.0_f64;
            for c in 0..n {
                let summary = ix.of(it, Role::Summary, c, 0);
                paths[summary] = latencies[summary] + after_summaries;
                let mut after_solution = if m == 0 { paths[summary] } else { 0.0 };
                for v in 0..m {
                    let i = ix.of(it, Role::Verification, c, v);
                    paths[i] = latencies[i] + paths[summary];
                    after_solution = after_solution.max(paths[i]);
                }
                let solution = ix.of(it, Role::Solution, c, 0);
                paths[solution] = latencies[solution] + after_solution;
                longest_solution = longest_solution.max(paths[solution]);
            }
            next_iteration = if n == 0 {
                after_summaries
            } else {
                longest_solution
            };
        }
        paths
    }

    /// Moves calls from pools to free workers, and from the gate into free slots.
    fn dispatch(&mut self) {
        for &role in ROLES {
            while self.busy_workers[role] < self.s.pool_size {
                let Some((_, call)) = self.pools[role].pop() else {
                    break;
                };
                self.busy_workers[role] += 1;
                self.gate.push(call);
            }
        }
        while self.in_flight < self.s.cap {
            let Some(call) = self.gate.pop() else {
                break;
            };
            self.in_flight += 1;
            self.dispatched += 1;
            self.running.push(Reverse(Finish {
                at: self.now + call.latency,
                id: self.dispatched,
                call,
            }));
        }
    }

    fn submit(&mut self, problem: usize, role: Role, candidate: u32, slot: u32) {
        let p = &self.problems[problem];
        let i = self.index.of(p.iteration, role, candidate, slot);
        let latency = p.latencies[i];
        let priority = match self.s.priority {
            CallOrder::Runtime(order) => {
                order.of_call(&self.stages, p.seq, p.iteration, stage(role), &p.observed)
            }
            // Microseconds of remaining path: longer first.
            CallOrder::CriticalPath => (p.critical_paths[i] * 1e6) as i64,
        };
        self.busy_secs += latency;
        self.calls += 1;
        self.outstanding += 1;
        let call = Call {
            problem,
            role,
            candidate,
            priority,
            latency,
        };
        self.pools[role].push(priority, call);
    }

    fn start_iteration(&mut self, problem: usize) {
        let n = self.s.n;
        let p = &mut self.problems[problem];
        p.candidates = vec![Candidate::default(); n as usize];
        p.candidates_left = n;
        p.slowest_candidate_secs = 0.0;
        p.slowest_bank_secs = 0.0;
        if n == 0 {
            self.start_banks(problem);
            return;
        }
        for c in 0..n {
            self.submit(problem, Role::Solution, c, 0);
        }
    }

    fn start_banks(&mut self, problem: usize) {
        self.problems[problem].banks_left = 2;
        self.submit(problem, Role::Experience, 0, 0);
        self.submit(problem, Role::Guideline, 0, 0);
    }

    fn on_done(&mut self, call: Call) {
        let m = self.s.m;
        let problem = call.problem;
        // In whole microseconds, as the runtime counts them.
        let latency_us = (call.latency * 1e6).round() as u64;
        self.problems[problem]
            .observed
            .observe(stage(call.role), latency_us);
        let c = call.candidate as usize;
        match call.role {
            Role::Solution => {
                let cand = &mut self.problems[problem].candidates[c];
                cand.solution_secs = call.latency;
                cand.verifications_left = m;
                if m == 0 {
                    self.submit(problem, Role::Summary, call.candidate, 0);
                } else {
                    for v in 0..m {
                        self.submit(problem, Role::Verification, call.candidate, v);
                    }
                }
            }
            Role::Verification => {
                let cand = &mut self.problems[problem].candidates[c];
                cand.verifications_left -= 1;
                cand.slowest_verification_secs = cand.slowest_verification_secs.max(call.latency);
                if cand.verifications_left == 0 {
                    self.submit(problem, Role::Summary, call.candidate, 0);
                }
            }
            Role::Summary => {
                let p = &mut self.problems[problem];
                let cand = p.candidates[c];
                let path = cand.solution_secs + cand.slowest_verification_secs + call.latency;
                p.slowest_candidate_secs = p.slowest_candidate_secs.max(path);
                p.candidates_left -= 1;
                if p.candidates_left == 0 {
                    self.start_banks(problem);
                }
            }
            // The bank updates (experience and guideline).
            _ => {
                let p = &mut self.problems[problem];
                p.slowest_bank_secs = p.slowest_bank_secs.max(call.latency);
                p.banks_left -= 1;
                if p.banks_left == 0 {
                    p.chain_secs += p.slowest_candidate_secs + p.slowest_bank_secs;
                    p.iteration += 1;
                    if p.iteration < self.s.iterations {
                        self.start_iteration(problem);
                    } else if !p.done {
                        p.done = true;
                        self.active -= 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scenario(problems: usize, cap: usize) -> Scenario {
        Scenario {
            problems,
            n: 8,
            m: 8,
            iterations: 5,
            cap,
            pool_size: cap,
            admission: Admission::Fixed {
                max_concurrent_problems: problems,
            },
            priority: CallOrder::Runtime(CallPriority::OldestProblemFirst),
            gate: Gate::Fifo,
            latency: LatencyModel::Fixed(Duration::from_millis(200)),
            difficulty_sigma: 0.0,
            seed: 1,
        }
    }

    /// The long-tailed latency of `tmas bench eval --latency lognormal:200ms:1.0`.
    fn lognormal() -> LatencyModel {
        LatencyModel::LogNormal {
            median: Duration::from_millis(200),
            sigma: 1.0,
        }
    }

    #[test]
    fn one_problem_alone_runs_at_its_chain() {
        let o = simulate(&scenario(1, 1_000));
        assert_eq!(o.calls, 5 * (8 + 64 + 8 + 2));
        // solution → verification → summary → bank, 5 times, 0.2 s each.
        assert!((o.wall_secs - 4.0).abs() < 1e-9, "{o:?}");
        assert!((o.chain_secs - 4.0).abs() < 1e-9);
        assert!((o.wall_over_bound - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_cap_of_one_serializes_every_call() {
        let o = simulate(&scenario(2, 1));
        assert_eq!(o.calls, 2 * 5 * 82);
        assert!((o.wall_secs - 0.2 * o.calls as f64).abs() < 1e-6, "{o:?}");
        assert!((o.utilization - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_cap_and_the_problem_window_bound_the_run() {
        // 10 problems one at a time: 10 chains back to back.
        let mut s = scenario(10, 10_000);
        s.admission = Admission::Fixed {
            max_concurrent_problems: 1,
        };
        let o = simulate(&s);
        assert!((o.wall_secs - 40.0).abs() < 1e-6, "{o:?}");
        // All at once with room for every call: one chain.
        let o = simulate(&scenario(10, 10_000));
        assert!((o.wall_secs - 4.0).abs() < 1e-6, "{o:?}");
    }

    #[test]
    fn a_lone_problems_first_call_has_the_whole_chain_as_its_critical_path() {
        let mut s = scenario(1, 1_000);
        s.priority = CallOrder::CriticalPath;
        let model = Model::new(&s);
        let latencies = model.draw_latencies(0);
        assert_eq!(latencies.len(), 5 * 82);
        let paths = model.critical_paths(&latencies);
        let ix = model.index;
        // solution → verification → summary → bank, 5 times, 0.2 s each.
        assert!((paths[ix.of(0, Role::Solution, 3, 0)] - 4.0).abs() < 1e-9);
        assert!((paths[ix.of(0, Role::Verification, 3, 7)] - 3.8).abs() < 1e-9);
        assert!((paths[ix.of(4, Role::Guideline, 0, 0)] - 0.2).abs() < 1e-9);
        assert!((paths[ix.of(4, Role::Summary, 7, 0)] - 0.4).abs() < 1e-9);
        // Alone, it runs at its chain like any other order.
        let o = simulate(&s);
        assert!((o.wall_secs - 4.0).abs() < 1e-9, "{o:?}");
    }

    #[test]
    fn every_call_order_meets_the_same_latencies() {
        let mut s = scenario(30, 200);
        s.latency = lognormal();
        s.admission = Admission::WorkConserving {
            max_active_problems: 30,
            target_in_flight: 200,
        };
        let orders = [
            CallOrder::Runtime(CallPriority::OldestProblemFirst),
            CallOrder::Runtime(CallPriority::LeastProgressFirst),
            CallOrder::CriticalPath,
            CallOrder::Runtime(CallPriority::LatencyAware),
        ];
        let outcomes: Vec<Outcome> = orders
            .iter()
            .map(|&order| {
                simulate(&Scenario {
                    priority: order,
                    ..s.clone()
                })
            })
            .collect();
        for o in &outcomes {
            assert_eq!(o.calls, outcomes[0].calls);
            assert!((o.busy_secs - outcomes[0].busy_secs).abs() < 1e-6, "{o:?}");
            assert!(
                (o.chain_secs - outcomes[0].chain_secs).abs() < 1e-9,
                "{o:?}"
            );
            assert!(o.wall_secs + 1e-9 >= o.bound_secs);
        }
    }

    #[test]
    fn same_seed_same_outcome_and_lognormal_draws_vary() {
        let mut s = scenario(20, 100);
        s.latency = lognormal();
        let a = simulate(&s);
        assert_eq!(a, simulate(&s));
        assert!(a.chain_secs > 4.0, "{a:?}");
        assert!(a.utilization > 0.0 && a.utilization <= 1.0 + 1e-9);
        assert!(a.wall_secs + 1e-9 >= a.bound_secs);
    }

    #[test]
    fn difficulty_makes_a_problems_calls_alike_and_latency_aware_learns_it() {
        let mut s = scenario(60, 200);
        s.latency = lognormal();
        s.difficulty_sigma = 0.8;
        let model = Model::new(&s);
        // Problems differ in their mean latency far more than draws within one do.
        let means: Vec<f64> = (0..20)
            .map(|seq| {
                let l = model.draw_latencies(seq);
                l.iter().sum::<f64>() / l.len() as f64
            })
            .collect();
        let (lo, hi) = means
            .iter()
            .fold((f64::MAX, 0.0_f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        assert!(hi > 2.0 * lo, "{means:?}");
        // Same latencies under every order, and the online estimate is never worse than
        // the bound allows.
        s.admission = Admission::WorkConserving {
            max_active_problems: 60,
            target_in_flight: 200,
        };
        let lpf = simulate(&Scenario {
            priority: CallOrder::Runtime(CallPriority::LeastProgressFirst),
            ..s.clone()
        });
        let aware = simulate(&Scenario {
            priority: CallOrder::Runtime(CallPriority::LatencyAware),
            ..s.clone()
        });
        assert_eq!(lpf.calls, aware.calls);
        assert!((lpf.busy_secs - aware.busy_secs).abs() < 1e-6);
        assert!(aware.wall_secs + 1e-9 >= aware.bound_secs);
        assert_eq!(
            aware,
            simulate(&Scenario {
                priority: CallOrder::Runtime(CallPriority::LatencyAware),
                ..s.clone()
            })
        );
    }

    #[test]
    fn the_latency_aware_priority_is_the_runtimes_estimate_of_the_remaining_chain() {
        let mut s = scenario(2, 100);
        s.priority = CallOrder::Runtime(CallPriority::LatencyAware);
        let mut model = Model::new(&s);
        model.admit();
        let priority = |model: &Model, p: usize, role: Role| {
            let problem = &model.problems[p];
            CallPriority::LatencyAware.of_call(
                &model.stages,
                problem.seq,
                problem.iteration,
                stage(role),
                &problem.observed,
            )
        };
        let observe = |model: &mut Model, p: usize, role: Role, us: u64| {
            model.problems[p].observed.observe(stage(role), us);
        };
        // Roles no call has completed yet come first (2^52 per role), then the estimate.
        let band = |unknown: i64| unknown << 52;
        // Nothing observed yet: all five roles unknown, every call ties.
        assert_eq!(priority(&model, 0, Role::Solution), band(5));
        assert_eq!(priority(&model, 1, Role::Guideline), band(5));
        // Problem 0's solutions took 3 s, problem 1's 1 s …
        observe(&mut model, 0, Role::Solution, 3_000_000);
        observe(&mut model, 1, Role::Solution, 1_000_000);
        observe(&mut model, 0, Role::Verification, 1_000_000);
        // … 5 iterations of (own solution + verification) left; problem 1 has no
        // verification of its own and takes the run's mean (1 s).
        assert_eq!(priority(&model, 0, Role::Solution), band(3) + 5 * 4_000_000);
        assert_eq!(priority(&model, 1, Role::Solution), band(3) + 5 * 2_000_000);
        // Bank updates side by side: the longer one counts, once.
        observe(&mut model, 0, Role::Experience, 2_000_000);
        observe(&mut model, 0, Role::Guideline, 5_000_000);
        model.problems[0].iteration = 4;
        assert_eq!(priority(&model, 0, Role::Guideline), band(1) + 5_000_000);
        assert_eq!(priority(&model, 0, Role::Summary), band(1) + 5_000_000);
        assert_eq!(priority(&model, 0, Role::Solution), band(1) + 9_000_000);
    }

    #[test]
    fn the_model_learns_latencies_as_calls_complete() {
        let mut s = scenario(3, 1_000);
        s.priority = CallOrder::Runtime(CallPriority::LatencyAware);
        let mut model = Model::new(&s);
        model.run();
        // Completed calls of every role were counted, for the run and for each problem.
        for &role in ROLES {
            let stage = stage(role);
            assert!((model.observed.mean_us(stage).unwrap() - 200_000.0).abs() < 1.0);
            for p in &model.problems {
                assert!((p.observed.mean_us(stage).unwrap() - 200_000.0).abs() < 1.0);
            }
        }
    }
}
