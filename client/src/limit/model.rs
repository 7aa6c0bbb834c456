//! A closed-loop model of one endpoint, to test the limit arithmetic on the situations it
//! must tell apart (the limit's decisions change what it measures next, so replaying a
//! fixed latency sequence would not do): a server that serves `capacity` requests at once
//! and queues up to `queue` more (503 beyond, as vLLM and SGLang), lognormal service
//! times drawn once per call, and a client that delays what it sees by its own scheduling
//! delay (a CPU-starved client measures that too). Time is simulated: an event queue, no
//! sleeping.
//!
//! Workloads: a backlog (every call wants to run from the start: the limit alone decides
//! the throughput), or stages (problems whose calls come in dependent batches, as a TMAS
//! iteration's solutions, verifications, summaries and bank updates: the demand rises and
//! falls, and slots idle while a problem waits for its slowest call).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

use super::LimitAlgorithm;
use super::state::LimitState;

/// The model's draws, from SplitMix64 (`rand_xoshiro`'s, the generator `tmas` draws its
/// simulations from): deterministic for a seed.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Exponential with this mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

/// What the client adds to each latency it measures: `(rng, calls in flight, time)`.
pub type ClientDelay = Box<dyn Fn(&mut Rng, usize, f64) -> f64>;

/// The calls the client wants to make.
#[derive(Debug, Clone)]
pub enum Workload {
    /// This many calls, all wanting to run from the start.
    Backlog(usize),
    /// `problems` problems, each running these batches one after another (a batch's calls
    /// at once; the next batch when the last of them is done).
    Stages {
        problems: usize,
        batches: Vec<usize>,
    },
}

/// How the client's limit is set.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// The gradient, told `ceiling` as `max_in_flight`.
    Gradient { ceiling: usize },
    /// AIMD told this `max_in_flight` (fixed unless the server refuses).
    Fixed(usize),
}

pub struct Model {
    /// Requests served at once (`usize::MAX`: no limit).
    pub capacity: usize,
    /// Requests that may wait beyond `capacity` before the server answers 503.
    pub queue: usize,
    pub median_s: f64,
    pub sigma: f64,
    pub workload: Workload,
    pub limit: Limit,
    pub delay: ClientDelay,
    pub retry_after_s: f64,
    pub seed: u64,
}

/// What a model run did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// When the last call was answered.
    pub wall_s: f64,
    pub calls: usize,
    /// 503 answers.
    pub refused: usize,
    pub peak_queue: usize,
    /// The limit after each change: (time, slots).
    pub limits: Vec<(f64, usize)>,
}

impl Outcome {
    /// Time-weighted mean of the limit over `[from, to]` seconds.
    pub fn mean_limit(&self, from: f64, to: f64) -> f64 {
        let mut sum = 0.0;
        for (i, &(t, l)) in self.limits.iter().enumerate() {
            let end = self.limits.get(i + 1).map_or(to, |n| n.0).min(to);
            let start = t.max(from);
            if end > start {
                sum += (end - start) * l as f64;
            }
        }
        sum / (to - from)
    }

