//! Judge calls at the judge's capacity and never in the method's way.
//!
//! Iterations are judged while the method runs, so judge calls compete with the method's
//! for the run's global in-flight cap (`run.max_in_flight`) and, when the judge shares an
//! endpoint with the method (self-judging), for that endpoint's slots. The model client
//! serves waiting calls in arrival order and knows nothing of roles, so the gate sits in
//! front of it (below the run store: a replayed judge call passes no gate) and lets a judge
//! call go only when it takes nothing a method call waits for:
//!
//! - at most the judge group's capacity (the sum of its endpoints' `max_in_flight`) judge
//!   calls at once, so judge calls never hold more global slots than their endpoints can
//!   serve;
//! - and only when the global cap has a free slot and some endpoint of the judge group has
//!   a free slot (below its current concurrency limit) with no call waiting for it. A
//!   method call waiting for a shared endpoint is such a call, so on a shared endpoint a
//!   judge call only takes a slot the method leaves free; on an endpoint of its own the
//!   judge keeps every slot busy while judge work waits.
//!
//! On endpoints of its own the second rule reduces to the global cap's free slot: no method
//! call waits for those endpoints, and the first rule already bounds the judge there, so
//! judge calls go as fast as slots free instead of one at a time.
//!
//! A judge call that got a slot runs to its end (calls are not preempted): a method call
//! arriving just after waits at most for the first of the slots to free, as it would for
//! another method call.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tmas_actors::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, EmbeddingRequest};
use tmas_client::{ClientSnapshot, ModelClient};
use tokio::sync::{Mutex, Semaphore};

/// How often the waiting judge call looks again while there is no room (one waiter looks;
/// the others queue behind it in order).
const POLL: Duration = Duration::from_millis(2);

/// How long a judge call just let through may take to show in the client's counters
/// before the next one looks (it starts on a task of its own; normally microseconds).
const SHOW_WITHIN: Duration = Duration::from_millis(10);

/// Whether a judge call may take a slot now.
pub trait Room: Send + Sync + 'static {
    fn has_room(&self) -> bool;
    /// Calls holding or waiting for a slot on the judge group's endpoints (a judge call
    /// let through shows here once it has reached the client).
    fn load(&self) -> usize;
    /// Whether method calls may wait for the judge's endpoints: then judge calls are let
    /// through one at a time, each once the previous one shows in [`Room::load`].
    fn shared(&self) -> bool;
}

/// [`Room`] read from the model client's counters for the judge group's endpoints.
pub struct ClientRoom {
    pub client: ModelClient,
    /// The endpoints of the judge group.
    pub endpoints: Vec<Arc<str>>,
    /// Some of them serve the method too.
    pub shared: bool,
}

impl Room for ClientRoom {
    fn has_room(&self) -> bool {
        let s = self.client.snapshot();
        if self.shared {
            room_in(&s, &self.endpoints)
        } else {
            s.global_in_flight < s.global_max_in_flight
        }
    }

    fn shared(&self) -> bool {
        self.shared
    }

    fn load(&self) -> usize {
        self.client
            .snapshot()
            .endpoints
            .iter()
            .filter(|e| self.endpoints.contains(&e.name))
            .map(|e| e.in_flight + e.queued)
            .sum()
    }
}

/// The rule of the module documentation over one snapshot of the client.
pub fn room_in(s: &ClientSnapshot, judge_endpoints: &[Arc<str>]) -> bool {
    s.global_in_flight < s.global_max_in_flight
        && s.endpoints.iter().any(|e| {
            judge_endpoints.contains(&e.name)
                && e.queued == 0
                && e.in_flight < e.concurrency_limit.min(e.max_in_flight)
        })
}

/// The judge's call executor: see the module documentation.
pub struct JudgeGate {
    inner: Arc<dyn CallExecutor>,
    permits: Arc<Semaphore>,
    room: Arc<dyn Room>,
    /// The judge call waiting for room (the others wait for it, in arrival order).
    turn: Arc<Mutex<()>>,
}

impl JudgeGate {
    /// A gate sending through `inner` at most `capacity` judge calls at once, each when
    /// `room` says so.
    pub fn new(inner: Arc<dyn CallExecutor>, capacity: usize, room: Arc<dyn Room>) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(capacity.max(1))),
            room,
            turn: Arc::default(),
        }
    }

    fn gated(
        &self,
        call: impl FnOnce(Arc<dyn CallExecutor>) -> BoxFuture<'static, CallOutcome> + Send + 'static,
    ) -> BoxFuture<'static, CallOutcome> {
        let (inner, permits, room, turn) = (
            self.inner.clone(),
            self.permits.clone(),
            self.room.clone(),
            self.turn.clone(),
        );
        Box::pin(async move {
            // A closed semaphore (never closed here) would only lift the cap.
            let _permit = permits.acquire_owned().await.ok();
            if !room.shared() {
                while !room.has_room() {
                    tokio::time::sleep(POLL).await;
                }
                return AbortOnDrop(tokio::spawn(call(inner))).join().await;
            }
            let turn = turn.lock().await;
            while !room.has_room() {
                tokio::time::sleep(POLL).await;
            }
            // The call starts on a task of its own; the next judge call looks only once
            // this one shows in the client's counters, so two never take one free slot.
            let before = room.load();
            let call = AbortOnDrop(tokio::spawn(call(inner)));
            let shown = tokio::time::Instant::now() + SHOW_WITHIN;
            while room.load() <= before
                && !call.0.is_finished()
                && tokio::time::Instant::now() < shown
            {
                tokio::task::yield_now().await;
            }
            drop(turn);
            call.join().await
        })
    }
}

/// A call's task, stopped when the judge call waiting for it is dropped (the run's
/// shutdown cuts judge calls in flight).
struct AbortOnDrop(tokio::task::JoinHandle<CallOutcome>);

impl AbortOnDrop {
    async fn join(mut self) -> CallOutcome {
        let joined = (&mut self.0).await;
        joined.unwrap_or_else(|e| {
            Err(CallFailure::new(
                FailureKind::Panic,
                format!("judge call task failed: {e}"),
            ))
        })
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl CallExecutor for JudgeGate {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        self.gated(move |inner| inner.execute(group, request))
    }

    fn execute_call(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: ChatRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let key = key.clone();
        self.gated(move |inner| inner.execute_call(&key, group, request))
    }

    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let key = key.clone();
        self.gated(move |inner| inner.execute_embeddings(&key, group, request))
    }
}

#[cfg(test)]
mod tests;
