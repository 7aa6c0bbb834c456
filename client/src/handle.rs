//! [`ModelClient`]: the cheap-clone handle every caller uses.
//!
//! `start` builds the shared endpoint state and spawns the actor tree
//! ([`ClientSupervisor`] → one [`super::health::EndpointActor`] per endpoint). `chat`
//! runs in the caller's task against the shared state; only breaker recovery goes
//! through the actors.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ractor::{Actor, ActorRef};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::wire::{ChatRequest, ChatResponse, EmbeddingRequest};

use super::body_cache::BodyCache;
use super::call::Shared;
use super::config::{ClientConfig, TokenEstimate};
use super::endpoint::{Endpoint, Health, per_minute};
use super::error::ClientError;
use super::permanent::{PermanentErrors, PermanentStop};
use super::router::Group;
use super::supervisor::{ClientSupervisor, SupervisorArgs, SupervisorMsg, SupervisorStatus};
use super::telemetry;
use super::tokens::TokenCounter;

/// One endpoint's counters at a point in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointSnapshot {
    pub name: Arc<str>,
    /// Requests holding a slot (sent, or waiting on a rate limit just before sending).
    pub in_flight: usize,
    /// Calls waiting for a slot on this endpoint.
    pub queued: usize,
    pub max_in_flight: usize,
    /// The effective concurrency limit (AIMD: lowered on overload, `max_in_flight` at most).
    pub concurrency_limit: usize,
    pub healthy: bool,
    /// HTTP attempts made (first tries and retries).
    pub calls: u64,
    /// Attempts that failed (any reason).
    pub errors: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// Times the circuit breaker opened.
    pub breaker_trips: u64,
    /// Attempts answered 429 or 503 (overload).
    pub overloads: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
    /// Prompt and completion tokens of successful attempts.
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The whole client at a point in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientSnapshot {
    pub endpoints: Vec<EndpointSnapshot>,
    pub global_in_flight: usize,
    pub global_max_in_flight: usize,
}

struct Inner {
    shared: Shared,
    supervisor: tokio::sync::Mutex<Option<(ActorRef<SupervisorMsg>, tokio::task::JoinHandle<()>)>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Last handle gone without `shutdown`: still stop the actor tree.
        self.shared.cancel.cancel();
        if let Some((actor, _)) = self.supervisor.get_mut().take() {
            actor.stop(None);
        }
    }
}

/// Handle to the model client (shared endpoint state and the endpoint actors). Cloning is cheap (one `Arc`).
#[derive(Clone)]
pub struct ModelClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("endpoints", &self.inner.shared.endpoints)
            .finish()
    }
}

fn counters(config: &ClientConfig) -> Result<Vec<TokenCounter>, ClientError> {
    // Endpoints sharing a tokenizer file share one loaded tokenizer.
    let mut loaded: Vec<(&TokenEstimate, TokenCounter)> = Vec::new();
    let mut out = Vec::with_capacity(config.endpoints.len());
    for e in &config.endpoints {
        let counter = match loaded.iter().find(|(est, _)| *est == &e.token_estimate) {
            Some((_, c)) => c.clone(),
            None => {
                let c = TokenCounter::from_estimate(&e.token_estimate).map_err(|err| {
                    ClientError::Config {
                        message: format!("endpoint `{}`: {err}", e.name),
                    }
                })?;
                loaded.push((&e.token_estimate, c.clone()));
                c
            }
        };
        out.push(counter);
    }
    Ok(out)
}

impl ModelClient {
    /// Validate the config, build the endpoints and start the actor tree.
    pub async fn start(config: ClientConfig) -> Result<ModelClient, ClientError> {
        config.validate()?;
        let health = Arc::new(Health::new());
        let counters = counters(&config)?;
        let mut endpoints = Vec::with_capacity(config.endpoints.len());
        for (spec, counter) in config.endpoints.iter().zip(counters) {
            let endpoint = Endpoint::new(spec.clone(), counter, &config.policy, health.clone())?;
            telemetry::initial_limit(&endpoint);
            endpoints.push(Arc::new(endpoint));
        }
        let by_name: HashMap<&str, &Arc<Endpoint>> =
            endpoints.iter().map(|e| (&*e.spec.name, e)).collect();
        let mut groups = HashMap::new();
        for (name, members) in &config.groups {
            // validate() checked every member exists.
            let members = members
                .iter()
                .filter_map(|m| by_name.get(&**m).map(|e| (*e).clone()))
                .collect();
            let routing = config
                .routing
                .iter()
                .find(|(g, _)| g == name)
                .map_or_else(Default::default, |(_, r)| *r);
            groups.insert(
                name.clone(),
                Arc::new(Group::new(name.clone(), members, routing)),
            );
        }
        let args = SupervisorArgs {
            endpoints: endpoints.clone(),
            probe_interval: config.policy.probe_interval,
            probe_successes: config.policy.probe_successes,
        };
        let (actor, join) = Actor::spawn(None, ClientSupervisor, args)
            .await
            .map_err(|e| ClientError::Actor {
                message: format!("cannot start the client supervisor: {e}"),
            })?;
        let shared = Shared {
            groups,
            endpoints,
            global: Arc::new(Semaphore::new(config.global_max_in_flight)),
            global_cap: config.global_max_in_flight,
            global_in_flight: AtomicUsize::new(0),
            global_rpm: per_minute(config.global_requests_per_minute),
            global_tpm: per_minute(config.global_tokens_per_minute),
            policy: config.policy.clone(),
            health,
            cancel: CancellationToken::new(),
            bodies: BodyCache::new(BodyCache::DEFAULT_CAPACITY),
            permanent: Arc::new(PermanentErrors::new(config.policy.permanent_error_limit)),
        };
        Ok(ModelClient {
            inner: Arc::new(Inner {
                shared,
                supervisor: tokio::sync::Mutex::new(Some((actor, join))),
            }),
        })
    }

