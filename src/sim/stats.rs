//! Serving counters: lock-free atomics on the hot path, a snapshot as JSON (`/sim/stats`)
//! and as Prometheus text (`/metrics`).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::task::role_label;
use crate::role::{PerRole, Role};

/// Fault kinds, in counter order.
pub const FAULT_KINDS: [&str; 10] = [
    "overload",
    "error_500",
    "drop_connection",
    "hang",
    "malformed_json",
    "truncated",
    "unparseable_score",
    "interrupted_stream",
    "first_requests",
    "interrupted_on_arrival",
];

/// Statuses the simulator answers with; anything else is counted as `other`.
const STATUSES: [u16; 7] = [200, 400, 404, 429, 500, 503, 0];

/// A request kept for tests that inspect prompts (`record_requests = N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// `x-tmas-*`, `traceparent` and `tracestate` headers.
    pub headers: BTreeMap<String, String>,
    /// (role, content) of each message.
    pub messages: Vec<(String, String)>,
    pub stream: bool,
    pub max_tokens: Option<u64>,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimStats {
    /// Chat-completion and embeddings requests received (including rejected ones).
    pub requests_total: u64,
    pub by_role: BTreeMap<String, u64>,
    /// Normal (non-fault) 200 replies fully delivered, by role.
    pub ok_by_role: BTreeMap<String, u64>,
    /// Chat-completion and embeddings responses by HTTP status (`"other"` for the rest).
    pub responses_by_status: BTreeMap<String, u64>,
    pub in_flight: u64,
    pub peak_in_flight: u64,
    /// Most requests waiting for a slot at once (`max_queue`).
    #[serde(default)]
    pub peak_queued: u64,
    /// Sum over requests of the time from arrival to response end.
    pub busy_seconds: f64,
    pub faults: BTreeMap<String, u64>,
    /// The last `record_requests` requests, oldest first.
    pub recent_requests: Vec<RecordedRequest>,
    /// The server model's counters (prefix cache, queue), when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_model: Option<super::server_model::ServerModelStats>,
}

/// A counter per role, and one for requests that named no role.
struct RoleCounts {
    roles: PerRole<AtomicU64>,
    other: AtomicU64,
}

impl Default for RoleCounts {
    fn default() -> Self {
        Self {
            roles: PerRole::from_fn(|_| AtomicU64::new(0)),
            other: AtomicU64::new(0),
        }
    }
}

impl RoleCounts {
    fn of(&self, role: Option<Role>) -> &AtomicU64 {
        role.map_or(&self.other, |r| &self.roles[r])
    }

    fn all(&self) -> impl Iterator<Item = &AtomicU64> {
        self.roles.values().chain([&self.other])
    }

    /// Every count by the name the stats give its role.
    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.roles
            .iter()
            .map(|(r, a)| (Some(r), a))
            .chain([(None, &self.other)])
            .map(|(r, a)| (role_label(r).to_owned(), a.load(Relaxed)))
            .collect()
    }
}

#[derive(Default)]
pub struct Counters {
    requests: AtomicU64,
    by_role: RoleCounts,
    ok_by_role: RoleCounts,
    statuses: [AtomicU64; STATUSES.len()],
    in_flight: AtomicU64,
    peak: AtomicU64,
    queued: AtomicU64,
    peak_queued: AtomicU64,
    /// Woken when a slot frees up (queued requests wait on it).
    freed: tokio::sync::Notify,
    busy_nanos: AtomicU64,
    faults: [AtomicU64; FAULT_KINDS.len()],
    recent: Mutex<VecDeque<RecordedRequest>>,
}

impl Counters {
    pub fn request(&self, role: Option<Role>) {
        self.requests.fetch_add(1, Relaxed);
        self.by_role.of(role).fetch_add(1, Relaxed);
    }

