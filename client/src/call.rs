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
//! These rules are [`plan::CallPlan`]'s, a state machine without IO fed events (a slot
//! acquired, the hedge timer fired, an attempt finished, the backoff over, shutdown) and
//! answering actions (acquire a slot avoiding or excluding endpoints, launch an attempt,
//! arm the hedge timer, set an attempt aside, give one up, back off, succeed, fail).
//! `driver` carries the actions out and does all the IO; `acquire` is the slot wait;
//! `chat` and `embeddings` are the two kinds of call ([`driver::Job`]): embeddings run on
//! the same plan with hedging off.

mod acquire;
mod attempt;
mod chat;
mod driver;
mod embeddings;
mod job;
mod log;
mod plan;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::wire::{CallTags, ChatRequest, ChatResponse, EmbeddingRequest};

use super::body_cache::BodyCache;
use super::config::ResiliencePolicy;
use super::endpoint::{Endpoint, Health, Limiter};
use super::error::ClientError;
use super::permanent::PermanentErrors;
use super::router::Group;

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

/// Up to +20 % on a server-given delay, so the calls one overload wave turned away do not
/// all come back in the same millisecond (cheap: the clock's nanoseconds, no RNG state).
pub(super) fn spread(delay: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    delay.mul_f64(1.0 + f64::from(nanos % 1000) / 5000.0)
}

pub(super) fn tag_headers(tags: &CallTags) -> HeaderMap {
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
    /// Make one chat call with routing, retries and outage waits.
    pub async fn call(
        &self,
        group_name: &str,
        request: ChatRequest,
        deltas: Option<&crate::wire::DeltaSink>,
    ) -> Result<ChatResponse, ClientError> {
        let mut response = self
            .drive(group_name, &chat::Chat(&request, deltas))
            .await?;
        if response.usage.is_missing() {
            // No usage from the server: estimate it rather than count the call as free.
            if let Some(ep) = self
                .endpoints
                .iter()
                .find(|e| *e.name() == response.endpoint)
            {
                let reply = [
                    &*response.content,
                    response.reasoning.as_deref().unwrap_or(""),
                ];
                response.usage = ep.counter.estimate_usage(&request.messages, &reply).await;
                crate::telemetry::on_estimated_usage(ep, &request, &response.usage);
            }
        }
        Ok(response)
    }

    /// Make one embeddings call with routing, retries and outage waits.
    pub async fn embed(
        &self,
        group_name: &str,
        request: EmbeddingRequest,
    ) -> Result<ChatResponse, ClientError> {
        self.drive(group_name, &embeddings::Embed(&request)).await
    }
}
