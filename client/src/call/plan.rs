//! The rules of one call, as a state machine without IO: [`CallPlan`].
//!
//! The plan owns the call's retry budget, its backoff and its attempts (at most two run at
//! once: the current one and one set aside). It is fed [`Event`]s — a slot acquired, the
//! hedge timer fired, an attempt finished, the backoff ended — and answers with
//! [`Action`]s for the driver (`call/driver.rs`) to carry out: acquire a slot (avoiding or
//! excluding endpoints), launch an attempt, arm or disarm the hedge timer, set an attempt
//! aside, give one up, back off, succeed or fail. It never sleeps, sends or reads a clock:
//! every instant comes with the event, so each rule is a table test (`plan/tests.rs`).
//!
//! The rules, in the order the module doc of `call` gives them:
//! - **hedge at the timeout**: a non-streaming attempt that passes its rung's timeout goes on
//!   (set aside, holding its slot) while a hedge attempt starts, preferably elsewhere; the
//!   first answer wins. With no timeout left in the budget it is given up instead.
//! - **give up the older attempt**: a hedge that itself passes its timeout gives up the
//!   attempt set aside before it, so a call holds at most two slots.
//! - **race after a crash**: when a crash (a refused or cut connection) ends one of two
//!   attempts, or the only attempt of a generation that ran past its endpoint's timeout, a
//!   replacement starts at once on another endpoint than the survivor's and runs beside it,
//!   for as long as any attempt of the call may run. Neither of the two is hedged while the
//!   other runs; one left alone is hedged at its timeout again.
//! - **retry budget**: each kind of failure spends its own budget ([`RetryBudget`]);
//!   a permanent error ends the call at once; an exhausted budget ends it, after the
//!   attempt set aside (its last chance) has finished.
//! - **a crash is the endpoint's**: an attempt cut or refused because its endpoint went
//!   down spends no attempt, only time (the outage budget). A crash seen before the
//!   endpoint is marked down (the breaker opens a moment after the connections break) is
//!   charged when the next attempt starts, once it is known whether the endpoint went down
//!   meanwhile. A request in flight at `suspect_after_crashes` crashes of endpoints that
//!   answered other calls while it ran is suspected of causing them: it is stopped and
//!   named (`ClientError::SuspectedCrash`).
//! - **backoff**: the server's `Retry-After`, or nothing for an endpoint now marked down
//!   (the next acquire waits for a healthy one, under the outage budget), or an
//!   exponential backoff with jitter that an endpoint's change of health ends early.

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff};

use crate::config::ResiliencePolicy;
use crate::error::ClientError;
use crate::retry_budget::RetryBudget;

#[cfg(test)]
mod tests;

/// An attempt's number within its call (1 for the first).
pub(crate) type AttemptId = u32;

/// Why an attempt ended without an answer, as the driver saw it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub error: ClientError,
    /// The server's `Retry-After`, if it gave one.
    pub retry_after: Option<Duration>,
    /// Whether the endpoint is marked healthy once this failure has been recorded.
    pub healthy: bool,
    /// Whether the endpoint went down under the attempt: it is marked down now, or was at
    /// some point since the attempt was sent.
    pub went_down: bool,
    /// Whether the endpoint answered other calls while the attempt ran.
    pub served: bool,
}

/// A crash charged once the next attempt starts, when it is known whether its endpoint
/// went down.
#[derive(Debug)]
struct Unconfirmed {
    error: ClientError,
    started: Instant,
    served: bool,
}

/// What happened, for the plan to answer.
#[derive(Debug)]
pub(crate) enum Event<E> {
    /// A slot on `endpoint` is held and the request is ready to go there; `timeout` is the
    /// endpoint's request timeout. `crash_confirmed`: the endpoint of the call's last crash
    /// seen while it was still marked up has been marked down since.
    Acquired {
        endpoint: E,
        timeout: Duration,
        crash_confirmed: bool,
        now: Instant,
    },
    /// The hedge timer armed by [`Action::Hedge`] fired.
    HedgeDue,
    /// An attempt ended: with an answer (`Ok`), or a failure already recorded against its
    /// endpoint.
    Finished {
        attempt: AttemptId,
        result: Result<(), Failure>,
        now: Instant,
    },
    /// The backoff ended: its delay passed, or an endpoint changed health.
    BackoffOver,
    /// The client is shutting down.
    Shutdown,
}

