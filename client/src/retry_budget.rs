//! How many failed attempts one call may spend, by kind of failure (shared by chat and
//! embeddings calls, so both give up by the same rules).
//!
//! Each kind has its own budget, so one kind cannot starve another:
//! - overload (429, 503, a stream the server cut for another request of ours:
//!   `Interruption::Preempted`): back-pressure, bounded in time by the outage budget, not in
//!   attempts;
//! - timeouts: `max_timeout_attempts`, each attempt allowed `timeout_growth` times longer
//!   than the one before; a hedged attempt that a crash or a bad answer ends gives its
//!   timeout back (its timeout is not what ended it);
//! - malformed bodies: `max_malformed_attempts`;
//! - a crash (a refused or cut connection) on an endpoint that went down under the attempt
//!   (marked down now, or at some point since the attempt was sent): the endpoint's
//!   failure, not the call's. It spends no attempt and does not count towards the hard
//!   cap; such crashes are bounded in time, by the outage budget from the first of them
//!   (the call meanwhile waits for a healthy endpoint, under the same budget);
//! - the rest: `max_attempts`.
//!
//! Whatever the mix, the charged attempts stay below a hard cap.

use std::time::Instant;

use super::breaker::Signal;
use super::config::ResiliencePolicy;
use super::error::ClientError;

/// Longest a timed-out call's attempt may be stretched (`timeout_growth` compounds).
const MAX_TIMEOUT_SCALE: f64 = 64.0;

/// The budgets of one call.
pub(crate) struct RetryBudget<'p> {
    policy: &'p ResiliencePolicy,
    counted: u32,
    malformed: u32,
    timeouts: u32,
    /// The next attempt's timeout over the endpoint's: grown by `timeout_growth` at each
    /// timeout, never shrunk (a timeout given back leaves it where it is).
    scale: f64,
    /// Attempts charged to the call (overload answers are bounded in time instead).
    charged: u32,
    hard_cap: u32,
    overloaded_since: Option<Instant>,
    /// Sent time of the first attempt that the endpoint's crash ended.
    crashing_since: Option<Instant>,
}

impl<'p> RetryBudget<'p> {
    pub fn new(policy: &'p ResiliencePolicy) -> Self {
        let hard_cap = policy
            .max_attempts
            .max(1)
            .saturating_mul(4)
            .saturating_add(policy.max_malformed_attempts)
            .saturating_add(policy.max_timeout_attempts);
        Self {
            policy,
            counted: 0,
            malformed: 0,
            timeouts: 0,
            scale: 1.0,
            charged: 0,
            hard_cap,
            overloaded_since: None,
            crashing_since: None,
        }
    }

    /// How much longer than the endpoint's timeout the next attempt may take: every
    /// timeout so far (given back or not) compounds `timeout_growth`, so a long generation
    /// can finish, and one that a crash cut is retried at once on the rung it had reached
    /// rather than climbing the ladder again (which would add the shorter rungs'
    /// timeouts to the time it needs without a crash).
    pub fn timeout_scale(&self) -> f64 {
        self.scale
    }

    /// One more timeout: the budget spent by one, the next attempt's timeout grown.
    fn on_timeout(&mut self) {
        self.timeouts += 1;
        self.scale = (self.scale * self.policy.timeout_growth.max(1.0)).min(MAX_TIMEOUT_SCALE);
    }

    /// How much longer each timeout rung is than the one before (at least 1).
    pub fn growth(&self) -> f64 {
        self.policy.timeout_growth.max(1.0)
    }

    /// The longest client backoff between attempts.
    pub fn backoff_max(&self) -> std::time::Duration {
        self.policy.backoff_max
    }

    /// The longest an attempt of this call may run, over the endpoint's timeout: the
    /// attempt on the last rung that may be hedged runs beside its hedge until the hedge's
    /// own timeout. An attempt that races another after a crash gets this much, whatever
    /// rung the call has reached: it is there for one uninterrupted run of a generation
    /// already known to be long.
    pub fn longest_attempt_scale(&self) -> f64 {
        let growth = self.policy.timeout_growth.max(1.0);
        let hedged_rungs = self.policy.max_timeout_attempts.saturating_sub(2);
        let rung = growth
            .powi(i32::try_from(hedged_rungs).unwrap_or(i32::MAX))
            .min(MAX_TIMEOUT_SCALE);
        rung * (1.0 + growth)
    }

    /// Whether another timeout would still leave the timeout budget unspent (a timed-out
    /// attempt may then be hedged instead of abandoned).
    pub fn may_hedge(&self) -> bool {
        self.timeouts.saturating_add(1) < self.policy.max_timeout_attempts.max(1)
    }

