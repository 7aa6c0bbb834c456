//! An endpoint's effective concurrency limit: AIMD (additive increase, multiplicative
//! decrease), as TCP congestion control and Netflix's `concurrency-limits` do it.
//!
//! A server that answers 429 or 503 is alive and says "not now": it has a bounded queue
//! (vLLM, SGLang) and we sent more than it takes. Treating that as a failure takes the
//! endpoint out and floods it again when it comes back; ignoring it hammers it. Instead
//! the limit shrinks on overload and grows by one slot per window of successes, between
//! a floor and the configured `max_in_flight`, so the client settles at what the server
//! can take.
//!
//! How far it shrinks: to the endpoint's calls still running when the refusal came
//! (what the server held of ours: for a server with fixed slots, its capacity), but by
//! at most [`state::DECREASE`] per round trip. A plain multiplicative cut would leave a
//! tenth of such a server idle for the many round trips additive growth takes to climb
//! back (measured: a median of 69–70 of 75 slots); cut to the count, the limit sits at
//! the capacity and probes one slot above it.
//!
//! One round trip, one floor: overload answers to attempts sent before the round trip's
//! first cut are the same burst, so they may only follow the running count down to that
//! round trip's floor (`DECREASE` × the limit before it). Without this rule a wave of 50
//! rejections would cut the limit 50 times; with it, a burst over the capacity is met in
//! one round trip as its refusals come in.
//!
//! A server may also say "fewer at once" by cutting a running stream when another request
//! arrives (llama.cpp's server by default: it sends `[DONE]` without a `finish_reason`,
//! [`super::error::Interruption::Preempted`]). That is an overload signal too, but a costly
//! one: each cut throws away the generation it ends, where a refusal costs nothing, and the
//! servers that do it run one stream at a time. So a cut takes the limit to the calls still
//! running, and at least by half ([`state::CUT_DECREASE`]), once per round trip; the limit
//! then holds for a window of successes before growing again, the hold doubling each time
//! the growth is cut again at the same level ([`state::MAX_HOLD_WINDOWS`] windows at most).
//! Against a server that runs one stream at a time the limit falls to one in a few round
//! trips and probes a second stream ever more rarely.
//!
//! Fast recovery (TCP's slow start): a server that answers 503 to everything for a while
//! (restarting, loading its model) drives the limit to the floor. Growing back one slot
//! per round trip would then take hundreds of round trips, so below the level where the
//! overload episode began (less one cut) every success adds a whole slot, doubling the
//! limit per round trip, until the first refusal after growing (that level is the
//! capacity now). An episode begins with the first cut after at least a limit's worth of
//! successes without one.
//!
//! Gradient mode ([`LimitAlgorithm::Gradient`], in the manner of TCP Vegas and Netflix's
//! `Gradient2Limit`): a server with a bounded queue answers 503 only once the queue is
//! full; long before that its latency grows with the queue. The limit then also follows
//! the queue the server builds up, estimated from the latency of successes ([`gradient`]:
//! a window's low latency quantile against the lowest of the last windows', as a share of
//! the service time). Only successes with every slot taken count (with slots idle the
//! limit holds nothing back). It starts at [`state::GRADIENT_START`] slots, so the
//! baseline is measured unloaded, and doubles per window while no queue shows; after that
//! a window whose queue share is within [`gradient::TOLERANCE`] grows it by the room left
//! under the tolerance (at most `√limit`), and one whose share exceeds it cuts the limit
//! to the server's capacity by Little's law (calls in flight ÷ (1 + share); at most
//! halving it). Overload answers still cut as in AIMD. `model` (tests only) runs it in
//! closed loop against a queueing server.
//!
//! The limit is enforced on the endpoint's semaphore: a decrease removes idle permits
//! (`forget_permits`) and, for permits in use, records a debt that releases pay by
//! forgetting their permit instead of returning it; an increase first cancels debt, then
//! adds permits. So the number of permits in existence always equals the limit once the
//! calls in flight above it have ended, and no call is ever interrupted by a decrease.

mod gradient;
#[cfg(test)]
mod model;
mod state;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use state::LimitState;

