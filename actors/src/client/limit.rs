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
//! The limit is enforced on the endpoint's semaphore: a decrease removes idle permits
//! (`forget_permits`) and, for permits in use, records a debt that releases pay by
//! forgetting their permit instead of returning it; an increase first cancels debt, then
//! adds permits. So the number of permits in existence always equals the limit once the
//! calls in flight above it have ended, and no call is ever interrupted by a decrease.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Factor applied to the limit on overload (Netflix's AIMD limit uses 0.9: gentle cuts
/// keep a server with a fixed queue near its capacity; the sawtooth averages ~95 % of it).
pub const DECREASE: f64 = 0.9;

/// The pure AIMD arithmetic, apart from the semaphore (unit-tested on its own).
#[derive(Debug, Clone)]
pub(crate) struct Aimd {
    limit: f64,
    floor: f64,
    ceiling: f64,
    last_decrease: Option<Instant>,
    /// The limit when the current overload episode began.
    episode_start: f64,
    successes_since_cut: f64,
}

impl Aimd {
    pub fn new(ceiling: usize, floor: usize) -> Self {
        let ceiling = ceiling.max(1) as f64;
        Self {
            limit: ceiling,
            floor: (floor.max(1) as f64).min(ceiling),
            ceiling,
            last_decrease: None,
            episode_start: ceiling,
            successes_since_cut: 0.0,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LimitChange {
    pub from: usize,
    pub to: usize,
}

impl ConcurrencyLimit {
    pub fn new(ceiling: usize, floor: usize) -> Self {
        let aimd = Aimd::new(ceiling, floor);
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

    pub fn on_success(&self) -> Option<LimitChange> {
        self.update(|aimd| {
            aimd.success();
        })
    }

    /// An overload answer to an attempt sent at `sent`.
    pub fn on_overload(&self, sent: Instant) -> Option<LimitChange> {
        let now = Instant::now();
        self.update(|aimd| {
            aimd.overload(sent, now);
        })
    }

    /// Back to the ceiling (a restarted server's queue is empty again).
    pub fn reset(&self) -> Option<LimitChange> {
        self.update(|aimd| {
            *aimd = Aimd::new(aimd.ceiling as usize, aimd.floor as usize);
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
        Some(LimitChange { from, to })
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

    #[tokio::test]
    async fn the_semaphore_follows_the_limit_even_with_permits_held() {
        let l = ConcurrencyLimit::new(10, 1);
        let held: Vec<_> = (0..8)
            .map(|_| l.permits().clone().try_acquire_owned().unwrap())
            .collect();
        assert_eq!(l.permits().available_permits(), 2);
        let change = l.on_overload(Instant::now()).unwrap();
        assert_eq!(change, LimitChange { from: 10, to: 9 });
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
