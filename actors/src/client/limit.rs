//! An endpoint's effective concurrency limit: AIMD (additive increase, multiplicative
//! decrease), as TCP congestion control and Netflix's `concurrency-limits` do it.
//!
//! A server that answers 429 or 503 is alive and says "not now": it has a bounded queue
//! (vLLM, SGLang) and we sent more than it takes. Treating that as a failure takes the
//! endpoint out and floods it again when it comes back; ignoring it hammers it. Instead
//! the limit shrinks by [`DECREASE`] on overload and grows by one slot per window of
//! successes, between a floor and the configured `max_in_flight`, so the client settles at
//! what the server can take.
//!
//! One decrease per round trip: an overload answer to an attempt that was sent before the
//! last decrease says nothing new (the burst that caused it was already cut), so it is
//! ignored. Without this rule a wave of 50 rejections would cut the limit 50 times.
//!
//! Fast recovery (TCP's slow start): a server that answers 503 to everything for a while
//! (restarting, loading its model) drives the limit to the floor. Growing back one slot
//! per round trip would then take hundreds of round trips, so below the level where the
//! overload episode began (less one cut) every success adds a whole slot, doubling the
//! limit per round trip. An episode begins with the first cut after at least a limit's
//! worth of successes without one.
//!
//! Gradient mode ([`LimitAlgorithm::Gradient`], in the manner of TCP Vegas and Netflix's
//! `Gradient2Limit`): a server with a bounded queue answers 503 only once the queue is
//! full; long before that its latency grows with the queue. The limit then also follows
//! the queueing delay: successes are collected in windows (at least [`WINDOW_MIN`], and at
//! least the limit), each window's median latency is compared with an unloaded baseline (a
//! low percentile of the last [`BASELINE_WINDOWS`] window medians), and a window whose
//! median exceeds the baseline by more than [`TOLERANCE`] shrinks the limit to the Vegas
//! estimate of what the server serves unqueued (`limit / ratio`, at most halving it), so
//! that the following windows measure the baseline again; a window without that inflation
//! grows it by `√limit`, or doubles it while the limit is still looking for the server's
//! capacity (it starts at [`GRADIENT_START`] slots, so the baseline is measured unloaded,
//! and stops doubling at the first sign of inflation).
//! Windows whose calls used less than half the limit change nothing (they say nothing
//! about the limit: it would grow without evidence, or shrink on noise). Overload
//! answers still cut as in AIMD.
//!
//! The limit is enforced on the endpoint's semaphore: a decrease removes idle permits
//! (`forget_permits`) and, for permits in use, records a debt that releases pay by
//! forgetting their permit instead of returning it; an increase first cancels debt, then
//! adds permits. So the number of permits in existence always equals the limit once the
//! calls in flight above it have ended, and no call is ever interrupted by a decrease.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Factor applied to the limit on overload (Netflix's AIMD limit uses 0.9: gentle cuts
/// keep a server with a fixed queue near its capacity; the sawtooth averages ~95 % of it).
pub const DECREASE: f64 = 0.9;

/// How an endpoint's effective concurrency limit moves between the floor and its
/// `max_in_flight`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitAlgorithm {
    /// Starts at `max_in_flight`; cut on overload answers (429, 503), grown by successes.
    #[default]
    Aimd,
    /// AIMD's overload cuts, plus the queueing-delay signal: latency inflated over its
    /// unloaded baseline shrinks the limit before the server refuses.
    Gradient,
}

/// Latency inflation over the baseline a window may show without shrinking the limit
/// (Netflix's `Gradient2Limit` default; window medians are noisy, and the baseline is a
/// low percentile of them).
pub const TOLERANCE: f64 = 1.5;
/// Fewest successes per gradient window (the median of fewer is too noisy).
pub const WINDOW_MIN: usize = 64;
/// Window medians kept for the baseline.
pub const BASELINE_WINDOWS: usize = 50;
/// Where a gradient limit starts (below any server's capacity, so the first windows
/// measure the unloaded latency), unless `max_in_flight` is lower.
pub const GRADIENT_START: usize = 8;
/// Inflation that ends the search (doubling per window) before the tolerance is reached.
const SEARCH_RATIO: f64 = 1.1;
/// Percentile of the kept window medians taken as the baseline: the minimum of many
/// noisy medians would sit well below the true unloaded latency.
const BASELINE_PERCENTILE: f64 = 0.1;

