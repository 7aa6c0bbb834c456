//! One call, from routing to a response: slots, rate limits, retries, outage waits.
//!
//! Runs in the caller's task (no actor round-trip per call). Order of waits:
//! a healthy endpoint in the group (bounded by the outage budget) → a global slot →
//! the routed healthy endpoint's slot (re-routed if that endpoint goes down while
//! we queue) → global then endpoint rate limits → the HTTP attempt.
//!
//! Each kind of failure has its own budget (`retry_budget`), so one kind cannot starve
//! another:
//! - overload (429, 503): back-pressure; retried after the server's `Retry-After` (or a
//!   backoff) for as long as the outage budget lasts, counted in time, not in attempts;
//! - timeouts: `max_timeout_attempts`, each attempt allowed `timeout_growth` times longer
//!   than the one before, so a long generation can finish. A non-streaming attempt that
//!   passes its timeout is not abandoned: it goes on (holding its slot) while a hedge
//!   attempt starts, preferably on another endpoint, and the first answer wins. A long
//!   generation then costs its own length, not the timeouts before it, and a hung request
//!   costs one timeout. The older attempt is given up once the hedge reaches its own
//!   timeout (its deadline is `1 + timeout_growth` timeouts), so a call holds at most two
//!   slots. Hedge or give up is decided when the timeout passes, since a pending attempt
//!   that fails meanwhile otherwise than by its deadline gives its timeout back. When a
//!   crash (a refused or cut connection) ends one of two such attempts, or the only
//!   attempt of a generation that had run past the endpoint's timeout, a replacement
//!   starts at once on an endpoint other than the other attempt's (waiting, if need be,
//!   for the crashed one to be re-admitted) and may run for as long as any attempt of the
//!   call: a generation longer than a server stays up between crashes then gets a fresh
//!   attempt on each server as it restarts, instead of one at a time. Neither of the two is
//!   hedged while the other runs (a hedge would give the racing one up); an attempt left
//!   alone is hedged at its timeout like any other, as it may be a hung request;
//! - malformed bodies: `max_malformed_attempts`;
//! - the rest (connection failures, interrupted generations, 5xx): `max_attempts`. A
//!   failure on an endpoint that is now marked down is not charged: the call waits for a
//!   healthy endpoint instead (outage budget), and goes as soon as one is back.
//!
//! Embeddings calls take the same path with their own body and reply (`call/embeddings.rs`).

mod embeddings;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::wire::{CallTags, ChatRequest, ChatResponse};

use super::body::{Completion, encode_request};
use super::body_cache::{BodyCache, EncodedBody};
use super::config::{ResiliencePolicy, Routing};
use super::endpoint::{AttemptError, Endpoint, Health, Limiter, take};
use super::error::ClientError;
use super::permanent::PermanentErrors;
use super::request_body::RequestBody;
use super::retry_budget::RetryBudget;
use super::router::Group;
use super::telemetry;
use super::tokens::fit_max_tokens;

/// Everything calls share; owned by the [`super::ModelClient`] handle.
pub(crate) struct Shared {
    pub groups: HashMap<Arc<str>, Arc<Group>>,
    pub endpoints: Vec<Arc<Endpoint>>,
    pub global: Arc<Semaphore>,
    pub global_cap: usize,
    pub global_in_flight: AtomicUsize,
    pub global_rpm: Option<Limiter>,
    pub global_tpm: Option<Limiter>,
    pub policy: ResiliencePolicy,
    pub health: Arc<Health>,
    pub cancel: CancellationToken,
    /// Bodies of recent calls, reused by calls that share their prompt.
    pub bodies: BodyCache,
    pub permanent: Arc<PermanentErrors>,
}

/// Holds a global and an endpoint slot; releasing it updates the in-flight counters and
/// gives the endpoint permit back to its concurrency limit (which may keep it).
struct Slot<'a> {
    endpoint: Arc<Endpoint>,
    global_in_flight: &'a AtomicUsize,
    _global: OwnedSemaphorePermit,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.endpoint.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.global_in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(permit) = self.permit.take() {
            self.endpoint.limit.release(permit);
        }
    }
}