/// How an endpoint's effective concurrency limit moves between the floor and its
/// `max_in_flight`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitAlgorithm {
    /// Starts at `max_in_flight`; cut on overload answers (429, 503), grown by successes.
    #[default]
    Aimd,
    /// AIMD's overload cuts, plus the queueing-delay signal: a queue building up at the
    /// server shrinks the limit before the server refuses.
    Gradient,
}

struct State {
    arith: LimitState,
    /// Permits currently in existence (idle + held), once the debt is paid.
    granted: usize,
}

/// The limit of one endpoint and the semaphore that enforces it.
pub(crate) struct ConcurrencyLimit {
    permits: Arc<Semaphore>,
    state: Mutex<State>,
    /// Permits still to be forgotten when held ones are released.
    debt: AtomicUsize,
    /// `arith.slots()`, readable without the lock (snapshots, metrics).
    current: AtomicUsize,
}

/// A change of the limit, for the log, the span and the gauge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LimitChange {
    pub from: usize,
    pub to: usize,
    /// Gradient mode: the last window's latency over its unqueued part (`1 + queue
    /// share`; by Little's law, calls in flight over the server's capacity).
    pub latency_ratio: Option<f64>,
}

impl ConcurrencyLimit {
    #[cfg(test)]
    pub fn new(ceiling: usize, floor: usize) -> Self {
        Self::with(LimitAlgorithm::Aimd, ceiling, floor)
    }

    pub fn with(algorithm: LimitAlgorithm, ceiling: usize, floor: usize) -> Self {
        let arith = LimitState::with(algorithm, ceiling, floor);
        let slots = arith.slots();
        Self {
            permits: Arc::new(Semaphore::new(slots)),
            state: Mutex::new(State {
                arith,
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
        self.update(|arith| arith.success_after(latency, in_use))
    }

    /// An overload answer to an attempt sent at `sent`, with `held` of the endpoint's other
    /// calls still running (the server's capacity as this client sees it).
    pub fn on_overload(&self, sent: Instant, held: usize) -> Option<LimitChange> {
        let now = Instant::now();
        self.update(|arith| {
            arith.overload(sent, now, held);
        })
    }

    /// A stream the server cut for another request, sent at `sent`, with `held` of the
    /// endpoint's other calls still running ([`LimitState::stream_cut`]).
    pub fn on_stream_cut(&self, sent: Instant, held: usize) -> Option<LimitChange> {
        let now = Instant::now();
        self.update(|arith| {
            arith.stream_cut(sent, now, held);
        })
    }

    /// Back to the start (a restarted server's queue is empty again): the ceiling for
    /// AIMD; for the gradient the search starts over, keeping the baseline (the server's
    /// unloaded latency has not changed).
    pub fn reset(&self) -> Option<LimitChange> {
        self.update(LimitState::reset)
    }

    fn update(&self, f: impl FnOnce(&mut LimitState)) -> Option<LimitChange> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state.arith);
        let (from, to) = (state.granted, state.arith.slots());
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
            latency_ratio: state.arith.latency_ratio(),
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

    #[tokio::test]
    async fn the_semaphore_follows_the_limit_even_with_permits_held() {
        let l = ConcurrencyLimit::new(10, 1);
        let held: Vec<_> = (0..8)
            .map(|_| l.permits().clone().try_acquire_owned().unwrap())
            .collect();
        assert_eq!(l.permits().available_permits(), 2);
        let change = l.on_overload(Instant::now(), 0).unwrap();
        assert_eq!((change.from, change.to), (10, 9));
        assert_eq!(l.permits().available_permits(), 1);
        // Cut below the permits in use: the idle one goes, the rest is debt.
        let later = Instant::now() + Duration::from_millis(1);
        for _ in 0..5 {
            let _ = l.update(|a| {
                a.overload(later, later + Duration::from_secs(1), 0);
                a.forget_last_decrease();
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
        l.on_overload(Instant::now(), 0); // 4 -> 3, one permit of debt
        assert_eq!(l.current(), 3);
        l.reset(); // back to 4: the debt is cancelled, nothing added
        assert_eq!(l.permits().available_permits(), 0);
        for p in held {
            l.release(p);
        }
        assert_eq!(l.permits().available_permits(), 4);
    }
}