    pub fn min_limit(&self, from: f64) -> usize {
        let before = self.limits.iter().take_while(|(t, _)| *t <= from).last();
        before
            .into_iter()
            .chain(self.limits.iter().filter(|(t, _)| *t > from))
            .map(|&(_, l)| l)
            .min()
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// The server finished serving the call.
    Served,
    /// The client sees the call's answer (`ok`: a success; else a 503).
    Seen { ok: bool },
    /// A refused call may be sent again.
    Retry,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Event {
    at: f64,
    seq: u64,
    call: usize,
    kind: Kind,
}

impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Earliest first (a max-heap of reversed order).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

struct Call {
    service: f64,
    problem: usize,
    sent: f64,
}

struct Sim<'m> {
    m: &'m Model,
    t0: Instant,
    now: f64,
    seq: u64,
    events: BinaryHeap<Event>,
    rng: Rng,
    calls: Vec<Call>,
    waiting: VecDeque<usize>,
    in_flight: usize,
    limit: LimitState,
    busy: usize,
    queue: VecDeque<usize>,
    /// Per problem: the next batch and the calls of the current one still open.
    progress: Vec<(usize, usize)>,
    out: Outcome,
}

impl Model {
    pub fn run(&self) -> Outcome {
        let limit = match self.limit {
            Limit::Gradient { ceiling } => LimitState::with(LimitAlgorithm::Gradient, ceiling, 1),
            Limit::Fixed(n) => LimitState::with(LimitAlgorithm::Aimd, n, 1),
        };
        let mut sim = Sim {
            m: self,
            t0: Instant::now(),
            now: 0.0,
            seq: 0,
            events: BinaryHeap::new(),
            rng: Rng::new(self.seed),
            calls: Vec::new(),
            waiting: VecDeque::new(),
            in_flight: 0,
            out: Outcome {
                limits: vec![(0.0, limit.slots())],
                ..Outcome::default()
            },
            limit,
            busy: 0,
            queue: VecDeque::new(),
            progress: Vec::new(),
        };
        match &self.workload {
            Workload::Backlog(n) => {
                for _ in 0..*n {
                    sim.new_call(0);
                }
            }
            Workload::Stages { problems, .. } => {
                sim.progress = vec![(0, 0); *problems];
                for p in 0..*problems {
                    sim.next_batch(p);
                }
            }
        }
        sim.dispatch();
        while let Some(e) = sim.events.pop() {
            sim.now = e.at;
            sim.handle(e);
        }
        sim.out
    }
}

impl Sim<'_> {
    fn new_call(&mut self, problem: usize) {
        let service = self.m.median_s * (self.m.sigma * self.rng.normal()).exp();
        self.calls.push(Call {
            service,
            problem,
            sent: 0.0,
        });
        self.waiting.push_back(self.calls.len() - 1);
    }

    fn next_batch(&mut self, p: usize) {
        let Workload::Stages { batches, .. } = &self.m.workload else {
            return;
        };
        let (next, _) = self.progress[p];
        let Some(&size) = batches.get(next) else {
            return;
        };
        self.progress[p] = (next + 1, size);
        for _ in 0..size {
            self.new_call(p);
        }
    }

    fn schedule(&mut self, after: f64, call: usize, kind: Kind) {
        self.seq += 1;
        self.events.push(Event {
            at: self.now + after.max(0.0),
            seq: self.seq,
            call,
            kind,
        });
    }

    fn instant(&self, at: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(at)
    }

    fn dispatch(&mut self) {
        while self.in_flight < self.limit.slots() {
            let Some(call) = self.waiting.pop_front() else {
                return;
            };
            self.in_flight += 1;
            self.calls[call].sent = self.now;
            if self.busy < self.m.capacity {
                self.busy += 1;
                self.schedule(self.calls[call].service, call, Kind::Served);
            } else if self.queue.len() < self.m.queue {
                self.queue.push_back(call);
                self.out.peak_queue = self.out.peak_queue.max(self.queue.len());
            } else {
                self.schedule(0.001, call, Kind::Seen { ok: false });
            }
        }
    }

    fn handle(&mut self, e: Event) {
        let before = self.limit.slots();
        match e.kind {
            Kind::Served => {
                self.busy -= 1;
                if let Some(next) = self.queue.pop_front() {
                    self.busy += 1;
                    self.schedule(self.calls[next].service, next, Kind::Served);
                }
                let delay = (self.m.delay)(&mut self.rng, self.in_flight, self.now);
                self.schedule(delay, e.call, Kind::Seen { ok: true });
            }
            Kind::Seen { ok } => {
                let in_use = self.in_flight;
                self.in_flight -= 1;
                let now = self.instant(self.now);
                if ok {
                    let latency = Duration::from_secs_f64(self.now - self.calls[e.call].sent);
                    self.limit.success_after(latency, in_use);
                    self.out.calls += 1;
                    self.out.wall_s = self.now;
                    let p = self.calls[e.call].problem;
                    if let Some(open) = self.progress.get_mut(p).map(|(_, open)| open) {
                        *open -= 1;
                        if *open == 0 {
                            self.next_batch(p);
                        }
                    }
                } else {
                    self.out.refused += 1;
                    let sent = self.instant(self.calls[e.call].sent);
                    self.limit.overload(sent, now, self.in_flight);
                    self.schedule(self.m.retry_after_s, e.call, Kind::Retry);
                }
            }
            Kind::Retry => self.waiting.push_back(e.call),
        }
        if self.limit.slots() != before {
            self.out.limits.push((self.now, self.limit.slots()));
        }
        self.dispatch();
    }
}

#[cfg(test)]
mod tests;