/// Up to +20 % on a server-given delay, so the calls one overload wave turned away do not
/// all come back in the same millisecond (cheap: the clock's nanoseconds, no RNG state).
fn spread(delay: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    delay.mul_f64(1.0 + f64::from(nanos % 1000) / 5000.0)
}

/// Counts a call as queued on an endpoint while it waits for a slot there.
struct Queued(Arc<Endpoint>);

impl Queued {
    fn new(ep: &Arc<Endpoint>) -> Self {
        ep.queued.fetch_add(1, Ordering::Relaxed);
        Self(ep.clone())
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

type AttemptFuture = Pin<Box<dyn Future<Output = Result<Completion, AttemptError>> + Send>>;

/// An attempt past its timeout that goes on while a hedge attempt runs; it keeps its slot
/// and may still answer first.
struct Pending<'a> {
    fut: AttemptFuture,
    slot: Slot<'a>,
    span: tracing::Span,
    started: Instant,
    max_tokens: u32,
    /// Charged a timeout when it became pending (hedged at its timeout), rather than set
    /// aside to race a replacement for an attempt a crash ended.
    hedged: bool,
    /// Launched to race another attempt after a crash: it may run as long as any attempt
    /// of the call, so the attempt beside it is not hedged again to give it up.
    race: bool,
}

/// What finished first: the call's own wait, or its pending attempt.
enum Raced<'a, T> {
    Own(T),
    Pending(Box<Pending<'a>>, Result<Completion, AttemptError>),
}

/// Runs `own` while polling the pending attempt, if any.
async fn race<'a, T>(
    pending: &mut Option<Pending<'a>>,
    own: impl Future<Output = T>,
) -> Raced<'a, T> {
    let Some(mut p) = pending.take() else {
        return Raced::Own(own.await);
    };
    let first = tokio::select! {
        r = &mut p.fut => Err(r),
        t = own => Ok(t),
    };
    match first {
        Err(r) => Raced::Pending(Box::new(p), r),
        Ok(t) => {
            *pending = Some(p);
            Raced::Own(t)
        }
    }
}

/// How the current attempt's wait ended.
enum Step {
    Shutdown,
    Done(Result<Completion, AttemptError>),
    /// Its timeout passed: it becomes the pending attempt and a hedge starts.
    Hedge,
    /// The pending attempt was cut by a crash: this one becomes the pending attempt and a
    /// replacement races it on another endpoint.
    Race,
}

/// A request body ready for one endpoint (serialized once, reused on retries).
struct Prepared {
    endpoint: Arc<Endpoint>,
    body: RequestBody,
    max_tokens: u32,
    /// Estimated prompt + `max_tokens`, charged to the token rate limits.
    budget_tokens: u32,
}

fn tag_headers(tags: &CallTags) -> HeaderMap {
    // Header values must be visible ASCII; anything else is replaced, never rejected.
    fn value(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap_or_else(|_| {
            let clean: String = text
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() || c == ' ' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            HeaderValue::from_str(&clean).unwrap_or(HeaderValue::from_static("invalid"))
        })
    }
    let mut h = HeaderMap::with_capacity(3);
    h.insert(HeaderName::from_static("x-tmas-role"), value(&tags.role));
    h.insert(
        HeaderName::from_static("x-tmas-problem"),
        value(&tags.problem),
    );
    h.insert(
        HeaderName::from_static("x-tmas-iteration"),
        HeaderValue::from(tags.iteration),
    );
    if let Some(call) = &tags.call {
        h.insert(HeaderName::from_static("x-tmas-call"), value(call));
    }
    h
}

impl Shared {
    fn shutdown_error(&self) -> ClientError {
        ClientError::Shutdown
    }