    pub fn status(&self, status: u16) {
        let i = STATUSES
            .iter()
            .position(|s| *s == status)
            .unwrap_or(STATUSES.len() - 1);
        self.statuses[i].fetch_add(1, Relaxed);
    }

    pub fn fault(&self, kind: &str) {
        if let Some(i) = FAULT_KINDS.iter().position(|k| *k == kind) {
            self.faults[i].fetch_add(1, Relaxed);
        }
    }

    /// Admits a request unless `limit` (0 = none) requests are already in flight.
    pub fn try_enter(self: &Arc<Self>, limit: usize, role: Option<Role>) -> Option<InFlight> {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        if limit > 0 && now > limit as u64 {
            self.in_flight.fetch_sub(1, Relaxed);
            return None;
        }
        self.peak.fetch_max(now, Relaxed);
        Some(InFlight {
            counters: self.clone(),
            start: Instant::now(),
            role,
            ok: false,
        })
    }

    /// Admits a request, waiting for a slot while fewer than `max_queue` others wait;
    /// `None` when the queue is full too. A request whose client goes away leaves the
    /// queue (the future is dropped).
    pub async fn enter(
        self: &Arc<Self>,
        limit: usize,
        max_queue: usize,
        role: Option<Role>,
    ) -> Option<InFlight> {
        if let Some(slot) = self.try_enter(limit, role) {
            return Some(slot);
        }
        if max_queue == 0 {
            return None;
        }
        let waiting = self.queued.fetch_add(1, Relaxed) + 1;
        let _leave = Queued(self);
        if waiting > max_queue as u64 {
            return None;
        }
        self.peak_queued.fetch_max(waiting, Relaxed);
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(slot) = self.try_enter(limit, role) {
                return Some(slot);
            }
            freed.await;
        }
    }

    pub fn record(&self, cap: usize, r: RecordedRequest) {
        if cap == 0 {
            return;
        }
        let mut q = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        while q.len() >= cap {
            q.pop_front();
        }
        q.push_back(r);
    }

    /// Zeroes every counter except `in_flight` (requests still being served); the peak
    /// restarts from the current in-flight count.
    pub fn reset(&self) {
        self.requests.store(0, Relaxed);
        for a in self
            .by_role
            .all()
            .chain(self.ok_by_role.all())
            .chain(&self.statuses)
            .chain(&self.faults)
        {
            a.store(0, Relaxed);
        }
        self.busy_nanos.store(0, Relaxed);
        self.peak.store(self.in_flight.load(Relaxed), Relaxed);
        self.peak_queued.store(self.queued.load(Relaxed), Relaxed);
        self.recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn snapshot(&self) -> SimStats {
        SimStats {
            requests_total: self.requests.load(Relaxed),
            by_role: self.by_role.snapshot(),
            ok_by_role: self.ok_by_role.snapshot(),
            responses_by_status: STATUSES
                .iter()
                .zip(&self.statuses)
                .map(|(s, a)| {
                    (
                        if *s == 0 {
                            "other".to_owned()
                        } else {
                            s.to_string()
                        },
                        a.load(Relaxed),
                    )
                })
                .collect(),
            in_flight: self.in_flight.load(Relaxed),
            peak_in_flight: self.peak.load(Relaxed),
            peak_queued: self.peak_queued.load(Relaxed),
            busy_seconds: self.busy_nanos.load(Relaxed) as f64 / 1e9,
            faults: FAULT_KINDS
                .iter()
                .zip(&self.faults)
                .map(|(k, a)| ((*k).to_owned(), a.load(Relaxed)))
                .collect(),
            recent_requests: self
                .recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect(),
            server_model: None,
        }
    }
}

/// One admitted request; dropping it (when the response, or the stream, ends or the
/// connection goes away) releases its slot and adds its serving time.
pub struct InFlight {
    counters: Arc<Counters>,
    start: Instant,
    role: Option<Role>,
    ok: bool,
}

