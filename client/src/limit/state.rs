//! The pure limit arithmetic, apart from the semaphore: AIMD on overload answers, and in
//! gradient mode the queue share's verdicts ([`super::gradient`]).

use std::time::{Duration, Instant};

use super::LimitAlgorithm;
use super::gradient::{Gradient, TOLERANCE, Verdict};

/// Factor applied to the limit on overload (Netflix's AIMD limit uses 0.9: gentle cuts
/// keep a server with a fixed queue near its capacity; the sawtooth averages ~95 % of it).
pub const DECREASE: f64 = 0.9;
/// Where a gradient limit starts, unless `max_in_flight` is lower: low enough that the
/// first windows measure the unloaded latency of the servers it is meant for (vLLM and
/// SGLang serve dozens to hundreds of requests at once), high enough that doubling per
/// window reaches 100 slots in three windows.
pub const GRADIENT_START: usize = 16;
/// Factor applied to the limit, at least, when a stream is cut for another request.
pub const CUT_DECREASE: f64 = 0.5;
/// Longest hold after a cut stream, in windows (limits' worth of successes): a server that
/// cuts a stream whenever the limit grows back is probed about once per this many windows.
pub const MAX_HOLD_WINDOWS: f64 = 64.0;
/// A queue share that ends the gradient's search (doubling per window) before the
/// tolerance is reached: from there, doubling could overrun a short server queue.
const SEARCH_SHARE: f64 = 0.2;

/// The limit of one endpoint, as a real number of slots.
#[derive(Debug, Clone)]
pub(crate) struct LimitState {
    limit: f64,
    floor: f64,
    ceiling: f64,
    last_decrease: Option<Instant>,
    /// The lowest the overload answers of the current round trip may take the limit.
    round_floor: f64,
    /// The limit when the current overload episode began.
    episode_start: f64,
    successes_since_cut: f64,
    /// Successes left before the limit may grow again after a cut stream (0: none).
    hold_left: f64,
    /// The last hold's length, in windows.
    hold_windows: f64,
    /// The slots the limit had when a stream was last cut (`usize::MAX`: none yet).
    last_cut_slots: usize,
    /// Set in gradient mode.
    gradient: Option<GradientMode>,
}

/// The gradient's signal and whether it is still searching for the server's capacity.
#[derive(Debug, Clone)]
struct GradientMode {
    signal: Gradient,
    /// Still doubling per window: no queue or overload seen yet.
    searching: bool,
}