    /// Make one chat call on a group: routed, rate-limited, retried, failed over.
    pub async fn chat(
        &self,
        group: &str,
        request: ChatRequest,
    ) -> Result<ChatResponse, ClientError> {
        self.chat_call(group, request, None).await
    }

    /// [`Self::chat`] that also sends the reply's pieces to `deltas` as they arrive
    /// (`request.stream` must be set for the endpoint to stream them; without it the
    /// reply comes whole and nothing is sent). Routing, limits and retries are a chat
    /// call's: a retry after a broken stream sends [`crate::wire::StreamDelta::Attempt`]
    /// and its pieces start over.
    pub async fn chat_streaming(
        &self,
        group: &str,
        request: ChatRequest,
        deltas: &crate::wire::DeltaSink,
    ) -> Result<ChatResponse, ClientError> {
        self.chat_call(group, request, Some(deltas)).await
    }

    /// One chat call under its `model_call` span, its pieces to `deltas` if any.
    async fn chat_call(
        &self,
        group: &str,
        request: ChatRequest,
        deltas: Option<&crate::wire::DeltaSink>,
    ) -> Result<ChatResponse, ClientError> {
        use tracing::Instrument;
        let span = tracing::debug_span!(
            "model_call",
            group,
            role = %request.tags.role,
            problem = %request.tags.problem,
            iteration = request.tags.iteration,
        );
        self.inner
            .shared
            .call(group, request, deltas)
            .instrument(span)
            .await
    }

    /// Make one embeddings call on a group, with the same routing, limits, retries and
    /// breaker as a chat call. The response's `embeddings` holds one vector per input.
    pub async fn embed(
        &self,
        group: &str,
        request: EmbeddingRequest,
    ) -> Result<ChatResponse, ClientError> {
        use tracing::Instrument;
        let span = tracing::debug_span!(
            "model_call",
            group,
            role = %request.tags.role,
            problem = %request.tags.problem,
            iteration = request.tags.iteration,
        );
        self.inner
            .shared
            .embed(group, request)
            .instrument(span)
            .await
    }

    /// Cancelled once one endpoint answered `resilience.permanent_error_limit` calls in a
    /// row with a permanent error ([`super::permanent`]); the run stops then.
    pub fn permanent_stop(&self) -> CancellationToken {
        self.inner.shared.permanent.stopped()
    }

    /// Why [`Self::permanent_stop`] was cancelled.
    pub fn permanent_stop_reason(&self) -> Option<PermanentStop> {
        self.inner.shared.permanent.reason()
    }

    /// Counters of every endpoint (lock-free reads).
    pub fn snapshot(&self) -> ClientSnapshot {
        let s = &self.inner.shared;
        ClientSnapshot {
            endpoints: s
                .endpoints
                .iter()
                .map(|e| EndpointSnapshot {
                    name: e.name().clone(),
                    in_flight: e.in_flight.load(Ordering::Relaxed),
                    queued: e.queued.load(Ordering::Relaxed),
                    max_in_flight: e.spec.max_in_flight,
                    concurrency_limit: e.limit.current(),
                    healthy: e.is_healthy(),
                    calls: e.calls.load(Ordering::Relaxed),
                    errors: e.errors.load(Ordering::Relaxed),
                    retries: e.retries.load(Ordering::Relaxed),
                    breaker_trips: e.trips.load(Ordering::Relaxed),
                    overloads: e.overloads.load(Ordering::Relaxed),
                    timeouts: e.timeouts.load(Ordering::Relaxed),
                    input_tokens: e.input_tokens.load(Ordering::Relaxed),
                    output_tokens: e.output_tokens.load(Ordering::Relaxed),
                })
                .collect(),
            global_in_flight: s.global_in_flight.load(Ordering::Relaxed),
            global_max_in_flight: s.global_cap,
        }
    }

    /// Liveness of the actor tree (endpoint actors alive, restarts so far).
    pub async fn actor_status(&self) -> Result<SupervisorStatus, ClientError> {
        let guard = self.inner.supervisor.lock().await;
        let Some((actor, _)) = guard.as_ref() else {
            return Err(ClientError::Shutdown);
        };
        ractor::call!(actor, SupervisorMsg::Status).map_err(|e| ClientError::Actor {
            message: e.to_string(),
        })
    }

    /// Stop: pending and future calls fail with [`ClientError::Shutdown`], the actors stop.
    pub async fn shutdown(&self) {
        let s = &self.inner.shared;
        s.cancel.cancel();
        s.global.close();
        for e in &s.endpoints {
            e.limit.permits().close();
        }
        let taken = self.inner.supervisor.lock().await.take();
        if let Some((actor, join)) = taken {
            actor.stop(Some("client shut down".to_string()));
            if let Err(e) = join.await {
                tracing::warn!(error = %e, "client supervisor did not stop cleanly");
            }
        }
    }
}