impl InFlight {
    /// Marks the request as a normal reply delivered in full.
    pub fn complete_ok(&mut self) {
        self.ok = true;
    }
}

/// Counts a request as queued until it is admitted or gives up.
struct Queued<'a>(&'a Counters);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Relaxed);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.counters;
        c.in_flight.fetch_sub(1, Relaxed);
        c.freed.notify_one();
        let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        c.busy_nanos.fetch_add(nanos, Relaxed);
        if self.ok {
            c.ok_by_role.of(self.role).fetch_add(1, Relaxed);
        }
    }
}

/// Prometheus text exposition of a snapshot.
pub fn prometheus(s: &SimStats) -> String {
    let mut out = String::with_capacity(2048);
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let labelled = [
        (
            "tmas_sim_requests_by_role_total",
            "Requests by x-tmas-role.",
            "role",
            &s.by_role,
        ),
        (
            "tmas_sim_ok_total",
            "Normal replies delivered, by role.",
            "role",
            &s.ok_by_role,
        ),
        (
            "tmas_sim_responses_total",
            "Responses by HTTP status.",
            "status",
            &s.responses_by_status,
        ),
        (
            "tmas_sim_faults_total",
            "Injected faults by kind.",
            "kind",
            &s.faults,
        ),
    ];
    head(
        &mut out,
        "tmas_sim_requests_total",
        "counter",
        "Chat-completion requests received.",
    );
    let _ = writeln!(out, "tmas_sim_requests_total {}", s.requests_total);
    for (name, help, label, map) in labelled {
        head(&mut out, name, "counter", help);
        for (k, v) in map {
            let _ = writeln!(out, "{name}{{{label}=\"{k}\"}} {v}");
        }
    }
    for (name, kind, help, v) in [
        (
            "tmas_sim_in_flight",
            "gauge",
            "Requests being served.",
            s.in_flight as f64,
        ),
        (
            "tmas_sim_peak_in_flight",
            "gauge",
            "Most requests at once since the last reset.",
            s.peak_in_flight as f64,
        ),
        (
            "tmas_sim_busy_seconds_total",
            "counter",
            "Sum of request serving times.",
            s.busy_seconds,
        ),
    ] {
        head(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_counts_and_reset() {
        let c = Arc::new(Counters::default());
        c.request(Some(Role::Judge));
        let mut a = c.try_enter(2, Some(Role::Judge)).unwrap();
        let b = c.try_enter(2, Some(Role::Judge)).unwrap();
        assert!(c.try_enter(2, Some(Role::Judge)).is_none());
        a.complete_ok();
        drop(a);
        drop(b);
        c.status(200);
        c.status(418);
        c.fault("hang");
        let s = c.snapshot();
        assert_eq!((s.requests_total, s.in_flight, s.peak_in_flight), (1, 0, 2));
        assert_eq!(s.ok_by_role["judge"], 1);
        assert_eq!(s.responses_by_status["200"], 1);
        assert_eq!(s.responses_by_status["other"], 1);
        assert_eq!(s.faults["hang"], 1);
        let text = prometheus(&s);
        assert!(
            text.contains("tmas_sim_ok_total{role=\"judge\"} 1"),
            "{text}"
        );
        c.reset();
        let s = c.snapshot();
        assert_eq!(
            (s.requests_total, s.peak_in_flight, s.faults["hang"]),
            (0, 0, 0)
        );
    }

    #[test]
    fn records_only_the_last_n() {
        let c = Counters::default();
        for i in 0..5 {
            let r = RecordedRequest {
                headers: BTreeMap::new(),
                messages: vec![],
                stream: false,
                max_tokens: Some(i),
            };
            c.record(2, r.clone());
            c.record(0, r);
        }
        let got: Vec<_> = c
            .snapshot()
            .recent_requests
            .iter()
            .map(|r| r.max_tokens)
            .collect();
        assert_eq!(got, vec![Some(3), Some(4)]);
    }
}
