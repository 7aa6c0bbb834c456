//! Endpoint groups and their routing policy ([`Routing`]): by default the healthy endpoint
//! with the fewest calls in flight (sent + queued for a slot) for its concurrency limit
//! wins; with prefix affinity a
//! call goes to its key's preferred endpoint (bounded-load rendezvous hashing) unless
//! that one is down or saturated. Pure reads of atomics, no locks on the hot path.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::config::Routing;
use super::endpoint::Endpoint;

/// Prefix affinity's load bound: an endpoint takes a call for its key only while its load
/// stays within this factor of the group's mean (bounded-load consistent hashing,
/// Mirrokni, Thorup and Zadimoghaddam 2018).
pub const AFFINITY_LOAD_BOUND: f64 = 1.25;

/// A named set of endpoints serving the same model (usually one per agent role).
#[derive(Debug)]
pub(crate) struct Group {
    pub name: Arc<str>,
    pub members: Vec<Arc<Endpoint>>,
    pub routing: Routing,
    /// Each member's rendezvous hash seed (from its name, so every group holding an
    /// endpoint ranks it the same way for a key: a problem's calls of all roles meet on
    /// one server).
    member_hashes: Vec<u64>,
    /// Rotates the starting point so ties do not always land on the first endpoint.
    rotor: AtomicUsize,
    in_outage: AtomicBool,
    outage_since: Mutex<Option<Instant>>,
}

impl Group {
    pub fn new(name: Arc<str>, members: Vec<Arc<Endpoint>>, routing: Routing) -> Self {
        Self {
            name,
            member_hashes: members.iter().map(|m| hash_str(m.name())).collect(),
            members,
            routing,
            rotor: AtomicUsize::new(0),
            in_outage: AtomicBool::new(false),
            outage_since: Mutex::new(None),
        }
    }

    pub fn any_healthy(&self) -> bool {
        self.members.iter().any(|e| e.is_healthy())
    }

    /// The endpoint for a call with affinity key `key` (the prompt prefix it shares,
    /// [`crate::wire::CallTags::affinity_key`]): under
    /// [`Routing::PrefixAffinity`] the key's preferred healthy endpoint within the load
    /// bound, else (and under [`Routing::LeastLoad`]) [`Self::least_loaded`]. `avoid`
    /// (the endpoint a retry just failed on) is only chosen when no other healthy
    /// endpoint exists.
    pub fn pick(&self, avoid: Option<&Arc<Endpoint>>, key: &str) -> Option<Arc<Endpoint>> {
        if self.routing == Routing::PrefixAffinity {
            let candidates: Vec<Candidate> = self
                .members
                .iter()
                .zip(&self.member_hashes)
                .map(|(ep, &hash)| Candidate {
                    hash,
                    load: ep.load(),
                    eligible: ep.is_healthy() && !avoid.is_some_and(|a| Arc::ptr_eq(a, ep)),
                    saturated: ep.load() >= 2 * ep.limit.current(),
                })
                .collect();
            if let Some(i) = affinity_choice(hash_str(key), &candidates, AFFINITY_LOAD_BOUND) {
                if self.in_outage.load(Ordering::Relaxed) {
                    self.leave_outage();
                }
                return Some(self.members[i].clone());
            }
        }
        self.least_loaded(avoid)
    }

    /// The healthy endpoint with the lowest load for its concurrency limit
    /// ([`lighter`]). `avoid` is only chosen when no other healthy endpoint exists.
    pub fn least_loaded(&self, avoid: Option<&Arc<Endpoint>>) -> Option<Arc<Endpoint>> {
        let n = self.members.len();
        if n == 0 {
            return None;
        }
        let start = self.rotor.fetch_add(1, Ordering::Relaxed) % n;
        let mut best: Option<(&Arc<Endpoint>, (usize, usize))> = None;
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
            let load = (ep.load(), ep.limit.current());
            if best.is_none_or(|(_, l)| lighter(load, l)) {
                best = Some((ep, load));
            }
        }
        let chosen = best.map(|(ep, _)| ep).or(fallback).cloned();
        if chosen.is_some() && self.in_outage.load(Ordering::Relaxed) {
            self.leave_outage();
        }
        chosen
    }

    /// Whether a member other than `ep` is healthy.
    pub fn healthy_besides(&self, ep: &Arc<Endpoint>) -> bool {
        self.members
            .iter()
            .any(|m| !Arc::ptr_eq(m, ep) && m.is_healthy())
    }

    /// Whether a healthy member other than `ep` has a slot free now.
    pub fn has_room_besides(&self, ep: &Arc<Endpoint>) -> bool {
        self.members.iter().any(|m| {
            !Arc::ptr_eq(m, ep) && m.is_healthy() && m.limit.permits().available_permits() > 0
        })
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

/// One member as [`affinity_choice`] sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Rendezvous hash seed of the member.
    pub hash: u64,
    /// Calls sent or queued there.
    pub load: usize,
    /// Healthy and not the endpoint a retry avoids.
    pub eligible: bool,
    /// As many calls queue there as its concurrency limit lets run (a full limit alone
    /// is not saturation: with the global cap at the sum of the endpoints' limits, every
    /// endpoint is full all the time, and the load bound already keeps queues even).
    pub saturated: bool,
}

/// True when `a` = (load, limit) is less loaded than `b` for its limit: `a.0 ÷ a.1 <
/// b.0 ÷ b.1`, compared without division. With equal limits this is the fewest calls;
/// with unequal ones (servers of different sizes, or adaptive limits that settled apart)
/// a call goes where a slot is nearest to free, instead of queueing for the small
/// server's slots while the large one has free ones.
pub(crate) fn lighter(a: (usize, usize), b: (usize, usize)) -> bool {
    let (load_a, limit_a) = (a.0 as u128, a.1.max(1) as u128);
    let (load_b, limit_b) = (b.0 as u128, b.1.max(1) as u128);
    load_a * limit_b < load_b * limit_a
}

/// Bounded-load rendezvous hashing: the members ranked by hash(key, member), the first
/// eligible, unsaturated one whose load after taking the call stays within
/// `ceil(bound × (total load + 1) ÷ eligible members)`; `None` when none qualifies (the
/// caller falls back to least-load). Every key has its own ranking, so when its first
/// choice is full or down its calls spread over the others instead of piling onto one
/// neighbour.
pub(crate) fn affinity_choice(key: u64, members: &[Candidate], bound: f64) -> Option<usize> {
    let eligible = members.iter().filter(|m| m.eligible).count();
    if eligible == 0 {
        return None;
    }
    let total: usize = members.iter().filter(|m| m.eligible).map(|m| m.load).sum();
    let cap = (bound * (total + 1) as f64 / eligible as f64).ceil() as usize;
    let mut ranked: Vec<(u64, usize)> = members
        .iter()
        .enumerate()
        .filter(|(_, m)| m.eligible)
        .map(|(i, m)| (mix(key, m.hash), i))
        .collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    ranked
        .into_iter()
        .map(|(_, i)| i)
        .find(|&i| !members[i].saturated && members[i].load < cap)
}

/// A stable 64-bit hash of a string (FNV-1a, then a finalizer).
fn hash_str(s: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    fmix(h)
}

fn mix(a: u64, b: u64) -> u64 {
    fmix(a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn fmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