/// What the driver must do next, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action<E> {
    /// Wait for a slot (replacing any wait under way): not on `avoid` while another
    /// endpoint of the group is healthy, never on `exclude`.
    Acquire {
        avoid: Option<E>,
        exclude: Option<E>,
    },
    /// Send attempt `attempt` on the slot just acquired, allowed `scale` times the
    /// endpoint's timeout.
    Launch { attempt: AttemptId, scale: f64 },
    /// Fire [`Event::HedgeDue`] at this instant (replacing the armed one), or disarm it.
    Hedge(Option<Instant>),
    /// The current attempt runs on beside the next one: `hedged` when it passed its
    /// timeout, else because a crash cut the attempt beside it.
    SetAside { attempt: AttemptId, hedged: bool },
    /// Stop this attempt: it ends with a timeout after `after`. The driver records the
    /// failure and reports it as [`Event::Finished`].
    GiveUp { attempt: AttemptId, after: Duration },
    /// Wait before the next [`Action::Acquire`]: `delay`, of which `server_given` says
    /// whether the server asked for it (`Retry-After`: kept, only spread a little) or it is
    /// the client's own backoff (ended early by a change of health).
    Backoff { delay: Duration, server_given: bool },
    /// The call is answered by this attempt.
    Succeed { attempt: AttemptId },
    /// The call failed; `exhausted` when its retry budget ran out (rather than a
    /// permanent error or a shutdown).
    Fail { error: ClientError, exhausted: bool },
}

/// One attempt the plan is waiting on.
#[derive(Debug, Clone)]
struct Attempt<E> {
    id: AttemptId,
    endpoint: E,
    started: Instant,
    /// The endpoint's request timeout.
    timeout: Duration,
    /// This attempt's own timeout (its rung): when it is hedged, and the deadline of the
    /// older attempt a hedge gives up.
    rung: Duration,
    hedge_armed: bool,
    /// Launched to race another attempt after a crash: it may run as long as any attempt
    /// of the call, so the attempt beside it is not hedged to give it up.
    race: bool,
    /// Set aside when it passed its timeout (charged a timeout then).
    hedged: bool,
}

/// Where the call is.
#[derive(Debug)]
enum Phase {
    Acquiring,
    Running,
    BackingOff,
    /// The budget is spent; the attempt set aside may still answer. Holds the error the
    /// call fails with otherwise.
    LastChance(ClientError),
    Done,
}

/// One call's plan: its budget, backoff and attempts. `E` names an endpoint.
pub(crate) struct CallPlan<'p, E> {
    budget: RetryBudget<'p>,
    backoff: ExponentialBackoff,
    /// Non-streaming with more than one timeout attempt: a stream's idle timeout already
    /// tells a dead server from a long generation, so streams are never hedged.
    hedging: bool,
    /// The group has more than one endpoint (racing needs two).
    several: bool,
    attempts: u32,
    last_failed: Option<E>,
    current: Option<Attempt<E>>,
    pending: Option<Attempt<E>>,
    /// Given up, their `Finished` still to come: (id, set aside when hedged, started).
    retired: Vec<(AttemptId, bool, Instant)>,
    /// The next attempt replaces one a crash cut while another ran: it goes only where the
    /// pending attempt is not.
    racing: bool,
    /// The next attempt is set aside at once, for a second one to race it: the call's only
    /// attempt, past its endpoint's timeout (a long generation), was cut by a crash.
    race_on_launch: bool,
    /// The last crash, seen while its endpoint was still marked up, not yet charged.
    unconfirmed: Option<Unconfirmed>,
    /// Crashes of endpoints that answered other calls while this call's attempt ran.
    suspect: u32,
    suspect_after: u32,
    phase: Phase,
}

