//! A cheap, clonable view of a run's progress for progress bars and metrics exporters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Serialize;
use tokio::sync::Notify;

use crate::pool::{PoolCounters, PoolSnapshot};

/// Live counters of a run. Clone freely; reads are relaxed atomic loads.
#[derive(Debug, Clone)]
pub struct RuntimeStats {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pools: Vec<Arc<PoolCounters>>,
    active: AtomicUsize,
    max_active: AtomicUsize,
    started: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    iterations_done: AtomicU64,
    /// Shared with every pool: one permit per finished call.
    calls_changed: Arc<Notify>,
}

/// A copy of [`RuntimeStats`] at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    pub roles: Vec<PoolSnapshot>,
    pub active_problems: usize,
    /// Highest number of coordinators alive at once so far.
    pub max_active_problems: usize,
    pub problems_started: u64,
    pub problems_succeeded: u64,
    pub problems_failed: u64,
    /// Iterations finished across problems (an iteration is done once the next one
    /// starts, or its problem finished successfully).
    pub iterations_done: u64,
}

impl RuntimeStats {
    /// Counters for the given roles, in that order.
    pub(crate) fn new<'a>(roles: impl IntoIterator<Item = &'a Arc<str>>) -> Self {
        let calls_changed = Arc::new(Notify::new());
        let pools = roles
            .into_iter()
            .map(|r| Arc::new(PoolCounters::new(r.clone(), calls_changed.clone())))
            .collect();
        Self {
            inner: Arc::new(Inner {
                pools,
                active: AtomicUsize::new(0),
                max_active: AtomicUsize::new(0),
                started: AtomicU64::new(0),
                succeeded: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                iterations_done: AtomicU64::new(0),
                calls_changed,
            }),
        }
    }

    pub(crate) fn pools(&self) -> &[Arc<PoolCounters>] {
        &self.inner.pools
    }

    pub(crate) fn calls_changed(&self) -> &Notify {
        &self.inner.calls_changed
    }

    /// Calls submitted and unfinished, over all roles.
    pub fn outstanding_calls(&self) -> u64 {
        self.inner.pools.iter().map(|p| p.outstanding()).sum()
    }

    pub fn active_problems(&self) -> usize {
        self.inner.active.load(Ordering::Relaxed)
    }

    pub(crate) fn on_problem_started(&self) {
        self.inner.started.fetch_add(1, Ordering::Relaxed);
        let now = self.inner.active.fetch_add(1, Ordering::Relaxed) + 1;
        self.inner.max_active.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn on_problem_exited(&self) {
        self.inner.active.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn on_iterations_done(&self, n: u64) {
        self.inner.iterations_done.fetch_add(n, Ordering::Relaxed);
        metrics::counter!("tmas_iterations_done_total").increment(n);
    }

    pub(crate) fn on_problem_result(&self, ok: bool) {
        let c = if ok {
            &self.inner.succeeded
        } else {
            &self.inner.failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let i = &self.inner;
        StatsSnapshot {
            roles: i.pools.iter().map(|p| p.snapshot()).collect(),
            active_problems: i.active.load(Ordering::Relaxed),
            max_active_problems: i.max_active.load(Ordering::Relaxed),
            problems_started: i.started.load(Ordering::Relaxed),
            problems_succeeded: i.succeeded.load(Ordering::Relaxed),
            problems_failed: i.failed.load(Ordering::Relaxed),
            iterations_done: i.iterations_done.load(Ordering::Relaxed),
        }
    }
}
