//! Endpoint groups and the routing policy: the healthy endpoint with the fewest calls in
//! flight (sent + queued for a slot) wins. Pure reads of atomics, no locks on the hot path.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::endpoint::Endpoint;

/// A named set of endpoints serving the same model (usually one per agent role).
#[derive(Debug)]
pub(crate) struct Group {
    pub name: Arc<str>,
    pub members: Vec<Arc<Endpoint>>,
    /// Rotates the starting point so ties do not always land on the first endpoint.
    rotor: AtomicUsize,
    in_outage: AtomicBool,
    outage_since: Mutex<Option<Instant>>,
}

impl Group {
    pub fn new(name: Arc<str>, members: Vec<Arc<Endpoint>>) -> Self {
        Self {
            name,
            members,
            rotor: AtomicUsize::new(0),
            in_outage: AtomicBool::new(false),
            outage_since: Mutex::new(None),
        }
    }

    pub fn any_healthy(&self) -> bool {
        self.members.iter().any(|e| e.is_healthy())
    }

    /// The healthy endpoint with the lowest load. `avoid` (the endpoint a retry just
    /// failed on) is only chosen when no other healthy endpoint exists.
    pub fn pick(&self, avoid: Option<&Arc<Endpoint>>) -> Option<Arc<Endpoint>> {
        let n = self.members.len();
        if n == 0 {
            return None;
        }
        let start = self.rotor.fetch_add(1, Ordering::Relaxed) % n;
        let mut best: Option<(&Arc<Endpoint>, usize)> = None;
        let mut fallback = None;
        for i in 0..n {
            let ep = &self.members[(start + i) % n];
            if !ep.is_healthy() {
                continue;
            }
            if avoid.is_some_and(|a| Arc::ptr_eq(a, ep)) {
                fallback = Some(ep);
                continue;
            }
            let load = ep.load();
            if best.is_none_or(|(_, l)| load < l) {
                best = Some((ep, load));
            }
        }
        let chosen = best.map(|(ep, _)| ep).or(fallback).cloned();
        if chosen.is_some() && self.in_outage.load(Ordering::Relaxed) {
            self.leave_outage();
        }
        chosen
    }

    /// Called by a call that finds every endpoint down; logs once per outage.
    pub fn enter_outage(&self, budget: Duration) {
        if self.in_outage.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Ok(mut since) = self.outage_since.lock() {
            *since = Some(Instant::now());
        }
        tracing::warn!(
            group = %self.name,
            ?budget,
            "every endpoint of the group is down; calls wait for one to come back (up to the outage budget)"
        );
    }

    fn leave_outage(&self) {
        if !self.in_outage.swap(false, Ordering::AcqRel) {
            return;
        }
        let since = self.outage_since.lock().ok().and_then(|mut s| s.take());
        let lasted = since.map(|s| s.elapsed()).unwrap_or_default();
        tracing::info!(group = %self.name, ?lasted, "group has a healthy endpoint again; waiting calls resume");
    }
}