impl<'p, E: Clone> CallPlan<'p, E> {
    /// A plan for a call on a group of `members` endpoints; `stream` calls and
    /// `hedge == false` calls (embeddings) are never hedged.
    pub fn new(policy: &'p ResiliencePolicy, members: usize, stream: bool, hedge: bool) -> Self {
        let backoff = backon::ExponentialBuilder::default()
            .with_min_delay(policy.backoff_min)
            .with_max_delay(policy.backoff_max)
            .with_jitter()
            .without_max_times()
            .build();
        Self {
            hedging: hedge && !stream && policy.max_timeout_attempts > 1,
            several: members > 1,
            budget: RetryBudget::new(policy),
            backoff,
            attempts: 0,
            last_failed: None,
            current: None,
            pending: None,
            retired: Vec::new(),
            racing: false,
            race_on_launch: false,
            unconfirmed: None,
            suspect: 0,
            suspect_after: policy.suspect_after_crashes,
            phase: Phase::Acquiring,
        }
    }

    /// Attempts launched so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The first action: find a slot.
    pub fn start(&mut self) -> Vec<Action<E>> {
        self.phase = Phase::Acquiring;
        vec![self.acquire()]
    }

    /// The plan's answer to `event`.
    pub fn on(&mut self, event: Event<E>) -> Vec<Action<E>> {
        if matches!(self.phase, Phase::Done) {
            return Vec::new();
        }
        match event {
            Event::Acquired {
                endpoint,
                timeout,
                crash_confirmed,
                now,
            } => {
                if let Some(end) = self.confirm_crash(crash_confirmed, now) {
                    return end;
                }
                self.on_acquired(endpoint, timeout, now)
            }
            Event::HedgeDue => self.on_hedge_due(),
            Event::Finished {
                attempt,
                result,
                now,
            } => self.on_finished(attempt, result, now),
            Event::BackoffOver => {
                if !matches!(self.phase, Phase::BackingOff) {
                    return Vec::new();
                }
                self.phase = Phase::Acquiring;
                vec![self.acquire()]
            }
            Event::Shutdown => self.done(Action::Fail {
                error: ClientError::Shutdown,
                exhausted: false,
            }),
        }
    }

    /// Charges the last crash seen while its endpoint was still up, now that it is known
    /// whether the endpoint went down; the call's end if that spends its budget.
    fn confirm_crash(&mut self, went_down: bool, now: Instant) -> Option<Vec<Action<E>>> {
        let u = self.unconfirmed.take()?;
        let failure = Failure {
            error: u.error,
            retry_after: None,
            healthy: !went_down,
            went_down,
            served: u.served,
        };
        if let Some(end) = self.suspected(&failure) {
            return Some(end);
        }
        if !self
            .budget
            .exhausted_by(&failure.error, u.started, went_down, now)
        {
            return None;
        }
        Some(self.out_of_budget(failure.error))
    }

    /// The call's end once its budget is spent: at once, or after the attempt set aside
    /// (its last chance) has ended.
    fn out_of_budget(&mut self, error: ClientError) -> Vec<Action<E>> {
        if self.pending.is_some() {
            self.phase = Phase::LastChance(error);
            return Vec::new();
        }
        self.done(Action::Fail {
            error,
            exhausted: true,
        })
    }

    /// Counts a crash of an endpoint that answered other calls while the attempt ran; the
    /// call's end once there are `suspect_after` of them.
    fn suspected(&mut self, f: &Failure) -> Option<Vec<Action<E>>> {
        if !(f.error.is_crash() && f.went_down && f.served) || self.suspect_after == 0 {
            return None;
        }
        self.suspect += 1;
        if self.suspect < self.suspect_after {
            return None;
        }
        let endpoint = f.error.endpoint().cloned().unwrap_or_else(|| "".into());
        Some(self.done(Action::Fail {
            error: ClientError::SuspectedCrash {
                endpoint,
                crashes: self.suspect,
            },
            exhausted: false,
        }))
    }

    fn done(&mut self, action: Action<E>) -> Vec<Action<E>> {
        self.phase = Phase::Done;
        vec![action]
    }

    /// Acquire a slot: excluding the pending attempt's endpoint when the next attempt races
    /// it, avoiding the endpoint of the last failure.
    fn acquire(&self) -> Action<E> {
        let exclude = self
            .pending
            .as_ref()
            .filter(|_| self.racing)
            .map(|p| p.endpoint.clone());
        Action::Acquire {
            avoid: exclude.clone().or_else(|| self.last_failed.clone()),
            exclude,
        }
    }

