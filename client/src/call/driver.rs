//! The call driver: carries out a [`CallPlan`]'s actions and turns what happens into its
//! events. It owns the IO of a call (the slot wait, the attempts' futures, the hedge and
//! backoff timers) and decides nothing: every rule is the plan's.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;

use super::acquire::{Bodies, OutageClock, Ready};
use super::attempt::{Running, first_ended, maybe};
use super::job::Job;
use super::log;
use super::plan::{Action, AttemptId, CallPlan, Event};
use super::{Shared, spread, tag_headers};
use crate::endpoint::{AttemptError, Endpoint};
use crate::error::ClientError;
use crate::router::Group;

/// One call in progress: its plan, and the IO the plan's actions set going.
struct Driver<'a, J: Job> {
    shared: &'a Shared,
    job: &'a J,
    group: &'a Group,
    headers: HeaderMap,
    plan: CallPlan<'a, Arc<Endpoint>>,
    waited: &'a OutageClock,
    cache: &'a Bodies<J::Body>,
    running: Vec<Running<'a, J::Reply>>,
    acquiring: Option<BoxFuture<'a, Result<Ready<'a, J::Body>, ClientError>>>,
    ready: Option<Ready<'a, J::Body>>,
    hedge: Pin<Box<tokio::time::Sleep>>,
    hedge_armed: bool,
    backoff: Option<BoxFuture<'a, ()>>,
    answer: Option<J::Response>,
    /// The last failure of an attempt, and its span, for the retry's log line and event.
    last: Option<(tracing::Span, ClientError)>,
    /// Events the driver made itself (an attempt it gave up), fed before waiting again.
    events: VecDeque<Event<Arc<Endpoint>>>,
    /// The endpoint of the last crash seen while it was still marked up, and its breaker
    /// trips when that attempt was sent: whether it went down is told at the next acquire.
    last_crash: Option<(Arc<Endpoint>, u64)>,
}

impl Shared {
    /// One call of `job` on `group_name`, run by its plan.
    pub(super) async fn drive<J: Job>(
        &self,
        group_name: &str,
        job: &J,
    ) -> Result<J::Response, ClientError> {
        if self.cancel.is_cancelled() {
            return Err(ClientError::Shutdown);
        }
        let group = self
            .groups
            .get(group_name)
            .ok_or_else(|| ClientError::UnknownGroup {
                group: group_name.into(),
            })?;
        let (waited, cache) = (OutageClock::default(), Mutex::new(Vec::with_capacity(1)));
        let plan = CallPlan::new(&self.policy, group.members.len(), job.stream(), job.hedge());
        let mut driver = Driver {
            shared: self,
            job,
            group,
            headers: tag_headers(job.tags()),
            plan,
            waited: &waited,
            cache: &cache,
            running: Vec::with_capacity(2),
            acquiring: None,
            ready: None,
            hedge: Box::pin(tokio::time::sleep(Duration::ZERO)),
            hedge_armed: false,
            backoff: None,
            answer: None,
            last: None,
            events: VecDeque::new(),
            last_crash: None,
        };
        let mut actions = driver.plan.start();
        loop {
            for action in actions.drain(..) {
                if let Some(end) = driver.apply(action) {
                    return end;
                }
            }
            // A slot the plan did not launch an attempt on goes back.
            driver.ready = None;
            let event = match driver.events.pop_front() {
                Some(event) => event,
                None => driver.next_event().await?,
            };
            actions = driver.plan.on(event);
        }
    }
}