    /// Wait (bounded by the outage budget) until the group has a healthy endpoint.
    async fn wait_for_health(
        &self,
        group: &Group,
        waited: &mut Duration,
    ) -> Result<(), ClientError> {
        let mut rx = self.health.subscribe();
        if group.any_healthy() {
            return Ok(());
        }
        let budget = self.policy.outage_budget;
        group.enter_outage(budget);
        let remaining = budget.saturating_sub(*waited);
        if remaining.is_zero() {
            return Err(ClientError::Outage {
                group: group.name.clone(),
                waited: *waited,
            });
        }
        tracing::debug!(group = %group.name, "call waiting: every endpoint of the group is down");
        let t0 = Instant::now();
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
            _ = rx.changed() => {}
            _ = tokio::time::sleep(remaining) => {}
        }
        *waited += t0.elapsed();
        Ok(())
    }

    /// One slot of the global in-flight cap (or the shutdown error).
    async fn global_slot(&self) -> Result<OwnedSemaphorePermit, ClientError> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(self.shutdown_error()),
            p = self.global.clone().acquire_owned() => p.map_err(|_| self.shutdown_error()),
        }
    }

    /// Obtain a global slot and a slot on the best healthy endpoint: not `avoid` if
    /// another is healthy, never `exclude` (waiting, without a global slot, until another
    /// endpoint is healthy: the caller races this wait with its attempt there).
    async fn acquire(
        &self,
        group: &Group,
        avoid: Option<&Arc<Endpoint>>,
        exclude: Option<&Arc<Endpoint>>,
        affinity: &str,
        waited: &mut Duration,
    ) -> Result<Slot<'_>, ClientError> {
        let mut avoid = exclude.or(avoid);
        // A global slot kept while the call moves to another endpoint: taking it again
        // would put the call behind every call waiting for one.
        let mut kept: Option<OwnedSemaphorePermit> = None;
        'route: loop {
            if !group.any_healthy() {
                self.wait_for_health(group, waited).await?;
                continue;
            }
            if let Some(x) = exclude {
                let mut rx = self.health.subscribe();
                if !group.healthy_besides(x) {
                    kept = None;
                    tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
                        changed = rx.changed() => changed.map_err(|_| self.shutdown_error())?,
                    }
                    continue;
                }
            }
            let global = match kept.take() {
                Some(g) => g,
                None => self.global_slot().await?,
            };
            let Some(ep) = group.pick(avoid, affinity) else {
                continue;
            };
            if exclude.is_some_and(|x| Arc::ptr_eq(x, &ep)) {
                // The other endpoint went down between the check and the pick.
                kept = Some(global);
                continue;
            }
            let mut global = Some(global);
            let permit = match ep.limit.permits().clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    // Under prefix affinity a call queues for its preferred endpoint while
                    // others may have free slots. Holding a global slot meanwhile would
                    // leave one of theirs idle (the global cap is usually the sum of the
                    // endpoints' limits): it is given back while the call queues and taken
                    // again once the endpoint has room.
                    if group.routing == Routing::PrefixAffinity {
                        global = None;
                    }
                    let _queued = Queued::new(&ep);
                    let mut rx = self.health.subscribe();
                    let acquire = ep.limit.permits().clone().acquire_owned();
                    tokio::pin!(acquire);
                    loop {
                        tokio::select! {
                            biased;
                            _ = self.cancel.cancelled() => return Err(self.shutdown_error()),
                            p = &mut acquire => break p.map_err(|_| self.shutdown_error())?,
                            changed = rx.changed() => {
                                if changed.is_err() {
                                    return Err(self.shutdown_error());
                                }
                                if !ep.is_healthy() {
                                    // The endpoint went down while we queued: move elsewhere.
                                    continue 'route;
                                }
                                if group.routing == Routing::LeastLoad && group.has_room_besides(&ep) {
                                    // Another endpoint came back (its limit reset, its slots
                                    // free) while this one's queue holds the calls its crash
                                    // moved here: take a free slot there rather than wait,
                                    // even if a retry would have avoided it.
                                    avoid = exclude;
                                    kept = global.take();
                                    continue 'route;
                                }
                            }
                        }
                    }
                }
            };
            let global = match global {
                Some(g) => g,
                None => self.global_slot().await?,
            };
            ep.in_flight.fetch_add(1, Ordering::Relaxed);
            self.global_in_flight.fetch_add(1, Ordering::Relaxed);
            return Ok(Slot {
                endpoint: ep,
                global_in_flight: &self.global_in_flight,
                _global: global,
                permit: Some(permit),
            });
        }
    }

    async fn prepare<'p>(
        &self,
        cache: &'p mut Vec<Prepared>,
        ep: &Arc<Endpoint>,
        request: &ChatRequest,
    ) -> Result<&'p Prepared, ClientError> {
        if let Some(i) = cache.iter().position(|p| Arc::ptr_eq(&p.endpoint, ep)) {
            return Ok(&cache[i]);
        }
        let encoded = match self.bodies.get(ep.name(), request) {
            Some(shared) => shared,
            None => {
                let encoded = self.encode(ep, request).await?;
                self.bodies.put(ep.name(), request, &encoded);
                encoded
            }
        };
        cache.push(Prepared {
            endpoint: ep.clone(),
            budget_tokens: encoded.prompt_tokens.saturating_add(encoded.max_tokens),
            body: encoded.body,
            max_tokens: encoded.max_tokens,
        });
        Ok(&cache[cache.len() - 1])
    }

    /// Counts the prompt's tokens, fits `max_tokens` to the endpoint's window and
    /// serializes the body.
    async fn encode(
        &self,
        ep: &Arc<Endpoint>,
        request: &ChatRequest,
    ) -> Result<EncodedBody, ClientError> {
        let prompt_tokens = ep.counter.count_async(&request.messages).await;
        let max_tokens = fit_max_tokens(
            ep.name(),
            request.sampling.max_tokens,
            prompt_tokens,
            ep.spec.context_window,
            self.policy.context_margin,
        )?;
        let body = encode_request(&ep.spec.model, request, max_tokens, &self.bodies.escapes)
            .map_err(|e| ClientError::Config {
                message: format!(
                    "endpoint `{}`: cannot serialize the request: {e}",
                    ep.name()
                ),
            })?;
        Ok(EncodedBody {
            body,
            max_tokens,
            prompt_tokens,
        })
    }

    /// The end of a pending attempt: its answer, or its failure recorded. It was charged a
    /// timeout when the hedge started; a failure other than its own deadline gives that
    /// timeout back (`RetryBudget::on_pending_failure`).
    fn settle(
        &self,
        p: Pending<'_>,
        result: Result<Completion, AttemptError>,
        request: &ChatRequest,
        attempts: u32,
        budget: &mut RetryBudget<'_>,
    ) -> Option<ChatResponse> {
        let ep = p.slot.endpoint.clone();
        drop(p.slot);
        match result {
            Ok(c) => {
                Some(self.succeeded(&p.span, &ep, request, c, p.started, attempts, p.max_tokens))
            }
            Err(f) => {
                let effects = ep.record_failure(&f.error, p.started);
                if p.hedged {
                    budget.on_pending_failure(&f.error, p.started, ep.is_healthy());
                } else if f.error.is_retryable() {
                    // Exhaustion shows at the call's next failure: the attempt running
                    // now goes on.
                    let _ = budget.exhausted_by(&f.error, p.started, ep.is_healthy());
                }
                self.permanent
                    .on_failure(ep.name(), &ep.permanent_in_a_row, &f.error);
                telemetry::on_failure(
                    &p.span,
                    &ep,
                    request,
                    &f.error,
                    p.started.elapsed(),
                    effects,
                );
                None
            }
        }
    }

    /// Records a successful attempt and builds the call's response.
    #[allow(clippy::too_many_arguments)]
    fn succeeded(
        &self,
        span: &tracing::Span,
        ep: &Arc<Endpoint>,
        request: &ChatRequest,
        c: Completion,
        started: Instant,
        attempts: u32,
        max_tokens_sent: u32,
    ) -> ChatResponse {
        telemetry::on_success(span, ep, request, &c, started.elapsed());
        if let Some(change) = ep.record_success(started.elapsed()) {
            telemetry::on_limit_change(span, ep, change);
        }
        self.permanent.on_success(&ep.permanent_in_a_row);
        ChatResponse {
            content: c.content.into(),
            reasoning: c.reasoning.map(Into::into),
            usage: c.usage,
            finish_reason: c.finish_reason,
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            endpoint: ep.name().clone(),
            attempts,
            max_tokens_sent,
            embeddings: None,
        }
    }

    /// Make one call with routing, retries and outage waits.
    pub async fn call(
        &self,
        group_name: &str,
        request: ChatRequest,
    ) -> Result<ChatResponse, ClientError> {
        if self.cancel.is_cancelled() {
            return Err(ClientError::Shutdown);
        }
        let group = self
            .groups
            .get(group_name)
            .ok_or_else(|| ClientError::UnknownGroup {
                group: group_name.into(),
            })?
            .clone();
        let policy = &self.policy;
        let headers = tag_headers(&request.tags);
        let mut backoff = backon::ExponentialBuilder::default()
            .with_min_delay(policy.backoff_min)
            .with_max_delay(policy.backoff_max)
            .with_jitter()
            .without_max_times()
            .build();
        let mut cache: Vec<Prepared> = Vec::with_capacity(1);
        let mut waited = Duration::ZERO;
        let mut attempts = 0u32;
        let mut budget = RetryBudget::new(policy);
        let mut last_failed: Option<Arc<Endpoint>> = None;
        let mut pending: Option<Pending<'_>> = None;
        // The next attempt replaces one a crash cut while another ran: it goes only where
        // that other (pending) attempt is not.
        let mut racing = false;
        // The next attempt is set aside at once, for a second one to race it: the call's
        // only attempt, past the endpoint's timeout (a long generation), was cut by a crash.
        let mut race_on_launch = false;
        let several = group.members.len() > 1;
        loop {
            let exclude = pending
                .as_ref()
                .filter(|_| racing)
                .map(|p| p.slot.endpoint.clone());
            let slot = match race(
                &mut pending,
                self.acquire(
                    &group,
                    last_failed.as_ref(),
                    exclude.as_ref(),
                    request.tags.affinity_key(),
                    &mut waited,
                ),
            )
            .await
            {
                Raced::Own(slot) => slot?,
                Raced::Pending(p, r) => match self.settle(*p, r, &request, attempts, &mut budget) {
                    Some(response) => return Ok(response),
                    None => continue,
                },
            };
            let is_race = std::mem::take(&mut racing) && exclude.is_some();
            let ep = slot.endpoint.clone();
            let prepared = self.prepare(&mut cache, &ep, &request).await?;
            take(&self.global_rpm, 1).await;
            take(&self.global_tpm, prepared.budget_tokens).await;
            ep.rate_limit(prepared.budget_tokens).await;
            attempts += 1;
            if attempts > 1 {
                ep.retries.fetch_add(1, Ordering::Relaxed);
                telemetry::count_retry(&ep, &request);
            }
            let span = telemetry::attempt_span(&ep, &request, prepared.max_tokens, attempts);
            let mut attempt_headers = headers.clone();
            telemetry::inject_traceparent(&span, &mut attempt_headers);
            let started = Instant::now();
            let timeout_scale = budget.timeout_scale();
            // A non-streaming attempt past its timeout is hedged if the timeout budget has a
            // hedge left then, and given up otherwise (decided when its timeout passes: a
            // pending attempt that failed meanwhile may have given a timeout back). A
            // stream's idle timeout already tells a dead server from a long generation.
            // A race attempt is not hedged while the attempt it races runs: that is the other
            // of the two a call may hold. It may run as long as any attempt of the call: it
            // is there for one run of a long generation on a server that has just restarted.
            let growth = policy.timeout_growth.max(1.0);
            let hedging = !request.stream && policy.max_timeout_attempts > 1;
            // This attempt's own timeout (its rung): when it is hedged, and the deadline of
            // the older attempt a hedge gives up.
            let rung_timeout = ep.spec.request_timeout.mul_f64(timeout_scale);
            let mut hedge_after = (hedging && !is_race).then_some(rung_timeout);
            let attempt_scale = if is_race {
                budget
                    .longest_attempt_scale()
                    .max(timeout_scale * (1.0 + growth))
            } else if hedging {
                timeout_scale * (1.0 + growth)
            } else {
                timeout_scale
            };
            let max_tokens_sent = prepared.max_tokens;
            let mut fut: AttemptFuture = {
                let ep = ep.clone();
                let body = prepared.body.clone();
                let stream = request.stream;
                Box::pin(
                    async move {
                        ep.attempt(body, attempt_headers, stream, attempt_scale)
                            .await
                    }
                    .instrument(span.clone()),
                )
            };
            let hedge_timer = tokio::time::sleep(hedge_after.unwrap_or(Duration::ZERO));
            tokio::pin!(hedge_timer);
            let step = if std::mem::take(&mut race_on_launch) && pending.is_none() {
                Step::Race
            } else {
                loop {
                    let own = async {
                        tokio::select! {
                            biased;
                            _ = self.cancel.cancelled() => Step::Shutdown,
                            r = &mut fut => Step::Done(r),
                            _ = &mut hedge_timer, if hedge_after.is_some() => Step::Hedge,
                        }
                    };
                    match race(&mut pending, own).await {
                        Raced::Own(Step::Hedge) if pending.as_ref().is_some_and(|p| p.race) => {
                            // Beside an attempt racing it after a crash, which may run longer
                            // than this one's next rung (a long generation on a restarted
                            // server), this attempt is not hedged: a hedge would give that
                            // one up. Both run to their own deadlines.
                            hedge_after = None;
                        }
                        Raced::Own(step) => break step,
                        Raced::Pending(p, r) => {
                            let crashed = matches!(&r, Err(f) if f.error.is_crash());
                            if let Some(response) =
                                self.settle(*p, r, &request, attempts, &mut budget)
                            {
                                return Ok(response);
                            }
                            if crashed && several {
                                break Step::Race;
                            }
                            // An attempt left unhedged while another ran beside it (a race
                            // attempt, or one beside a race attempt) is hedged at its timeout
                            // once alone, like any other attempt (at once if past it): on a
                            // restarted server it may be a hung request as well as a long
                            // generation. With no hedge left it runs to its own deadline.
                            if hedging && hedge_after.is_none() && budget.may_hedge() {
                                hedge_timer
                                    .as_mut()
                                    .reset(tokio::time::Instant::from_std(started + rung_timeout));
                                hedge_after = Some(rung_timeout);
                            }
                        }
                    }
                }
            };
            let result = match step {
                Step::Shutdown => return Err(ClientError::Shutdown),
                Step::Done(r) => r,
                Step::Hedge if !budget.may_hedge() => {
                    // No hedge left: the attempt is given up at its timeout.
                    drop(fut);
                    Err(AttemptError::from(ClientError::Timeout {
                        endpoint: ep.name().clone(),
                        after: hedge_after.unwrap_or_default(),
                    }))
                }
                step @ (Step::Hedge | Step::Race) => {
                    let hedged = matches!(step, Step::Hedge);
                    if hedged {
                        budget.on_hedge();
                        if let Some(old) = pending.take() {
                            // The older attempt reached its own deadline meanwhile: given up.
                            let error = ClientError::Timeout {
                                endpoint: old.slot.endpoint.name().clone(),
                                after: rung_timeout,
                            };
                            let _ = self.settle(
                                old,
                                Err(error.into()),
                                &request,
                                attempts,
                                &mut budget,
                            );
                        }
                        tracing::debug!(group = %group.name, endpoint = %ep.name(), attempts, "attempt past its timeout: hedging");
                        let error = ClientError::Timeout {
                            endpoint: ep.name().clone(),
                            after: hedge_after.unwrap_or_default(),
                        };
                        telemetry::on_retry(&span, &error, Duration::ZERO);
                        last_failed = Some(ep);
                    } else {
                        // A crash cut the attempt this one ran beside, or this one retries a
                        // long generation a crash cut. The call keeps two attempts of it going
                        // on two endpoints: another starts on another endpoint as soon as one
                        // is healthy (the crashed one, once re-admitted, where the next crash
                        // is likely furthest away) rather than when this one passes its
                        // timeout.
                        tracing::debug!(group = %group.name, endpoint = %ep.name(), attempts, "the attempt beside this one was cut by a crash: racing a replacement");
                        racing = true;
                    }
                    pending = Some(Pending {
                        fut,
                        slot,
                        span,
                        started,
                        max_tokens: max_tokens_sent,
                        hedged,
                        race: is_race,
                    });
                    continue;
                }
            };
            drop(slot);
            let failure = match result {
                Ok(c) => {
                    return Ok(self.succeeded(
                        &span,
                        &ep,
                        &request,
                        c,
                        started,
                        attempts,
                        max_tokens_sent,
                    ));
                }
                Err(f) => f,
            };
            let effects = ep.record_failure(&failure.error, started);
            self.permanent
                .on_failure(ep.name(), &ep.permanent_in_a_row, &failure.error);
            telemetry::on_failure(
                &span,
                &ep,
                &request,
                &failure.error,
                started.elapsed(),
                effects,
            );
            let error = failure.error;
            if !error.is_retryable() {
                return Err(error);
            }
            if budget.exhausted_by(&error, started, ep.is_healthy()) {
                // An attempt past its timeout may still answer: it is the call's last chance.
                if let Some(mut p) = pending.take() {
                    let r = tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                        r = &mut p.fut => r,
                    };
                    if let Some(response) = self.settle(p, r, &request, attempts, &mut budget) {
                        return Ok(response);
                    }
                }
                // Named here: the call's own span exists only at DEBUG or when exporting.
                let call = request.tags.call.as_deref().unwrap_or("");
                tracing::warn!(call, group = %group.name, attempts, error = %error, "call failed after retries");
                return Err(error);
            }
            let delay = if let Some(after) = failure.retry_after {
                spread(after)
            } else if !ep.is_healthy() {
                // Marked down: no point sleeping; `acquire` routes to a healthy endpoint,
                // or waits for this one to be re-admitted and goes at once.
                Duration::ZERO
            } else {
                backoff.next().unwrap_or(policy.backoff_max)
            };
            tracing::debug!(group = %group.name, endpoint = %ep.name(), attempts, ?delay, error = %error, "retrying call");
            telemetry::on_retry(&span, &error, delay);
            // Cut by a crash beside a pending attempt: the retry races that one from
            // another endpoint (not a second copy beside it).
            racing = several && pending.is_some() && error.is_crash();
            // The only attempt of a generation longer than the endpoint's timeout, cut by a
            // crash: it is retried at once where it can go, and a second attempt goes to
            // another endpoint (the crashed one, once re-admitted) beside it.
            race_on_launch = several
                && hedging
                && pending.is_none()
                && error.is_crash()
                && started.elapsed() >= ep.spec.request_timeout;
            last_failed = Some(ep);
            // A backoff (not a server-given Retry-After) ends early when an endpoint changes
            // health: a crash shows up as this failure moments before the breaker opens,
            // and a re-admitted endpoint should get its waiting calls at once, not after
            // backoffs that grew while it was down.
            let mut health = self.health.subscribe();
            let wake_on_health = failure.retry_after.is_none();
            let own = async {
                tokio::select! {
                    biased;
                    _ = self.cancel.cancelled() => false,
                    _ = tokio::time::sleep(delay) => true,
                    _ = health.changed(), if wake_on_health => true,
                }
            };
            match race(&mut pending, own).await {
                Raced::Own(false) => return Err(ClientError::Shutdown),
                Raced::Own(true) => {}
                Raced::Pending(p, r) => {
                    if let Some(response) = self.settle(*p, r, &request, attempts, &mut budget) {
                        return Ok(response);
                    }
                }
            }
        }
    }
}