    fn on_acquired(&mut self, endpoint: E, timeout: Duration, now: Instant) -> Vec<Action<E>> {
        if !matches!(self.phase, Phase::Acquiring) {
            return Vec::new();
        }
        let race = std::mem::take(&mut self.racing) && self.pending.is_some();
        self.attempts += 1;
        let timeout_scale = self.budget.timeout_scale();
        let growth = self.budget.growth();
        let rung = timeout.mul_f64(timeout_scale);
        let scale = if race {
            self.budget
                .longest_attempt_scale()
                .max(timeout_scale * (1.0 + growth))
        } else if self.hedging {
            timeout_scale * (1.0 + growth)
        } else {
            timeout_scale
        };
        let hedge_armed = self.hedging && !race;
        let attempt = Attempt {
            id: self.attempts,
            endpoint,
            started: now,
            timeout,
            rung,
            hedge_armed,
            race,
            hedged: false,
        };
        let mut actions = vec![
            Action::Launch {
                attempt: attempt.id,
                scale,
            },
            Action::Hedge(hedge_armed.then_some(now + rung)),
        ];
        self.current = Some(attempt);
        self.phase = Phase::Running;
        if std::mem::take(&mut self.race_on_launch) && self.pending.is_none() {
            actions.extend(self.race_current());
        }
        actions
    }

    /// The current attempt is set aside for a replacement to race it from another
    /// endpoint.
    fn race_current(&mut self) -> Vec<Action<E>> {
        let Some(mut attempt) = self.current.take() else {
            return Vec::new();
        };
        attempt.hedged = false;
        attempt.hedge_armed = false;
        let id = attempt.id;
        self.pending = Some(attempt);
        self.racing = true;
        self.phase = Phase::Acquiring;
        vec![
            Action::SetAside {
                attempt: id,
                hedged: false,
            },
            Action::Hedge(None),
            self.acquire(),
        ]
    }

    fn on_hedge_due(&mut self) -> Vec<Action<E>> {
        if !matches!(self.phase, Phase::Running) {
            return Vec::new();
        }
        let Some(current) = self.current.as_mut().filter(|c| c.hedge_armed) else {
            return Vec::new();
        };
        current.hedge_armed = false;
        if self.pending.as_ref().is_some_and(|p| p.race) {
            // Beside an attempt racing it after a crash, which may run longer than this
            // one's next rung, this attempt is not hedged: a hedge would give that one up.
            return vec![Action::Hedge(None)];
        }
        if !self.budget.may_hedge() {
            // No hedge left: the attempt is given up at its timeout.
            return vec![Action::GiveUp {
                attempt: current.id,
                after: current.rung,
            }];
        }
        self.budget.on_hedge();
        let mut current = self.current.take().expect("checked above");
        let mut actions = Vec::with_capacity(4);
        if let Some(old) = self.pending.take() {
            // The older attempt reached its own deadline meanwhile: given up.
            self.retired.push((old.id, old.hedged, old.started));
            actions.push(Action::GiveUp {
                attempt: old.id,
                after: current.rung,
            });
        }
        current.hedged = true;
        self.last_failed = Some(current.endpoint.clone());
        actions.push(Action::SetAside {
            attempt: current.id,
            hedged: true,
        });
        self.pending = Some(current);
        self.phase = Phase::Acquiring;
        actions.push(self.acquire());
        actions
    }

    fn on_finished(
        &mut self,
        id: AttemptId,
        result: Result<(), Failure>,
        now: Instant,
    ) -> Vec<Action<E>> {
        if let Some(i) = self.retired.iter().position(|r| r.0 == id) {
            let (_, hedged, started) = self.retired.swap_remove(i);
            if let Err(f) = &result {
                self.charge_pending(hedged, f, started, now);
            }
            return Vec::new();
        }
        let is = |a: &Option<Attempt<E>>| a.as_ref().is_some_and(|a| a.id == id);
        let (pending, current) = (is(&self.pending), is(&self.current));
        let f = match result {
            Ok(()) if pending || current => return self.done(Action::Succeed { attempt: id }),
            Ok(()) => return Vec::new(),
            Err(f) => f,
        };
        if let Some(attempt) = self.pending.take_if(|_| pending) {
            return self.on_pending_failed(attempt, f, now);
        }
        if let Some(attempt) = self.current.take_if(|_| current) {
            return self.on_current_failed(attempt, f, now);
        }
        Vec::new()
    }