impl<'a, J: Job> Driver<'a, J> {
    /// Carries out one action; the call's result when the action ends it.
    fn apply(&mut self, action: Action<Arc<Endpoint>>) -> Option<Result<J::Response, ClientError>> {
        match action {
            Action::Acquire { avoid, exclude } => {
                self.backoff = None;
                let (shared, job, group) = (self.shared, self.job, self.group);
                let (waited, cache) = (self.waited, self.cache);
                let route = (avoid, exclude);
                self.acquiring = Some(Box::pin(shared.ready(job, group, route, waited, cache)));
            }
            Action::Launch { attempt, scale } => self.launch(attempt, scale),
            Action::Hedge(at) => {
                self.hedge_armed = at.is_some();
                if let Some(at) = at {
                    self.hedge
                        .as_mut()
                        .reset(tokio::time::Instant::from_std(at));
                }
            }
            Action::SetAside { attempt, hedged } => self.set_aside(attempt, hedged),
            Action::GiveUp { attempt, after } => {
                let i = self.running.iter().position(|r| r.id == attempt)?;
                let run = self.running.swap_remove(i);
                let endpoint = run.slot.endpoint.name().clone();
                let error = AttemptError::from(ClientError::Timeout { endpoint, after });
                let event = self.ended(run, Err(error));
                self.events.push_back(event);
            }
            Action::Backoff {
                delay,
                server_given,
            } => self.back_off(delay, server_given),
            Action::Succeed { .. } => return Some(self.answer.take().ok_or(ClientError::Shutdown)),
            Action::Fail { error, exhausted } => {
                if exhausted {
                    log::failed(self.job, &self.group.name, self.plan.attempts(), &error);
                }
                return Some(Err(error));
            }
        }
        None
    }

    /// Sends an attempt on the slot just acquired.
    fn launch(&mut self, attempt: AttemptId, scale: f64) {
        if let Some(ready) = self.ready.take() {
            let run = Running::launch(self.job, ready, attempt, scale, self.headers.clone());
            self.running.push(run);
        }
    }

    fn set_aside(&self, attempt: AttemptId, hedged: bool) {
        if let Some(run) = self.running.iter().find(|r| r.id == attempt) {
            log::set_aside(&self.group.name, run, hedged);
        }
    }

    fn back_off(&mut self, delay: Duration, server_given: bool) {
        let delay = if server_given { spread(delay) } else { delay };
        if let Some((span, error)) = &self.last {
            log::retrying::<J>(&self.group.name, self.plan.attempts(), span, error, delay);
        }
        // A client backoff ends early when an endpoint changes health: a crash shows up as
        // a failure moments before the breaker opens, and a re-admitted endpoint should get
        // its waiting calls at once, not after backoffs that grew while it was down.
        let mut health = self.shared.health.subscribe();
        self.backoff = Some(Box::pin(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = health.changed(), if !server_given => {}
            }
        }));
    }

    /// Waits for what happens next: a shutdown, an attempt's end, a slot, a timer.
    async fn next_event(&mut self) -> Result<Event<Arc<Endpoint>>, ClientError> {
        let event = tokio::select! {
            biased;
            _ = self.shared.cancel.cancelled() => Event::Shutdown,
            (i, r) = first_ended(&mut self.running), if !self.running.is_empty() => {
                let run = self.running.swap_remove(i);
                self.ended(run, r)
            }
            r = maybe(self.acquiring.as_mut()), if self.acquiring.is_some() => {
                self.acquiring = None;
                let (slot, enc, now) = r?;
                let endpoint = slot.endpoint.clone();
                let timeout = endpoint.spec.request_timeout;
                self.ready = Some((slot, enc, now));
                let crash_confirmed = self.last_crash.take().is_some_and(|(ep, trips)| {
                    !ep.is_healthy() || ep.trips.load(Ordering::Relaxed) != trips
                });
                Event::Acquired { endpoint, timeout, crash_confirmed, now }
            }
            _ = &mut self.hedge, if self.hedge_armed => {
                self.hedge_armed = false;
                Event::HedgeDue
            }
            () = maybe(self.backoff.as_mut()), if self.backoff.is_some() => {
                self.backoff = None;
                Event::BackoffOver
            }
        };
        Ok(event)
    }

    /// An attempt ended: what the plan hears of it, and what the driver keeps.
    fn ended(
        &mut self,
        run: Running<'a, J::Reply>,
        result: Result<J::Reply, AttemptError>,
    ) -> Event<Arc<Endpoint>> {
        let outcome = run.end(self.shared, self.job, result, self.plan.attempts());
        self.answer = outcome.answer.or(self.answer.take());
        if outcome.failure.is_some() {
            self.last = outcome.failure;
        }
        if outcome.crash.is_some() {
            self.last_crash = outcome.crash;
        }
        outcome.event
    }
}