/// The gradient's state: the current window and the history the baseline comes from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gradient {
    window: Vec<f64>,
    /// Most calls of this endpoint seen in flight during the window.
    peak_in_use: usize,
    medians: VecDeque<f64>,
    /// Still doubling per window: no inflation or overload seen yet.
    searching: bool,
    /// The last window's median over the baseline.
    pub last_ratio: Option<f64>,
}

impl Gradient {
    fn baseline(&self) -> Option<f64> {
        let mut sorted: Vec<f64> = self.medians.iter().copied().collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let i = ((sorted.len() - 1) as f64 * BASELINE_PERCENTILE).round() as usize;
        sorted.get(i).copied()
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The pure limit arithmetic, apart from the semaphore (unit-tested on its own).
#[derive(Debug, Clone)]
pub(crate) struct Aimd {
    limit: f64,
    floor: f64,
    ceiling: f64,
    last_decrease: Option<Instant>,
    /// The limit when the current overload episode began.
    episode_start: f64,
    successes_since_cut: f64,
    /// Set in gradient mode.
    gradient: Option<Gradient>,
}

impl Aimd {
    #[cfg(test)]
    pub fn new(ceiling: usize, floor: usize) -> Self {
        Self::with(LimitAlgorithm::Aimd, ceiling, floor)
    }

    pub fn with(algorithm: LimitAlgorithm, ceiling: usize, floor: usize) -> Self {
        let ceiling = ceiling.max(1) as f64;
        let floor = (floor.max(1) as f64).min(ceiling);
        let (limit, gradient) = match algorithm {
            LimitAlgorithm::Aimd => (ceiling, None),
            LimitAlgorithm::Gradient => (
                (GRADIENT_START as f64).clamp(floor, ceiling),
                Some(Gradient {
                    searching: true,
                    ..Gradient::default()
                }),
            ),
        };
        Self {
            limit,
            floor,
            ceiling,
            last_decrease: None,
            episode_start: limit,
            successes_since_cut: 0.0,
            gradient,
        }
    }

    pub fn algorithm(&self) -> LimitAlgorithm {
        if self.gradient.is_some() {
            LimitAlgorithm::Gradient
        } else {
            LimitAlgorithm::Aimd
        }
    }

    /// The last gradient window's latency over its baseline (gradient mode only).
    pub fn latency_ratio(&self) -> Option<f64> {
        self.gradient.as_ref().and_then(|g| g.last_ratio)
    }

    /// A success that took `latency`, with `in_use` of this endpoint's slots taken: the
    /// AIMD step, or in gradient mode one sample of the current window.
    pub fn success_after(&mut self, latency: Duration, in_use: usize) {
        if self.gradient.is_none() {
            self.success();
            return;
        }
        self.successes_since_cut += 1.0;
        let (limit, floor, ceiling) = (self.limit, self.floor, self.ceiling);
        let Some(g) = self.gradient.as_mut() else {
            return;
        };
        g.window.push(latency.as_secs_f64());
        g.peak_in_use = g.peak_in_use.max(in_use);
        if g.window.len() < WINDOW_MIN.max(limit as usize) {
            return;
        }
        let m = median(&mut g.window);
        let used = g.peak_in_use;
        g.window.clear();
        g.peak_in_use = 0;
        if g.medians.len() == BASELINE_WINDOWS {
            g.medians.pop_front();
        }
        g.medians.push_back(m);
        let Some(base) = g.baseline().filter(|b| *b > 0.0) else {
            return;
        };
        let ratio = m / base;
        g.last_ratio = Some(ratio);
        // Far below where an overload episode began (a collapse to the floor while the
        // server restarted): double back, as AIMD's fast recovery does.
        let collapsed = limit < self.episode_start * DECREASE;
        // Only a window that used at least half the limit says anything about it: with
        // few calls in flight, inflation is noise or someone else's load, and a run whose
        // dependency chains leave slots idle would otherwise ratchet the limit down on
        // noisy windows it could never grow back from.
        if (used as f64) < limit / 2.0 {
            return;
        }
        if ratio > TOLERANCE {
            g.searching = false;
            // Vegas's estimate of what the server serves without queueing (the limit over
            // the inflation) is slightly below its capacity, so the next windows run
            // unqueued and keep the baseline honest.
            self.limit = (limit * (1.0 / ratio).max(0.5)).max(floor);
            self.episode_start = self.limit;
        } else {
            // Any inflation ends the search: doubling from there could overrun the queue.
            g.searching &= ratio < SEARCH_RATIO;
            self.limit = if g.searching || collapsed {
                (limit * 2.0).min(ceiling)
            } else {
                (limit + limit.sqrt()).min(ceiling)
            };
            self.episode_start = self.episode_start.max(self.limit);
        }
    }

    /// The whole number of slots the limit allows now.
    pub fn slots(&self) -> usize {
        self.limit.floor() as usize
    }

    /// A success: one more slot per `limit` successes, or one per success while far below
    /// where the overload episode began.
    pub fn success(&mut self) {
        self.successes_since_cut += 1.0;
        let step = if self.limit < self.episode_start * DECREASE {
            1.0
        } else {
            1.0 / self.limit
        };
        self.limit = (self.limit + step).min(self.ceiling);
    }

    /// An overload answer to an attempt sent at `sent`. True if the limit was cut.
    pub fn overload(&mut self, sent: Instant, now: Instant) -> bool {
        if self.last_decrease.is_some_and(|last| sent < last) {
            return false;
        }
        if self.successes_since_cut >= self.limit {
            self.episode_start = self.limit;
        }
        self.successes_since_cut = 0.0;
        if let Some(g) = self.gradient.as_mut() {
            g.searching = false;
        }
        let cut = (self.limit * DECREASE).max(self.floor);
        self.last_decrease = Some(now);
        if cut < self.limit {
            self.limit = cut;
            true
        } else {
            false
        }
    }
}

struct State {
    aimd: Aimd,
    /// Permits currently in existence (idle + held), once the debt is paid.
    granted: usize,
}

/// The limit of one endpoint and the semaphore that enforces it.
pub(crate) struct ConcurrencyLimit {
    permits: Arc<Semaphore>,
    state: Mutex<State>,
    /// Permits still to be forgotten when held ones are released.
    debt: AtomicUsize,
    /// `aimd.slots()`, readable without the lock (snapshots, metrics).
    current: AtomicUsize,
}

/// A change of the limit, for the log, the span and the gauge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LimitChange {
    pub from: usize,
    pub to: usize,
    /// Gradient mode: the latency inflation (last window's median over the baseline).
    pub latency_ratio: Option<f64>,
}

impl ConcurrencyLimit {
    #[cfg(test)]
    pub fn new(ceiling: usize, floor: usize) -> Self {
        Self::with(LimitAlgorithm::Aimd, ceiling, floor)
    }