impl LimitState {
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
                Some(GradientMode {
                    signal: Gradient::new(),
                    searching: true,
                }),
            ),
        };
        Self {
            limit,
            floor,
            ceiling,
            last_decrease: None,
            round_floor: floor,
            episode_start: limit,
            successes_since_cut: 0.0,
            hold_left: 0.0,
            hold_windows: 0.0,
            last_cut_slots: usize::MAX,
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

    /// The last gradient window's latency over its unqueued part, `1 + queue share`
    /// (gradient mode only): by Little's law, calls in flight over the server's capacity.
    pub fn latency_ratio(&self) -> Option<f64> {
        self.gradient
            .as_ref()
            .and_then(|g| g.signal.last_share)
            .map(|s| 1.0 + s)
    }

    /// The whole number of slots the limit allows now.
    pub fn slots(&self) -> usize {
        self.limit.floor() as usize
    }

    /// A success that took `latency`, with `in_use` of this endpoint's slots taken: the
    /// AIMD step, or in gradient mode one sample of the current window.
    pub fn success_after(&mut self, latency: Duration, in_use: usize) {
        if self.gradient.is_none() {
            self.success();
            return;
        }
        self.successes_since_cut += 1.0;
        let holding = self.holding();
        let slots = self.slots();
        let Some(g) = self.gradient.as_mut() else {
            return;
        };
        let before = self.limit;
        let mut doubled = false;
        match g.signal.observe(latency, in_use, slots) {
            Verdict::Pending => {}
            Verdict::Queued { share, in_use } => {
                g.searching = false;
                // Little's law: a saturated server with a queue share s holds
                // capacity × (1 + s) calls, so in flight ÷ (1 + s) is its capacity. At
                // most halved by one window (a burst of noise costs at most that).
                let capacity = in_use.min(self.limit) / (1.0 + share);
                self.limit = capacity.max(self.limit / 2.0).max(self.floor);
                self.episode_start = self.limit;
            }
            Verdict::Clear { .. } if holding => {}
            Verdict::Clear { share } => {
                g.searching &= share < SEARCH_SHARE;
                // Far below where an overload episode began (a collapse to the floor
                // while the server restarted): double back, as AIMD's fast recovery does.
                let collapsed = self.limit < self.episode_start * DECREASE;
                doubled = g.searching || collapsed;
                self.limit = if doubled {
                    self.limit * 2.0
                } else {
                    // Toward the tolerance, by the room left under it: by √limit
                    // (Netflix's step) far from it, by one slot close to it. On a small
                    // server one √limit step is a large share of its capacity, and a
                    // noisy window just under the tolerance would step past its queue.
                    let room = (TOLERANCE - share).max(0.0) * self.limit;
                    self.limit + room.clamp(1.0, self.limit.sqrt())
                }
                .min(self.ceiling);
                self.episode_start = self.episode_start.max(self.limit);
            }
        }
        if self.limit != before {
            // After a cut or a doubling most of the next window's calls were sent under
            // the old limit: judged, it would measure that one. (Doubling on such a
            // window ran a server of 16 slots with a full queue of 16 to 64 slots.)
            g.signal.limit_changed(self.limit < before || doubled);
        }
    }

    /// AIMD's success: one more slot per `limit` successes, or one per success while far
    /// below where the overload episode began.
    pub fn success(&mut self) {
        self.successes_since_cut += 1.0;
        if self.holding() {
            return;
        }
        let step = if self.limit < self.episode_start * DECREASE {
            1.0
        } else {
            1.0 / self.limit
        };
        self.limit = (self.limit + step).min(self.ceiling);
    }

    /// An overload answer to an attempt sent at `sent`, with `held` of this endpoint's
    /// other calls still running when it came. True if the limit was cut.
    ///
    /// The limit goes down to `held` — what the server was holding of ours when it said
    /// "not now", its capacity as far as this client can tell — but within one round trip
    /// never below [`DECREASE`] × where it stood before it (nor by less than one slot at
    /// the round trip's first answer). A server with a fixed capacity and no queue (vLLM,
    /// SGLang with a bounded one, full) refuses only once every slot it has is taken, so
    /// `held` is that capacity: settling there keeps it full, where cutting by a tenth
    /// left a tenth of it idle until additive growth climbed back. Answers of one round
    /// trip (sent before its first cut) each lower the limit further to their `held`, down
    /// to that floor: a burst sent over the capacity is refused call after call, and the
    /// count still running falls to what the server admitted as the answers come in. A
    /// server that refuses more than our calls explain (restarting, or shared with other
    /// clients) shows a `held` far below the limit, and each round trip cuts by the full
    /// [`DECREASE`].
    ///
    /// In gradient mode the cut is the multiplicative one alone: there the server's queue,
    /// not its refusals, tells its capacity (by Little's law), and the gradient only draws a
    /// refusal when its search doubles past a full queue, where `held` would be the
    /// capacity plus that queue.
    pub fn overload(&mut self, sent: Instant, now: Instant, held: usize) -> bool {
        let held = if self.gradient.is_some() {
            0.0
        } else {
            held as f64
        };
        if self.same_round(sent) {
            // Sent before this round trip's first cut: it may only bring the limit down to
            // what is still running, within the round trip's floor.
            let lower = held.max(self.round_floor);
            return self.lower_to(lower);
        }
        self.begin_round(now, self.limit * DECREASE);
        self.lower_to(held.min(self.limit - 1.0).max(self.round_floor))
    }

    /// A stream the server ended for another request while `held` of this endpoint's
    /// other calls ran (llama.cpp's server cuts a running stream whenever the next request
    /// arrives). An overload signal, but a costly one: a cut throws away the generation it
    /// ends, where a refusal costs nothing, and the servers that cut run one stream at a
    /// time. So the limit falls to what still runs, and at least by [`CUT_DECREASE`] (TCP's
    /// decrease on a loss), once per round trip: a burst of cuts (a server ending every
    /// stream at once) costs one decrease. From 800 slots that is ten round trips to one,
    /// where a tenth per round trip would take sixty, each cutting another stream. The
    /// limit then holds for a window of successes before it grows again, twice as long
    /// as the last hold each time the growth is cut again at the same level (up to
    /// [`MAX_HOLD_WINDOWS`]): growing back at once would probe the level just cut on
    /// every other call.
    pub fn stream_cut(&mut self, sent: Instant, now: Instant, held: usize) -> bool {
        if self.same_round(sent) {
            return false;
        }
        let slots = self.slots();
        self.hold_windows = if slots >= self.last_cut_slots {
            (self.hold_windows * 2.0).min(MAX_HOLD_WINDOWS)
        } else {
            1.0
        };
        self.last_cut_slots = slots;
        let to = (held as f64).min(self.limit * CUT_DECREASE);
        self.begin_round(now, to);
        let cut = self.lower_to(self.round_floor);
        self.hold_left = self.hold_windows * self.slots() as f64;
        cut
    }

    /// Whether an attempt sent at `sent` went out before this round trip's first cut.
    fn same_round(&self, sent: Instant) -> bool {
        self.last_decrease.is_some_and(|last| sent < last)
    }

    /// The first cut of a round trip, at `now`: the round trip's floor is `floor` (never
    /// below the limit's), and the overload episode's bookkeeping.
    fn begin_round(&mut self, now: Instant, floor: f64) {
        // Recovering fast from a collapse and refused after growing: the recovery found
        // the capacity (as TCP's slow start ends at its first loss). Growing on one slot
        // per success would overrun it again at once.
        let recovering = self.limit < self.episode_start * DECREASE;
        if self.successes_since_cut >= self.limit || (recovering && self.successes_since_cut > 0.0)
        {
            self.episode_start = self.limit;
        }
        self.successes_since_cut = 0.0;
        self.round_floor = floor.max(self.floor);
        self.last_decrease = Some(now);
        if let Some(g) = self.gradient.as_mut() {
            g.searching = false;
        }
    }

    /// Counts a success against the hold after a cut stream: true while the limit may not
    /// grow.
    fn holding(&mut self) -> bool {
        if self.hold_left <= 0.0 {
            return false;
        }
        self.hold_left -= 1.0;
        true
    }

    /// Lowers the limit to `to` if that is below it (the gradient's window is restarted).
    fn lower_to(&mut self, to: f64) -> bool {
        if to >= self.limit {
            return false;
        }
        self.limit = to;
        if let Some(g) = self.gradient.as_mut() {
            g.signal.limit_changed(true);
        }
        true
    }

    /// Back to the start (a restarted server's queue is empty again): the ceiling for
    /// AIMD. For the gradient the search starts over from half the limit it had reached
    /// (before any overload episode), so the first window without a queue doubles it back,
    /// and the baseline is kept: the same server, restarted, has the same unloaded latency
    /// and capacity, and a server that came back smaller shows a queue in that window.
    pub fn reset(&mut self) {
        let algorithm = self.algorithm();
        let reached = self.limit.max(self.episode_start);
        let kept = self.gradient.take().map(|g| g.signal);
        *self = Self::with(algorithm, self.ceiling as usize, self.floor as usize);
        if let (Some(g), Some(mut signal)) = (self.gradient.as_mut(), kept) {
            signal.restart();
            g.signal = signal;
            self.limit = (reached / 2.0).max(self.limit).min(self.ceiling);
            self.episode_start = self.limit;
        }
    }

    #[cfg(test)]
    pub fn forget_last_decrease(&mut self) {
        self.last_decrease = None;
    }
}

#[cfg(test)]
mod tests;
