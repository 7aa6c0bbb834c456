//! The gradient limit's signal: how long a server's queue is, estimated from the latency
//! of successes against the server's unloaded latency.
//!
//! A request that queues at the server waits before its service starts: queueing *adds*
//! a wait `w` to every request's latency, short and long alike, while the service time
//! varies by the request (an LLM call's length by an order of magnitude). So each window
//! of successes is reduced to a low quantile of its latencies ([`LOW_QUANTILE`]): the
//! short requests, whose latency a wait inflates most and whose spread is narrow. The
//! baseline is the lowest of those quantiles over the last [`BASELINE_WINDOWS`] windows,
//! so a server that got slower for good is tracked after that many windows, and a window
//! that ran unqueued brings it back down. The window's wait estimate is `w = low −
//! baseline`; divided by the mean service time (the window's mean less `w`, smoothed over
//! windows: one window's mean of a long-tailed latency varies by a quarter) it is the
//! **queue share**: by Little's law, the requests queued at the server over the requests
//! it serves at once, for a saturated server (`in flight = capacity × (1 + share)`).
//!
//! Why not the ratio of window medians (Vegas's RTT ratio): with a long-tailed latency
//! (lognormal σ = 1) the median of 64 calls varies by ±16 % from window to window and a
//! low percentile of such medians sits ~20 % under the true one, so one window in ten
//! showed a 1.5 × "inflation" without any queue, and each cut a chain-bound run could not
//! grow back from. The low quantile of a window varies by ~0.06–0.09 s there (a twentieth
//! of the mean service time), and a delay that hits only some calls (a client scheduled
//! late now and then) hardly moves it.
//!
//! Only successes that finished with every slot taken are collected (see
//! [`Gradient::observe`]). What a full window says is a [`Verdict`]; the limit's
//! arithmetic acts on it. A change of the limit starts a new window (the one in progress
//! measured the old limit), and after a cut or a doubling the next full window is skipped
//! too: most of its calls were sent, and queued, under the old limit (TCP's one reaction
//! per round trip).

use std::collections::VecDeque;
use std::time::Duration;

/// Fewest successes per window: the low quantile of fewer is mostly one sample.
pub const WINDOW_MIN: usize = 32;
/// Windows whose low quantiles make the baseline.
pub const BASELINE_WINDOWS: usize = 20;
/// Quantile of a window's latencies that is compared with the baseline.
pub const LOW_QUANTILE: f64 = 0.1;
/// Queue share a window may show without shrinking the limit: a queue of a quarter of
/// what the server serves at once keeps it busy between two windows and adds a quarter of
/// a service time to each call. Without any queue the estimate stays under ~0.15 (the
/// baseline is the lowest of many noisy quantiles, so it sits a little low).
pub const TOLERANCE: f64 = 0.25;
/// Weight of a window's mean service time in the smoothed one (about the last eight
/// windows count).
const SERVICE_SMOOTHING: f64 = 0.125;
/// Full windows skipped after a cut or a doubling.
const SKIP_AFTER_STEP: usize = 1;

/// What one full window says about the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verdict {
    /// The window is not full yet.
    Pending,
    /// The server queues more than [`TOLERANCE`] allows. `in_use`: the mean number of
    /// this endpoint's calls in flight during the window.
    Queued { share: f64, in_use: f64 },
    /// No queue worth the name, with every slot taken: the limit holds the client back.
    Clear { share: f64 },
}

/// A window of successes being collected.
#[derive(Debug, Clone, Default)]
struct Window {
    latencies: Vec<f64>,
    in_use_sum: f64,
}

/// The gradient's state: the current window and the baseline's history.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gradient {
    window: Window,
    /// Low quantiles of the last windows, oldest first.
    lows: VecDeque<f64>,
    /// Mean service time (window mean less its wait), smoothed over windows, and how many
    /// windows it holds.
    service: Option<(f64, u32)>,
    /// The current window's calls started together (the first window, or the first after
    /// a restart): its mean is not a service time.
    batch_start: bool,
    /// Full windows still to be skipped after a cut or a doubling.
    skip: usize,
    /// The last full window's queue share.
    pub last_share: Option<f64>,
}

impl Gradient {
    /// A gradient whose first full window does not count towards the service time: its
    /// calls all started at once, and the first of them to finish are the shortest (that
    /// window's mean read 0.4–0.7 of the true one in the closed-loop model, and the next
    /// windows' shares read high enough to cut a server with no queue).
    pub fn new() -> Self {
        Self {
            batch_start: true,
            ..Self::default()
        }
    }