    /// An attempt passed its timeout and goes on while a hedge attempt starts.
    pub fn on_hedge(&mut self) {
        self.on_timeout();
        self.charged += 1;
    }

    /// A hedged attempt (charged a timeout when its hedge started) ended otherwise than by
    /// its own deadline: a connection failure, a SIGKILLed or restarted server, a bad
    /// answer. Its timeout is not what ended it, so the timeout is given back: the call may
    /// still wait as long for a generation as before, rather than losing the one attempt
    /// that could run long enough to a crash. The failure is charged to its own kind
    /// instead, and to the hard cap, which bounds how often this can happen.
    pub fn on_pending_failure(
        &mut self,
        error: &ClientError,
        started: Instant,
        went_down: bool,
        now: Instant,
    ) {
        if matches!(error, ClientError::Timeout { .. }) || !error.is_retryable() {
            return;
        }
        self.timeouts = self.timeouts.saturating_sub(1);
        // Exhaustion shows at the call's next failure: the attempt running now goes on.
        let _ = self.exhausted_by(error, started, went_down, now);
    }

    /// Charges a retryable failure of an attempt sent at `started`, whose endpoint went
    /// down under it (`went_down`: marked down now or since the attempt was sent) or not.
    /// True when the call must give up.
    pub fn exhausted_by(
        &mut self,
        error: &ClientError,
        started: Instant,
        went_down: bool,
        now: Instant,
    ) -> bool {
        let policy = self.policy;
        let overload = Signal::of(error) == Signal::Overload;
        let exhausted = if overload {
            let since = *self.overloaded_since.get_or_insert(started);
            now.saturating_duration_since(since) >= policy.outage_budget
        } else if matches!(error, ClientError::Malformed { .. }) {
            self.malformed += 1;
            self.malformed >= policy.max_malformed_attempts.max(1)
        } else if error.is_crash() && went_down {
            // The endpoint's crash, not the call's: the call waits for a healthy endpoint
            // instead of burning its attempts, for as long as the outage budget lasts.
            let since = *self.crashing_since.get_or_insert(started);
            return now.saturating_duration_since(since) >= policy.outage_budget;
        } else if matches!(error, ClientError::Timeout { .. }) {
            self.on_timeout();
            self.timeouts >= policy.max_timeout_attempts.max(1)
        } else {
            self.counted += 1;
            self.counted >= policy.max_attempts.max(1)
        };
        if !overload {
            self.charged += 1;
        }
        exhausted || self.charged >= self.hard_cap
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Interruption;

    fn policy() -> ResiliencePolicy {
        ResiliencePolicy {
            max_attempts: 3,
            max_malformed_attempts: 2,
            max_timeout_attempts: 2,
            timeout_growth: 2.0,
            outage_budget: Duration::from_secs(60),
            ..ResiliencePolicy::default()
        }
    }

    #[test]
    fn each_kind_of_failure_spends_its_own_budget() {
        let p = policy();
        let mut b = RetryBudget::new(&p);
        let now = Instant::now();
        let malformed = ClientError::Malformed {
            endpoint: "e".into(),
            status: 200,
            snippet: String::new(),
        };
        let status = ClientError::Status {
            endpoint: "e".into(),
            status: 500,
            body_snippet: String::new(),
        };
        let connect = ClientError::Connect {
            endpoint: "e".into(),
            message: String::new(),
        };
        assert!(!b.exhausted_by(&status, now, false, now));
        assert!(!b.exhausted_by(&malformed, now, false, now));
        assert!(!b.exhausted_by(&status, now, false, now));
        // A connection failure on a down endpoint is not charged to the attempts.
        assert!(!b.exhausted_by(&connect, now, true, now));
        assert!(
            b.exhausted_by(&malformed, now, false, now),
            "2 malformed bodies"
        );
        let mut b = RetryBudget::new(&p);
        assert!(!b.exhausted_by(&status, now, false, now));
        assert!(!b.exhausted_by(&status, now, false, now));
        assert!(b.exhausted_by(&status, now, false, now), "3 attempts");
    }

    #[test]
    fn the_longest_attempt_is_the_last_hedged_rung_beside_its_hedge() {
        // Timeouts of 1, 2, 4, 8: the attempt on rung 4 runs beside the last one until that
        // one's timeout, 4 + 8 = 12 timeouts in all.
        let p = ResiliencePolicy {
            max_timeout_attempts: 4,
            ..policy()
        };
        assert_eq!(RetryBudget::new(&p).longest_attempt_scale(), 12.0);
        let p = ResiliencePolicy {
            max_timeout_attempts: 1,
            ..policy()
        };
        assert_eq!(RetryBudget::new(&p).longest_attempt_scale(), 3.0);
    }

    #[test]
    fn timeouts_stretch_the_next_attempt_and_end_the_hedging() {
        let p = policy();
        let mut b = RetryBudget::new(&p);
        assert_eq!(b.timeout_scale(), 1.0);
        assert!(b.may_hedge());
        b.on_hedge();
        assert_eq!(b.timeout_scale(), 2.0);
        assert!(!b.may_hedge(), "a second timeout would spend the budget");
        let timeout = ClientError::Timeout {
            endpoint: "e".into(),
            after: Duration::from_secs(1),
        };
        assert!(b.exhausted_by(&timeout, Instant::now(), false, Instant::now()));
    }

    #[test]
    fn a_hedged_attempt_cut_short_gives_its_timeout_back() {
        let p = ResiliencePolicy {
            max_timeout_attempts: 3,
            ..policy()
        };
        let mut b = RetryBudget::new(&p);
        let now = Instant::now();
        b.on_hedge();
        b.on_hedge();
        assert!(
            !b.may_hedge(),
            "two hedges spend a budget of three timeouts"
        );
        assert_eq!(b.timeout_scale(), 4.0);
        // The first hedged attempt reaches its own deadline: that was a timeout.
        let timeout = ClientError::Timeout {
            endpoint: "e".into(),
            after: Duration::from_secs(1),
        };
        b.on_pending_failure(&timeout, now, false, now);
        assert!(!b.may_hedge());
        // The second is cut by a crash: its timeout is given back.
        let reset = ClientError::Connect {
            endpoint: "e".into(),
            message: "connection reset".into(),
        };
        b.on_pending_failure(&reset, now, true, now);
        assert!(b.may_hedge(), "the crash did not spend a timeout");
        assert_eq!(b.timeout_scale(), 4.0, "nor took the ladder back down");
        b.on_hedge();
        assert_eq!(b.timeout_scale(), 8.0);
        assert!(!b.may_hedge());
        // Crashes of an endpoint that stays up are bounded by the hard cap: 3 × 4 + 2 + 3 =
        // 17 charged attempts.
        let mut b = RetryBudget::new(&p);
        let mut cycles = 0;
        loop {
            b.on_hedge();
            b.on_pending_failure(&reset, now, false, now);
            cycles += 1;
            if b.exhausted_by(&reset, now, false, now) {
                break;
            }
            assert!(cycles < 100, "never exhausted");
        }
        assert!(cycles <= 9, "{cycles}");
    }

    #[test]
    fn the_endpoints_crashes_are_bounded_in_time_not_attempts() {
        let p = policy();
        let mut b = RetryBudget::new(&p);
        let reset = ClientError::Connect {
            endpoint: "e".into(),
            message: "connection reset".into(),
        };
        let first = Instant::now();
        for _ in 0..100 {
            assert!(!b.exhausted_by(&reset, first, true, first));
        }
        let later = first + p.outage_budget;
        assert!(b.exhausted_by(&reset, later, true, later));
    }

    #[test]
    fn overload_is_bounded_in_time_not_attempts() {
        let p = ResiliencePolicy {
            outage_budget: Duration::from_millis(30),
            ..policy()
        };
        let mut b = RetryBudget::new(&p);
        let busy = ClientError::Status {
            endpoint: "e".into(),
            status: 429,
            body_snippet: String::new(),
        };
        let first = Instant::now();
        for _ in 0..50 {
            assert!(!b.exhausted_by(&busy, first, false, first));
        }
        let later = first + Duration::from_millis(40);
        assert!(b.exhausted_by(&busy, later, false, later));
    }

    #[test]
    fn a_stream_cut_for_another_request_is_overload_and_a_broken_one_an_attempt() {
        let p = policy();
        let interrupted = |how| ClientError::Interrupted {
            endpoint: "e".into(),
            message: String::new(),
            how,
        };
        let now = Instant::now();
        let mut b = RetryBudget::new(&p);
        for _ in 0..50 {
            assert!(
                !b.exhausted_by(&interrupted(Interruption::Preempted), now, false, now),
                "cut streams spend time, not attempts"
            );
        }
        for how in [Interruption::Broken, Interruption::Ended] {
            let mut b = RetryBudget::new(&p);
            assert!(!b.exhausted_by(&interrupted(how), now, false, now));
            assert!(!b.exhausted_by(&interrupted(how), now, false, now));
            assert!(
                b.exhausted_by(&interrupted(how), now, false, now),
                "{how:?}: 3 attempts"
            );
        }
    }
}
