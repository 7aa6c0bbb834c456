//! When an endpoint is unhealthy enough to take out of rotation: evidence, not a count of
//! consecutive failures that may all belong to one slow call.
//!
//! Modelled on Envoy's outlier detection and resilience4j's count-based breaker:
//! - **Consecutive connection failures** (refused or reset): a dead or crashing server
//!   produces these within milliseconds on every call, so K in a row open the breaker at
//!   once (Envoy's `consecutive_gateway_failure`).
//! - **Failure ratio over a sliding window** of the last W attempts, once at least
//!   `min_calls` are in it: server errors (5xx other than 503), timeouts, interrupted
//!   streams and malformed bodies count here only. A long generation that times out on
//!   every attempt cannot take out an endpoint whose other calls succeed; nor can a few
//!   server errors that come back before any success does. A server answering 500 is up,
//!   and its errors come back in milliseconds while its successes take the length of a
//!   generation: right after a start or a re-admission, when a whole burst of calls is
//!   sent at once, a handful of errors in a row is what a healthy server with a small
//!   error rate answers first. A server that fails every call fills the window as fast.
//! - **Overload** (429, 503, and a stream the server ended for another request of ours:
//!   [`super::error::Interruption::Preempted`]) is back-pressure, not ill health: it is left
//!   to the AIMD limit ([`super::limit`]) and never seen here. Nor are the caller's own
//!   mistakes (other 4xx), which say nothing about the server.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::error::ClientError;

/// What one attempt says about its endpoint's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Success,
    /// The server is there but asks us to slow down (429, 503, a stream it cut for another
    /// request of ours).
    Overload,
    /// A dead or crashing server: connection failures.
    Hard,
    /// An answer that failed, or none in time: server errors (5xx but 503), timeouts,
    /// interrupted streams, bad bodies. One may be the call's rather than the server's.
    Soft,
    /// Says nothing about the server (the request's own fault, a local error).
    Neutral,
}

/// 429 and 503 are a server's "not now" (vLLM, SGLang and most gateways answer 503 when
/// their queue is full, 429 when a rate limit is hit).
pub(crate) fn is_overload_status(status: u16) -> bool {
    status == 429 || status == 503
}

impl Signal {
    pub fn of(error: &ClientError) -> Signal {
        match error {
            ClientError::Status { status, .. } if is_overload_status(*status) => Signal::Overload,
            e if e.is_preempted() => Signal::Overload,
            ClientError::Status { status, .. } if *status >= 500 => Signal::Soft,
            ClientError::Status { status: 408, .. } => Signal::Soft,
            ClientError::Connect { .. } => Signal::Hard,
            ClientError::Timeout { .. }
            | ClientError::Interrupted { .. }
            | ClientError::Malformed { .. } => Signal::Soft,
            _ => Signal::Neutral,
        }
    }
}

/// The breaker's settings (from [`super::ResiliencePolicy`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BreakerSettings {
    pub consecutive_hard: u32,
    pub window: usize,
    pub min_calls: usize,
    pub failure_ratio: f64,
}

#[derive(Debug)]
struct Window {
    /// true = failure, oldest first.
    outcomes: VecDeque<bool>,
    failures: usize,
    consecutive_hard: u32,
}

/// One endpoint's breaker state. Opening it (marking the endpoint down) is the caller's.
#[derive(Debug)]
pub(crate) struct Breaker {
    settings: BreakerSettings,
    window: Mutex<Window>,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Self {
        let settings = BreakerSettings {
            consecutive_hard: settings.consecutive_hard.max(1),
            window: settings.window.max(1),
            min_calls: settings.min_calls.clamp(1, settings.window.max(1)),
            failure_ratio: settings.failure_ratio,
        };
        Self {
            window: Mutex::new(Window {
                outcomes: VecDeque::with_capacity(settings.window),
                failures: 0,
                consecutive_hard: 0,
            }),
            settings,
        }
    }

    /// Records one attempt; `Some(reason)` when this evidence says the endpoint is unhealthy.
    pub fn record(&self, signal: Signal) -> Option<String> {
        let failed = match signal {
            Signal::Overload | Signal::Neutral => return None,
            Signal::Success => false,
            Signal::Hard | Signal::Soft => true,
        };
        let s = &self.settings;
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if w.outcomes.len() == s.window && w.outcomes.pop_front() == Some(true) {
            w.failures -= 1;
        }
        w.outcomes.push_back(failed);
        if failed {
            w.failures += 1;
        }
        w.consecutive_hard = match signal {
            Signal::Hard => w.consecutive_hard + 1,
            Signal::Success => 0,
            _ => w.consecutive_hard,
        };
        if w.consecutive_hard >= s.consecutive_hard {
            return Some(format!(
                "{} consecutive connection failures",
                w.consecutive_hard
            ));
        }
        let n = w.outcomes.len();
        if n >= s.min_calls && w.failures as f64 >= s.failure_ratio * n as f64 {
            return Some(format!(
                "{} of the last {n} attempts failed (threshold {:.0} %)",
                w.failures,
                s.failure_ratio * 100.0
            ));
        }
        None
    }