    /// The limit changed: the window in progress measured the old one. After a large
    /// step (`skip_next`: a cut or a doubling) the next full window is skipped too: most of
    /// its calls were sent, and queued, under the old limit.
    pub fn limit_changed(&mut self, skip_next: bool) {
        self.window = Window::default();
        if skip_next {
            self.skip = SKIP_AFTER_STEP;
        }
    }

    /// Forget the current window, keep the baseline (a restarted server's unloaded
    /// latency has not changed); as at the start, the first window's calls started at
    /// once.
    pub fn restart(&mut self) {
        self.window = Window::default();
        self.skip = 0;
        self.batch_start = true;
        self.last_share = None;
    }

    /// One success that took `latency` with `in_use` of the endpoint's slots taken,
    /// under a limit of `limit` slots.
    pub fn observe(&mut self, latency: Duration, in_use: usize, limit: usize) -> Verdict {
        // Only a success while every slot was taken says something about the limit: with
        // slots idle the limit holds nothing back, and as demand ebbs (the end of a
        // problem's batch) the last calls to finish are the long ones, whose low quantile
        // would look like a queue.
        if in_use < limit {
            return Verdict::Pending;
        }
        let w = &mut self.window;
        w.latencies.push(latency.as_secs_f64());
        w.in_use_sum += in_use as f64;
        if w.latencies.len() < WINDOW_MIN.max(limit) {
            return Verdict::Pending;
        }
        let window = std::mem::take(&mut self.window);
        if self.skip > 0 {
            self.skip -= 1;
            return Verdict::Pending;
        }
        let n = window.latencies.len() as f64;
        let low = quantile(window.latencies.clone(), LOW_QUANTILE);
        let mean = window.latencies.iter().sum::<f64>() / n;
        if self.lows.len() == BASELINE_WINDOWS {
            self.lows.pop_front();
        }
        self.lows.push_back(low);
        let base = self.lows.iter().copied().fold(f64::INFINITY, f64::min);
        let wait = (low - base).max(0.0);
        // The mean of one window of a long-tailed latency varies by a quarter; smoothed,
        // by a tenth. The first windows are averaged with equal weights, so the first
        // one does not count eight times.
        let service = (mean - wait).max(low);
        let smoothed = match self.service {
            _ if std::mem::take(&mut self.batch_start) => self.service,
            None => Some((service, 1)),
            Some((s, k)) => {
                let weight = (1.0 / (f64::from(k) + 1.0)).max(SERVICE_SMOOTHING);
                Some((s + weight * (service - s), k.saturating_add(1)))
            }
        };
        self.service = smoothed;
        let scale = smoothed.map_or(service, |(s, _)| s);
        let share = wait / scale.max(f64::MIN_POSITIVE);
        self.last_share = Some(share);
        if share > TOLERANCE {
            Verdict::Queued {
                share,
                in_use: window.in_use_sum / n,
            }
        } else {
            Verdict::Clear { share }
        }
    }
}

