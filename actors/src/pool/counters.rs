//! Lock-free counters of one role pool, read by progress displays and by work-conserving
//! admission while the pool actor updates them.
//!
//! `queued` is raised by [`super::RolePool::submit`] on the caller's side *before* the job
//! message is sent, so a caller that has just submitted work (a coordinator starting up)
//! sees it counted at once — admission never over-admits because a message is in transit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tokio::sync::Notify;

/// Counters of one role's pool. Shared via `Arc`; all updates are relaxed atomics.
#[derive(Debug)]
pub struct PoolCounters {
    role: Arc<str>,
    queued: AtomicU64,
    in_flight: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    worker_restarts: AtomicU64,
    /// Signalled whenever a call leaves the pool, so a waiting admitter can re-check.
    changed: Arc<Notify>,
}

/// A copy of [`PoolCounters`] at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    pub role: Arc<str>,
    /// Submitted, waiting for a free worker.
    pub queued: u64,
    /// Running on a worker.
    pub in_flight: u64,
    /// Finished with a response.
    pub done: u64,
    /// Finished with a failure (including jobs failed after repeated worker panics).
    pub failed: u64,
    /// Workers replaced after a panic.
    pub worker_restarts: u64,
}

impl PoolCounters {
    /// `changed` is notified (one permit) each time a call finishes; several pools may share it.
    pub fn new(role: impl Into<Arc<str>>, changed: Arc<Notify>) -> Self {
        Self {
            role: role.into(),
            queued: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            worker_restarts: AtomicU64::new(0),
            changed,
        }
    }

    pub fn role(&self) -> &Arc<str> {
        &self.role
    }

    /// Calls submitted and not yet finished (waiting + running).
    pub fn outstanding(&self) -> u64 {
        self.queued.load(Ordering::Relaxed) + self.in_flight.load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> PoolSnapshot {
        PoolSnapshot {
            role: self.role.clone(),
            queued: self.queued.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            worker_restarts: self.worker_restarts.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn on_submitted(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn on_started(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A running job went back to the queue (its worker crashed).
    pub(crate) fn on_requeued(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn on_worker_restart(&self) {
        self.worker_restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// A job left the pool; `was_running` says which gauge it leaves.
    pub(crate) fn on_finished(&self, was_running: bool, ok: bool) {
        if was_running {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        } else {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        if ok {
            self.done.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_follow_a_job_through_the_pool() {
        let c = PoolCounters::new("solve", Arc::new(Notify::new()));
        c.on_submitted();
        c.on_submitted();
        assert_eq!(c.outstanding(), 2);
        c.on_started();
        c.on_requeued();
        c.on_started();
        c.on_finished(true, true);
        c.on_finished(false, false);
        let s = c.snapshot();
        assert_eq!((s.queued, s.in_flight, s.done, s.failed), (0, 0, 1, 1));
        assert_eq!(c.outstanding(), 0);
    }
}