    pub fn with(algorithm: LimitAlgorithm, ceiling: usize, floor: usize) -> Self {
        let aimd = Aimd::with(algorithm, ceiling, floor);
        let slots = aimd.slots();
        Self {
            permits: Arc::new(Semaphore::new(slots)),
            state: Mutex::new(State {
                aimd,
                granted: slots,
            }),
            debt: AtomicUsize::new(0),
            current: AtomicUsize::new(slots),
        }
    }

    /// The semaphore calls queue on.
    pub fn permits(&self) -> &Arc<Semaphore> {
        &self.permits
    }

    /// The effective limit now.
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// A success whose attempt took `latency`.
    pub fn on_success(&self, latency: Duration) -> Option<LimitChange> {
        // Slots taken now (this call's is already returned): the gradient's load evidence.
        let in_use = self
            .current()
            .saturating_sub(self.permits.available_permits())
            .saturating_add(1);
        self.update(|aimd| {
            aimd.success_after(latency, in_use);
        })
    }

    /// An overload answer to an attempt sent at `sent`.
    pub fn on_overload(&self, sent: Instant) -> Option<LimitChange> {
        let now = Instant::now();
        self.update(|aimd| {
            aimd.overload(sent, now);
        })
    }

    /// Back to the start (a restarted server's queue is empty again): the ceiling for
    /// AIMD; for the gradient the search starts over, keeping the baseline (the server's
    /// unloaded latency has not changed).
    pub fn reset(&self) -> Option<LimitChange> {
        self.update(|aimd| {
            let kept = aimd.gradient.as_ref().map(|g| g.medians.clone());
            *aimd = Aimd::with(aimd.algorithm(), aimd.ceiling as usize, aimd.floor as usize);
            if let (Some(g), Some(medians)) = (aimd.gradient.as_mut(), kept) {
                g.medians = medians;
            }
        })
    }