/// The `q` quantile of `values` (nearest rank below; `values` non-empty).
fn quantile(mut values: Vec<f64>, q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let i = ((values.len() - 1) as f64 * q).floor() as usize;
    values.get(i).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Feeds one window of `WINDOW_MIN` successes, latencies 0.1, 0.2, … 3.2 s plus
    /// `extra`, all with every one of `limit` slots taken.
    fn window(g: &mut Gradient, extra: f64, limit: usize) -> Verdict {
        let mut last = Verdict::Pending;
        for i in 0..WINDOW_MIN {
            assert_eq!(last, Verdict::Pending, "judged before the window was full");
            last = g.observe(secs(0.1 * (i + 1) as f64 + extra), limit, limit);
        }
        last
    }

    #[test]
    fn quantiles_take_the_nearest_rank_below() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(v.clone(), 0.1), 1.0);
        assert_eq!(quantile(v.clone(), 0.5), 5.0);
        assert_eq!(quantile(v, 1.0), 10.0);
    }

    #[test]
    fn a_wait_added_to_every_call_is_a_queue_share_of_the_service_time() {
        let mut g = Gradient::default();
        // The first window is its own baseline: low quantile 0.4 s (the 4th of 32), mean
        // 1.65 s.
        assert_eq!(window(&mut g, 0.0, 20), Verdict::Clear { share: 0.0 });
        // Every call 0.5 s later: wait 0.5 s over a service of 1.65 s.
        let expect = 0.5 / 1.65;
        match window(&mut g, 0.5, 20) {
            Verdict::Queued { share, in_use } => {
                assert!((share - expect).abs() < 1e-9, "{share}");
                assert_eq!(in_use, 20.0);
            }
            other => panic!("{other:?}"),
        }
        assert!(g.last_share.is_some_and(|s| (s - expect).abs() < 1e-9));
        // 0.3 s later: a share of 0.18, within the tolerance.
        assert!(matches!(window(&mut g, 0.3, 20), Verdict::Clear { share } if share < TOLERANCE));
        // Faster than the baseline: no wait at all.
        assert_eq!(window(&mut g, -0.05, 20), Verdict::Clear { share: 0.0 });
    }

    #[test]
    fn only_successes_with_every_slot_taken_count_and_the_window_grows_with_the_limit() {
        let mut g = Gradient::default();
        // Slots idle: nothing collected, however slow.
        for _ in 0..10 * WINDOW_MIN {
            assert_eq!(g.observe(secs(9.0), 39, 40), Verdict::Pending);
        }
        // A limit of 40 needs 40 samples, not WINDOW_MIN.
        for _ in 0..39 {
            assert_eq!(g.observe(secs(1.0), 40, 40), Verdict::Pending);
        }
        assert_eq!(g.observe(secs(1.0), 41, 40), Verdict::Clear { share: 0.0 });
    }

    #[test]
    fn a_long_tail_does_not_look_like_a_queue() {
        let mut g = Gradient::default();
        window(&mut g, 0.0, 32);
        // The same short calls, but the long ones ten times as long: the mean triples,
        // the low quantile does not move.
        let mut last = Verdict::Pending;
        for i in 0..WINDOW_MIN {
            let l = 0.1 * (i + 1) as f64;
            last = g.observe(secs(if i < 16 { l } else { 10.0 * l }), 32, 32);
        }
        assert_eq!(last, Verdict::Clear { share: 0.0 });
    }

    #[test]
    fn after_a_change_the_window_restarts_and_after_a_decrease_one_is_skipped() {
        let mut g = Gradient::default();
        window(&mut g, 0.0, 20);
        for _ in 0..10 {
            g.observe(secs(5.0), 20, 20);
        }
        // An increase: the ten slow samples were taken under the old limit.
        g.limit_changed(false);
        assert_eq!(window(&mut g, 0.0, 20), Verdict::Clear { share: 0.0 });
        // A cut or a doubling: the next full window (calls sent before it) is skipped.
        g.limit_changed(true);
        assert_eq!(window(&mut g, 2.0, 20), Verdict::Pending);
        assert_eq!(window(&mut g, 0.0, 20), Verdict::Clear { share: 0.0 });
    }

    #[test]
    fn the_first_window_sets_the_baseline_but_not_the_service_time() {
        // The first calls all started at once: the first 32 to finish are the shortest
        // (the same low quantile as later windows, 0.4 s, but no long tail: mean 0.71 s).
        let first = |g: &mut Gradient| {
            for i in 0..WINDOW_MIN {
                let l = if i < 8 { 0.1 * (i + 1) as f64 } else { 0.8 };
                g.observe(secs(l), 32, 32);
            }
        };
        // Then every call waits 0.36 s: a share of 0.36 / 1.65 = 0.22 of the true service
        // time, within the tolerance…
        let mut g = Gradient::new();
        first(&mut g);
        assert!(
            matches!(window(&mut g, 0.36, 32), Verdict::Clear { share } if (share - 0.36 / 1.65).abs() < 1e-9)
        );
        // …but 0.31 of one averaged with the first window's mean.
        let mut g = Gradient::default();
        first(&mut g);
        assert!(matches!(window(&mut g, 0.36, 32), Verdict::Queued { .. }));
        // A restart is a batch start too.
        let mut g = Gradient::new();
        first(&mut g);
        window(&mut g, 0.0, 32);
        g.restart();
        first(&mut g);
        assert!(matches!(window(&mut g, 0.36, 32), Verdict::Clear { .. }));
    }

    #[test]
    fn the_baseline_follows_a_server_that_got_slower_for_good() {
        let mut g = Gradient::default();
        window(&mut g, 0.0, 32);
        // Every call 1 s slower from now on: a queue at first…
        assert!(matches!(window(&mut g, 1.0, 32), Verdict::Queued { .. }));
        for _ in 0..BASELINE_WINDOWS - 2 {
            window(&mut g, 1.0, 32);
        }
        // …until the unloaded window has left the baseline's history.
        assert_eq!(window(&mut g, 1.0, 32), Verdict::Clear { share: 0.0 });
    }
}