    /// Forget everything (the endpoint was re-admitted after successful probes).
    pub fn reset(&self) {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        w.outcomes.clear();
        w.failures = 0;
        w.consecutive_hard = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Interruption;

    fn breaker() -> Breaker {
        Breaker::new(BreakerSettings {
            consecutive_hard: 5,
            window: 20,
            min_calls: 10,
            failure_ratio: 0.5,
        })
    }

    #[test]
    fn overload_never_opens_it() {
        let b = breaker();
        for _ in 0..1000 {
            assert_eq!(b.record(Signal::Overload), None);
        }
    }

    #[test]
    fn one_slow_call_timing_out_among_successes_does_not_open_it() {
        let b = breaker();
        // A long generation times out 27 times while its neighbours succeed.
        for _ in 0..27 {
            assert_eq!(b.record(Signal::Soft), None);
            for _ in 0..3 {
                assert_eq!(b.record(Signal::Success), None);
            }
        }
    }

    #[test]
    fn consecutive_hard_failures_open_it_fast() {
        let b = breaker();
        for _ in 0..20 {
            b.record(Signal::Success);
        }
        for _ in 0..4 {
            assert_eq!(b.record(Signal::Hard), None);
        }
        let reason = b.record(Signal::Hard).unwrap();
        assert!(reason.contains("5 consecutive"), "{reason}");
        b.reset();
        assert_eq!(b.record(Signal::Hard), None);
    }

    #[test]
    fn server_errors_before_the_first_success_do_not_open_it_but_a_window_of_them_does() {
        let error = Signal::of(&ClientError::Status {
            endpoint: "e".into(),
            status: 500,
            body_snippet: String::new(),
        });
        // A burst just sent to a re-admitted server: its errors are back before any of
        // its generations. (The default window: 50 attempts, at least 20, half failed.)
        let b = Breaker::new(BreakerSettings {
            consecutive_hard: 5,
            window: 50,
            min_calls: 20,
            failure_ratio: 0.5,
        });
        for _ in 0..6 {
            assert_eq!(b.record(error), None);
        }
        for _ in 0..20 {
            assert_eq!(b.record(Signal::Success), None);
        }
        // A server that fails every call: the window opens it.
        let b = breaker();
        for _ in 0..9 {
            assert_eq!(b.record(error), None);
        }
        assert!(b.record(error).is_some(), "10 of 10 failed");
    }

    #[test]
    fn a_failure_ratio_over_the_window_opens_it_but_needs_min_calls() {
        let b = breaker();
        // Fewer than min_calls: no verdict even at 100 % failures (soft).
        for _ in 0..9 {
            assert_eq!(b.record(Signal::Soft), None);
        }
        let reason = b.record(Signal::Soft).unwrap();
        assert!(reason.contains("10 of the last 10"), "{reason}");
        // A window mostly of successes: soft failures below the ratio stay closed.
        let b = breaker();
        for i in 0..200 {
            let s = if i % 3 == 0 {
                Signal::Soft
            } else {
                Signal::Success
            };
            assert_eq!(b.record(s), None, "at {i}");
        }
    }

    #[test]
    fn classification() {
        let status = |s| ClientError::Status {
            endpoint: "e".into(),
            status: s,
            body_snippet: String::new(),
        };
        assert_eq!(Signal::of(&status(429)), Signal::Overload);
        assert_eq!(Signal::of(&status(503)), Signal::Overload);
        assert_eq!(Signal::of(&status(500)), Signal::Soft);
        assert_eq!(Signal::of(&status(502)), Signal::Soft);
        assert_eq!(Signal::of(&status(408)), Signal::Soft);
        assert_eq!(Signal::of(&status(400)), Signal::Neutral);
        let timeout = ClientError::Timeout {
            endpoint: "e".into(),
            after: std::time::Duration::from_secs(1),
        };
        assert_eq!(Signal::of(&timeout), Signal::Soft);
        let interrupted = |how| ClientError::Interrupted {
            endpoint: "e".into(),
            message: "x".into(),
            how,
        };
        assert_eq!(Signal::of(&interrupted(Interruption::Broken)), Signal::Soft);
        assert_eq!(Signal::of(&interrupted(Interruption::Ended)), Signal::Soft);
        assert_eq!(
            Signal::of(&interrupted(Interruption::Preempted)),
            Signal::Overload,
            "a stream cut for another request of ours is back-pressure"
        );
        let connect = ClientError::Connect {
            endpoint: "e".into(),
            message: "refused".into(),
        };
        assert_eq!(Signal::of(&connect), Signal::Hard);
    }
}