    fn update(&self, f: impl FnOnce(&mut Aimd)) -> Option<LimitChange> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state.aimd);
        let (from, to) = (state.granted, state.aimd.slots());
        if from == to {
            return None;
        }
        if to < from {
            let cut = from - to;
            let forgotten = self.permits.forget_permits(cut);
            self.debt.fetch_add(cut - forgotten, Ordering::AcqRel);
        } else {
            let mut add = to - from;
            // Cancel debt first: those permits are still held and may simply be returned.
            let _ = self
                .debt
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| {
                    let paid = d.min(add);
                    Some(d - paid)
                })
                .map(|d| add -= d.min(add));
            if add > 0 {
                self.permits.add_permits(add);
            }
        }
        state.granted = to;
        self.current.store(to, Ordering::Relaxed);
        Some(LimitChange {
            from,
            to,
            latency_ratio: state.aimd.latency_ratio(),
        })
    }

    /// Returns a held permit, or forgets it while the limit is below the permits in use.
    pub fn release(&self, permit: OwnedSemaphorePermit) {
        let paid = self
            .debt
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1))
            .is_ok();
        if paid {
            permit.forget();
        } else {
            drop(permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn aimd_cuts_once_per_round_trip_and_climbs_back_additively() {
        let t0 = Instant::now();
        let mut a = Aimd::new(200, 4);
        assert_eq!(a.slots(), 200);
        assert!(a.overload(t0, t0 + Duration::from_millis(10)));
        assert_eq!(a.slots(), 180);
        // Sent before that cut: the same burst, ignored.
        assert!(!a.overload(t0, t0 + Duration::from_millis(20)));
        assert_eq!(a.slots(), 180);
        // Sent after it: a new signal.
        let later = t0 + Duration::from_millis(30);
        assert!(a.overload(later, later));
        assert_eq!(a.slots(), 162);
        // Two cuts in one episode: back to 90 % of its start (180) a slot per success…
        for _ in 0..18 {
            a.success();
        }
        assert_eq!(a.slots(), 180);
        // …then about one slot per `limit` successes (each adds 1/limit).
        for _ in 0..185 {
            a.success();
        }
        assert_eq!(a.slots(), 181);
        for _ in 0..100_000 {
            a.success();
        }
        assert_eq!(a.slots(), 200, "never above the ceiling");
        let mut t = t0;
        for _ in 0..200 {
            t += Duration::from_secs(1);
            a.overload(t, t);
        }
        assert_eq!(a.slots(), 4, "never below the floor");
    }

    #[test]
    fn after_a_collapse_to_the_floor_the_limit_recovers_in_a_few_round_trips() {
        let mut a = Aimd::new(200, 1);
        let mut t = Instant::now();
        // A restarting server answers 503 to everything: one cut per round trip.
        for _ in 0..100 {
            t += Duration::from_secs(1);
            a.overload(t, t);
        }
        assert_eq!(a.slots(), 1);
        // Back: one slot per success up to 90 % of where the episode began…
        for _ in 0..179 {
            a.success();
        }
        assert_eq!(a.slots(), 180);
        // …then additive again.
        for _ in 0..100 {
            a.success();
        }
        assert!(a.slots() < 182, "{}", a.slots());
        // A cut after a quiet stretch starts a new episode at the current level: steady
        // congestion stays additive (no fast growth back into overload).
        t += Duration::from_secs(1);
        a.overload(t, t);
        let after = a.slots();
        a.success();
        assert_eq!(a.slots(), after, "additive right after a single cut");
    }

    /// A server with `capacity` slots and an unbounded queue: latency is the service time
    /// stretched by the queue (`limit / capacity` once the limit exceeds the capacity),
    /// with ±10 % deterministic noise.
    fn queued_latency(limit: usize, capacity: usize, i: usize) -> Duration {
        let noise = 0.9 + 0.2 * ((i * 7919) % 101) as f64 / 100.0;
        let stretch = (limit as f64 / capacity as f64).max(1.0);
        Duration::from_secs_f64(noise * stretch)
    }

    #[test]
    fn gradient_settles_near_an_undeclared_capacity_without_overload() {
        let (capacity, ceiling) = (60, 200);
        let mut a = Aimd::with(LimitAlgorithm::Gradient, ceiling, 1);
        assert_eq!(a.slots(), GRADIENT_START);
        let mut seen = Vec::new();
        for i in 0..40_000 {
            let l = a.slots();
            a.success_after(queued_latency(l, capacity, i), l);
            if i > 20_000 {
                seen.push(a.slots());
            }
        }
        let max = *seen.iter().max().unwrap();
        let min = *seen.iter().min().unwrap();
        // A sawtooth: up by √limit per window until the queue inflates latency past the
        // tolerance (a queue of at most TOLERANCE - 1 of the capacity, plus one step), then
        // down to the Vegas estimate, just below the capacity.
        let top = capacity as f64 * TOLERANCE;
        assert!(max as f64 <= top + top.sqrt() + 1.0, "max {max}");
        assert!(min as f64 >= capacity as f64 * 0.9, "min {min}");
        let mean = seen.iter().sum::<usize>() as f64 / seen.len() as f64;
        assert!(
            (1.0..=1.4).contains(&(mean / capacity as f64)),
            "mean {mean}"
        );
        assert!(a.latency_ratio().is_some());
    }

    #[test]
    fn gradient_arithmetic_of_one_window() {
        let mut a = Aimd::with(LimitAlgorithm::Gradient, 100, 1);
        // Searching: each uninflated window doubles the limit (8 -> 16 -> 32).
        // (Windows here are WINDOW_MIN successes: the limit stays below it.)
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(1), 8);
        }
        assert_eq!(a.slots(), 16);
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(1), 16);
        }
        assert_eq!(a.slots(), 32);
        // A window 1.6 times as slow as the baseline: limit / 1.6.
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs_f64(1.6), 32);
        }
        assert_eq!(a.slots(), 20);
        assert_eq!(a.latency_ratio(), Some(1.6));
        // No longer searching: an uninflated window adds √limit (20 + 4.47).
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(1), 20);
        }
        assert_eq!(a.slots(), 24);
        // Inflation within the tolerance still grows it (24.47 + 4.95).
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs_f64(1.4), 24);
        }
        assert_eq!(a.slots(), 29);
        // A window that used under half the limit neither grows nor shrinks it.
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(1), 5);
        }
        assert_eq!(a.slots(), 29);
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(3), 5);
        }
        assert_eq!(a.slots(), 29);
        // At most halved by one window (29.42 / 2).
        for _ in 0..WINDOW_MIN {
            a.success_after(Duration::from_secs(100), 29);
        }
        assert_eq!(a.slots(), 14);
        // Overload still cuts as in AIMD (14.71 × 0.9).
        let t = Instant::now();
        assert!(a.overload(t, t));
        assert_eq!(a.slots(), 13);
    }

    #[tokio::test]
    async fn the_semaphore_follows_the_limit_even_with_permits_held() {
        let l = ConcurrencyLimit::new(10, 1);
        let held: Vec<_> = (0..8)
            .map(|_| l.permits().clone().try_acquire_owned().unwrap())
            .collect();
        assert_eq!(l.permits().available_permits(), 2);
        let change = l.on_overload(Instant::now()).unwrap();
        assert_eq!((change.from, change.to), (10, 9));
        assert_eq!(l.permits().available_permits(), 1);
        // Cut below the permits in use: the idle one goes, the rest is debt.
        let later = Instant::now() + Duration::from_millis(1);
        for _ in 0..5 {
            let _ = l.update(|a| {
                a.overload(later, later + Duration::from_secs(1));
                a.last_decrease = None;
            });
        }
        let limit = l.current();
        assert!(limit < 8, "{limit}");
        assert_eq!(l.permits().available_permits(), 0);
        for p in held {
            l.release(p);
        }
        assert_eq!(
            l.permits().available_permits(),
            limit,
            "after the releases exactly `limit` permits exist"
        );
        // Growing back adds permits.
        l.reset();
        assert_eq!(l.current(), 10);
        assert_eq!(l.permits().available_permits(), 10);
    }

    #[tokio::test]
    async fn growth_cancels_debt_before_adding_permits() {
        let l = ConcurrencyLimit::new(4, 1);
        let held: Vec<_> = (0..4)
            .map(|_| l.permits().clone().try_acquire_owned().unwrap())
            .collect();
        l.on_overload(Instant::now()); // 4 -> 3, one permit of debt
        assert_eq!(l.current(), 3);
        l.reset(); // back to 4: the debt is cancelled, nothing added
        assert_eq!(l.permits().available_permits(), 0);
        for p in held {
            l.release(p);
        }
        assert_eq!(l.permits().available_permits(), 4);
    }
}
