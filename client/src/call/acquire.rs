//! Where an attempt goes: a healthy endpoint of the group (waiting, under the outage
//! budget, while every one is down), a global slot, then a slot on the routed endpoint
//! (re-routed if that endpoint goes down while the call queues, or if another one has room
//! again under least-load routing).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use super::job::{Encoded, Job};
use crate::endpoint::take;

use super::Shared;
use crate::config::Routing;
use crate::endpoint::Endpoint;
use crate::error::ClientError;
use crate::router::Group;

/// Holds a global and an endpoint slot; releasing it updates the in-flight counters and
/// gives the endpoint permit back to its concurrency limit (which may keep it).
pub(super) struct Slot<'a> {
    pub endpoint: Arc<Endpoint>,
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

/// A slot, the body encoded for its endpoint, and when the attempt may start.
pub(super) type Ready<'a, B> = (Slot<'a>, Encoded<B>, Instant);

/// The call's bodies, one per endpoint it has been sent to.
pub(super) type Bodies<B> = Mutex<Vec<(Arc<Endpoint>, Encoded<B>)>>;

/// How long a call has waited, in all, for its group to have a healthy endpoint (what the
/// outage budget bounds). Shared by the call's successive acquires, which may be dropped
/// mid-wait when the call's plan changes where the next attempt may go.
#[derive(Default)]
pub(super) struct OutageClock(AtomicU64);

impl OutageClock {
    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    fn add(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }
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

impl Shared {
    /// A slot on an endpoint allowed by `avoid`/`exclude`, the body encoded for it (cached
    /// per endpoint for the call's retries), and the rate limits passed.
    pub(super) async fn ready<'a, J: Job>(
        &'a self,
        job: &J,
        group: &Group,
        route: (Option<Arc<Endpoint>>, Option<Arc<Endpoint>>),
        waited: &OutageClock,
        cache: &Bodies<J::Body>,
    ) -> Result<Ready<'a, J::Body>, ClientError> {
        let key = job.tags().affinity_key();
        let slot = self
            .acquire(group, route.0.as_ref(), route.1.as_ref(), key, waited)
            .await?;
        let ep = slot.endpoint.clone();
        let cached = cache.lock().ok().and_then(|c| {
            c.iter()
                .find(|(e, _)| Arc::ptr_eq(e, &ep))
                .map(|(_, enc)| enc.clone())
        });
        let encoded = match cached {
            Some(enc) => enc,
            None => {
                let enc = job.encode(self, &ep).await?;
                if let Ok(mut c) = cache.lock() {
                    c.push((ep.clone(), enc.clone()));
                }
                enc
            }
        };
        take(&self.global_rpm, 1).await;
        take(&self.global_tpm, encoded.budget_tokens).await;
        ep.rate_limit(encoded.budget_tokens).await;
        Ok((slot, encoded, Instant::now()))
    }

    /// Wait (bounded by the outage budget) until the group has a healthy endpoint.
    pub(super) async fn wait_for_health(
        &self,
        group: &Group,
        waited: &OutageClock,
    ) -> Result<(), ClientError> {
        let mut rx = self.health.subscribe();
        if group.any_healthy() {
            return Ok(());
        }
        let budget = self.policy.outage_budget;
        group.enter_outage(budget);
        let remaining = budget.saturating_sub(waited.get());
        if remaining.is_zero() {
            return Err(ClientError::Outage {
                group: group.name.clone(),
                waited: waited.get(),
            });
        }
        tracing::debug!(group = %group.name, "call waiting: every endpoint of the group is down");
        let t0 = Instant::now();
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
            _ = rx.changed() => {}
            _ = tokio::time::sleep(remaining) => {}
        }
        waited.add(t0.elapsed());
        Ok(())
    }

    /// One slot of the global in-flight cap (or the shutdown error).
    pub(super) async fn global_slot(&self) -> Result<OwnedSemaphorePermit, ClientError> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(ClientError::Shutdown),
            p = self.global.clone().acquire_owned() => p.map_err(|_| ClientError::Shutdown),
        }
    }

    /// Obtain a global slot and a slot on the best healthy endpoint: not `avoid` if
    /// another is healthy, never `exclude` (waiting, without a global slot, until another
    /// endpoint is healthy: the caller races this wait with its attempt there).
    pub(super) async fn acquire(
        &self,
        group: &Group,
        avoid: Option<&Arc<Endpoint>>,
        exclude: Option<&Arc<Endpoint>>,
        affinity: &str,
        waited: &OutageClock,
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
                        _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                        changed = rx.changed() => changed.map_err(|_| ClientError::Shutdown)?,
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
                    // A queued call holds no global slot: other endpoints may have free
                    // slots — of its own group under prefix affinity (it queues for its
                    // preferred endpoint), of another group whatever the routing (a judge
                    // on an endpoint of its own while the method's endpoints are full).
                    // Holding one meanwhile would leave one of theirs idle (the global cap
                    // is usually the sum of the endpoints' limits): it is given back while
                    // the call queues and taken again once the endpoint has room.
                    global = None;
                    match self.queue(group, &ep).await? {
                        Queue::Got(p) => p,
                        Queue::Down => continue 'route,
                        Queue::RoomElsewhere => {
                            // Another endpoint came back (its limit reset, its slots free)
                            // while this one's queue holds the calls its crash moved here:
                            // take a free slot there rather than wait, even if a retry
                            // would have avoided it.
                            avoid = exclude;
                            kept = global.take();
                            continue 'route;
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

    /// Waits in `ep`'s queue for one of its slots, unless it goes down meanwhile or
    /// (least-load routing) another endpoint of the group has room again.
    async fn queue(&self, group: &Group, ep: &Arc<Endpoint>) -> Result<Queue, ClientError> {
        let _queued = Queued::new(ep);
        let mut rx = self.health.subscribe();
        let acquire = ep.limit.permits().clone().acquire_owned();
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(ClientError::Shutdown),
                p = &mut acquire => return p.map(Queue::Got).map_err(|_| ClientError::Shutdown),
                changed = rx.changed() => {
                    changed.map_err(|_| ClientError::Shutdown)?;
                    if !ep.is_healthy() {
                        return Ok(Queue::Down);
                    }
                    if group.routing == Routing::LeastLoad && group.has_room_besides(ep) {
                        return Ok(Queue::RoomElsewhere);
                    }
                }
            }
        }
    }
}

/// How a wait in an endpoint's queue ended.
enum Queue {
    Got(OwnedSemaphorePermit),
    /// The endpoint went down while the call queued: it moves elsewhere.
    Down,
    /// Another endpoint has a free slot.
    RoomElsewhere,
}
