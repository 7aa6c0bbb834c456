//! When an attempt past its timeout is hedged while its endpoints have no slot to spare.
//!
//! A non-streaming attempt past its timeout is either a long generation, which answers
//! later, or a hung request, which never does; nothing on the wire tells them apart. A
//! hedge rescues the hung one at the cost of running beside the long one until it
//! answers. With slots idle that cost is nothing, so the hedge starts at the timeout.
//! With every slot of the group taken, the hedge takes a slot a waiting call would have
//! had, and hedging every attempt at the timeout spends the long generations' whole tail
//! past the timeout twice: with `lognormal:1s:1` latencies and an 8 s timeout, 4.8 % of the
//! servers' work (measured in `tmas bench soak`'s full schedule).
//!
//! Hedging an attempt at time `t` instead of waiting costs a slot for the rest of every
//! live attempt still running at `t`, and waiting costs a slot for every hung attempt. The
//! expected waste `E[(L − t)⁺]·(1 − h) + t·h` (live latency `L`, hung share `h`) is
//! smallest where the survival `P(L > t)` equals `h / (1 − h)`: hedge at the `1 − h`
//! quantile of the live latency, the point where an attempt still running is as likely
//! to be hung as to be one of the longest generations. Both are measured per endpoint:
//! the latency of its successful non-streaming attempts, in a relative-error quantile
//! sketch (DDSketch, 1 %), and the hung share as the attempts a hedge beat, over all that
//! ended so. The estimate starts at one hung attempt in two (a Laplace prior), which puts
//! the hedge at the timeout until evidence says hangs are rare; a hedge that often wins
//! (a server whose fresh samples are shorter) keeps it there.
//!
//! The delay is bounded by `timeout_growth` rung timeouts, so a hedge starts before the
//! older attempt's own deadline (`1 + timeout_growth` rung timeouts).

use std::sync::Mutex;
use std::time::Duration;

use sketches_ddsketch::{Config, DDSketch};

/// Latencies and hedge outcomes of one endpoint's non-streaming attempts.
pub(crate) struct HedgeDelay {
    inner: Mutex<Inner>,
}

struct Inner {
    /// Seconds of each successful non-streaming attempt.
    latencies: DDSketch,
    /// Attempts past their timeout that a hedge answered before (counted as hung).
    beaten: u64,
}

impl Default for HedgeDelay {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                latencies: DDSketch::new(Config::defaults()),
                beaten: 0,
            }),
        }
    }
}

impl std::fmt::Debug for HedgeDelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HedgeDelay")
            .field("hung_share", &self.hung_share())
            .finish_non_exhaustive()
    }
}

impl HedgeDelay {
    /// A non-streaming attempt here answered after `latency`.
    pub fn on_success(&self, latency: Duration) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.latencies.add(latency.as_secs_f64());
        }
    }

    /// An attempt here past its timeout was beaten by its hedge.
    pub fn on_beaten(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.beaten += 1;
        }
    }

    /// Estimated share of attempts here that hang: `(beaten + 1) ÷ (ended + 2)`.
    pub fn hung_share(&self) -> f64 {
        self.inner.lock().map_or(0.5, |inner| {
            let ended = inner.latencies.count() as u64 + inner.beaten;
            (inner.beaten + 1) as f64 / (ended + 2) as f64
        })
    }

    /// How long after its start an attempt whose timeout is `timeout` is hedged when no
    /// slot of its group is idle: the `1 − hung share` quantile of the latencies here,
    /// within `timeout..=latest`.
    pub fn hedge_at(&self, timeout: Duration, latest: Duration) -> Duration {
        let h = self.hung_share();
        let quantile = self
            .inner
            .lock()
            .ok()
            .and_then(|inner| inner.latencies.quantile(1.0 - h).ok().flatten());
        let Some(secs) = quantile.filter(|s| s.is_finite() && *s > 0.0) else {
            return timeout;
        };
        Duration::from_secs_f64(secs).clamp(timeout, latest.max(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(8);
    const LATEST: Duration = Duration::from_secs(16);

    /// Latencies 1..=n ms × `scale`, one each.
    fn with_latencies(n: u64, scale: Duration) -> HedgeDelay {
        let d = HedgeDelay::default();
        for i in 1..=n {
            d.on_success(scale * u32::try_from(i).unwrap_or(u32::MAX) / 1000);
        }
        d
    }

    #[test]
    fn without_evidence_the_hedge_starts_at_the_timeout() {
        let d = HedgeDelay::default();
        assert_eq!(d.hung_share(), 0.5);
        assert_eq!(d.hedge_at(TIMEOUT, LATEST), TIMEOUT);
        // A few successes put the prior's median well below the timeout.
        let d = with_latencies(10, Duration::from_secs(2));
        assert_eq!(d.hedge_at(TIMEOUT, LATEST), TIMEOUT);
    }

    #[test]
    fn rare_hangs_put_the_hedge_at_the_matching_latency_quantile() {
        // 1000 latencies spread evenly over 0–20 s; 9 attempts beaten by their hedges:
        // hung share (9 + 1) ÷ (1009 + 2) ≈ 0.0099, so the hedge waits for the 99th
        // percentile, 19.8 s, bounded by the latest start.
        let d = with_latencies(1000, Duration::from_secs(20));
        for _ in 0..9 {
            d.on_beaten();
        }
        assert!((d.hung_share() - 10.0 / 1011.0).abs() < 1e-12);
        assert_eq!(d.hedge_at(TIMEOUT, LATEST), LATEST);
        let at = d.hedge_at(TIMEOUT, Duration::from_secs(60));
        assert!(
            (at.as_secs_f64() - 19.8).abs() < 0.3,
            "the 99th percentile of 0–20 s, within the sketch's 1 %: {at:?}"
        );
    }

    #[test]
    fn frequent_hedge_wins_keep_the_hedge_at_the_timeout() {
        // A third of the attempts past their timeout lose to the hedge: the quantile
        // falls below the timeout, which bounds it.
        let d = with_latencies(300, Duration::from_secs(20));
        for _ in 0..150 {
            d.on_beaten();
        }
        assert_eq!(d.hedge_at(TIMEOUT, LATEST), TIMEOUT);
    }

    #[test]
    fn a_latest_start_below_the_timeout_leaves_the_timeout() {
        let d = with_latencies(1000, Duration::from_secs(20));
        assert_eq!(
            d.hedge_at(TIMEOUT, Duration::from_secs(4)),
            TIMEOUT,
            "never earlier than the timeout"
        );
    }
}