    /// Budget accounting for an attempt that was set aside: one hedged at its timeout (and
    /// charged a timeout then) gives that timeout back when something else ended it.
    fn charge_pending(&mut self, hedged: bool, f: &Failure, started: Instant, now: Instant) {
        if hedged {
            self.budget
                .on_pending_failure(&f.error, started, f.went_down, now);
        } else if f.error.is_retryable() {
            // Exhaustion shows at the call's next failure: the attempt running now goes on.
            let _ = self
                .budget
                .exhausted_by(&f.error, started, f.went_down, now);
        }
    }

    fn on_pending_failed(
        &mut self,
        pending: Attempt<E>,
        f: Failure,
        now: Instant,
    ) -> Vec<Action<E>> {
        self.charge_pending(pending.hedged, &f, pending.started, now);
        if let Some(end) = self.suspected(&f) {
            return end;
        }
        match std::mem::replace(&mut self.phase, Phase::Acquiring) {
            Phase::Acquiring | Phase::BackingOff => vec![self.acquire()],
            Phase::LastChance(error) => self.done(Action::Fail {
                error,
                exhausted: true,
            }),
            Phase::Running => {
                self.phase = Phase::Running;
                if f.error.is_crash() && self.several {
                    return self.race_current();
                }
                // An attempt left unhedged while another ran beside it is hedged at its
                // timeout once alone, like any other attempt (at once if past it): on a
                // restarted server it may be a hung request as well as a long generation.
                // With no hedge left it runs to its own deadline.
                let hedging = self.hedging;
                let may_hedge = self.budget.may_hedge();
                match self.current.as_mut() {
                    Some(c) if hedging && !c.hedge_armed && may_hedge => {
                        c.hedge_armed = true;
                        vec![Action::Hedge(Some(c.started + c.rung))]
                    }
                    _ => Vec::new(),
                }
            }
            Phase::Done => {
                self.phase = Phase::Done;
                Vec::new()
            }
        }
    }

    fn on_current_failed(
        &mut self,
        current: Attempt<E>,
        f: Failure,
        now: Instant,
    ) -> Vec<Action<E>> {
        let mut actions = Vec::with_capacity(2);
        if current.hedge_armed {
            actions.push(Action::Hedge(None));
        }
        if !f.error.is_retryable() {
            actions.extend(self.done(Action::Fail {
                error: f.error,
                exhausted: false,
            }));
            return actions;
        }
        let crash = f.error.is_crash();
        if crash && !f.went_down {
            // Its endpoint may be going down (the breaker opens a moment after the
            // connections break): charged when the next attempt starts.
            self.unconfirmed = Some(Unconfirmed {
                error: f.error.clone(),
                started: current.started,
                served: f.served,
            });
        } else if let Some(end) = self.suspected(&f) {
            actions.extend(end);
            return actions;
        } else if self
            .budget
            .exhausted_by(&f.error, current.started, f.went_down, now)
        {
            // An attempt set aside may still answer: it is the call's last chance.
            actions.extend(self.out_of_budget(f.error));
            return actions;
        }
        let (delay, server_given) = match f.retry_after {
            Some(after) => (after, true),
            // Marked down: no point sleeping; the next acquire routes to a healthy
            // endpoint, or waits for this one to be re-admitted and goes at once.
            None if !f.healthy => (Duration::ZERO, false),
            None => (
                self.backoff.next().unwrap_or(self.budget.backoff_max()),
                false,
            ),
        };
        // Cut by a crash beside a pending attempt: the retry races that one from another
        // endpoint (not a second copy beside it).
        self.racing = self.several && self.pending.is_some() && crash;
        // The only attempt of a generation longer than the endpoint's timeout, cut by a
        // crash: retried at once where it can go, and a second attempt goes to another
        // endpoint (the crashed one, once re-admitted) beside it.
        self.race_on_launch = self.several
            && self.hedging
            && self.pending.is_none()
            && crash
            && now.saturating_duration_since(current.started) >= current.timeout;
        self.last_failed = Some(current.endpoint);
        self.phase = Phase::BackingOff;
        actions.push(Action::Backoff {
            delay,
            server_given,
        });
        actions
    }
}
