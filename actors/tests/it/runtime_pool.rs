//! Role pools in isolation: concurrency limit, exactly-once execution, crash recovery,
//! restart limit, priorities and shutdown.

use std::collections::HashMap;
use std::sync::Arc;

use crate::support::toy::*;
use crate::support::{TEST_TIMEOUT, wait_until};
use tmas_actors::pool::{Job, PoolCounters, PoolSettings, RolePool};
use tmas_actors::strategy::{CallKey, CallOutcome};
use tmas_client::failure::FailureKind;
use tokio::sync::{Notify, mpsc};

type Outcomes = mpsc::UnboundedReceiver<(CallKey, CallOutcome)>;

async fn start_pool(fake: &Arc<FakeExecutor>, workers: usize, crash_limit: u32) -> RolePool {
    let settings = PoolSettings {
        role: "solve".into(),
        workers,
        job_crash_limit: crash_limit,
    };
    let counters = Arc::new(PoolCounters::new("solve", Arc::new(Notify::new())));
    RolePool::spawn(settings, Arc::new(Shared(fake.clone())), counters)
        .await
        .unwrap()
        .0
}

fn job(n: u32, priority: i64, tx: &mpsc::UnboundedSender<(CallKey, CallOutcome)>) -> Job {
    let tx = tx.clone();
    let reply = Box::new(move |key, outcome| {
        let _ = tx.send((key, outcome));
    });
    Job::new(spec("p", 0, "solve", Some(n)), "g".into(), reply).with_priority(priority)
}

/// Content the executor sees for job `n`.
fn content(n: u32) -> String {
    spec("p", 0, "solve", Some(n)).key.to_string()
}

async fn collect(rx: &mut Outcomes, n: usize) -> HashMap<u32, CallOutcome> {
    let mut out = HashMap::new();
    for _ in 0..n {
        let (key, outcome) = tokio::time::timeout(TEST_TIMEOUT, rx.recv())
            .await
            .expect("timed out waiting for a job reply")
            .expect("reply channel closed");
        let c = key.candidate.unwrap();
        assert!(out.insert(c, outcome).is_none(), "job {c} replied twice");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_every_job_exactly_once_within_the_worker_limit() {
    let mut fake = FakeExecutor::new();
    fake.max_delay_ms = 4;
    let fake = Arc::new(fake);
    let pool = start_pool(&fake, 3, 3).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for n in 0..40 {
        pool.submit(job(n, 0, &tx));
    }
    let out = collect(&mut rx, 40).await;
    for n in 0..40 {
        assert_eq!(
            out[&n].as_ref().unwrap().content.as_ref(),
            format!("ans({})", content(n))
        );
        assert_eq!(fake.attempts_of(&content(n)), 1);
    }
    let max = fake.max_concurrency("g");
    assert!((1..=3).contains(&max), "pool of 3 ran {max} calls at once");
    let snap = pool.counters().snapshot();
    assert_eq!(
        (snap.queued, snap.in_flight, snap.done, snap.failed),
        (0, 0, 40, 0)
    );
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_is_replaced_and_its_job_retried() {
    let mut fake = FakeExecutor::new();
    fake.panic_first.insert(content(5));
    fake.gated.extend([content(20), content(21)]);
    let fake = Arc::new(fake);
    let pool = start_pool(&fake, 2, 3).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for n in 0..10 {
        pool.submit(job(n, 0, &tx));
    }
    let out = collect(&mut rx, 10).await;
    assert!(out.values().all(|o| o.is_ok()), "{out:?}");
    assert_eq!(fake.attempts_of(&content(5)), 2);
    let snap = pool.counters().snapshot();
    assert_eq!((snap.done, snap.failed, snap.worker_restarts), (10, 0, 1));
    // The pool is back to full strength: two gated jobs are running at the same time.
    pool.submit(job(20, 0, &tx));
    pool.submit(job(21, 0, &tx));
    wait_until("both gated jobs to run", || {
        fake.attempts_of(&content(20)) == 1 && fake.attempts_of(&content(21)) == 1
    })
    .await;
    fake.gate.add_permits(2);
    let out = collect(&mut rx, 2).await;
    assert!(out.values().all(|o| o.is_ok()));
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_always_crashes_fails_after_the_limit_and_the_rest_complete() {
    let mut fake = FakeExecutor::new();
    fake.panic_always.insert(content(2));
    let fake = Arc::new(fake);
    let pool = start_pool(&fake, 2, 3).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for n in 0..6 {
        pool.submit(job(n, 0, &tx));
    }
    let out = collect(&mut rx, 6).await;
    let failure = out[&2].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::WorkerPanic);
    assert!(failure.message.contains("3 times"), "{}", failure.message);
    assert_eq!(fake.attempts_of(&content(2)), 3);
    assert!((0..6).filter(|n| *n != 2).all(|n| out[&n].is_ok()));
    let snap = pool.counters().snapshot();
    assert_eq!((snap.done, snap.failed, snap.worker_restarts), (5, 1, 3));
    assert_eq!((snap.queued, snap.in_flight), (0, 0));
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_jobs_run_by_priority_then_in_submission_order() {
    let mut fake = FakeExecutor::new();
    fake.gated.insert(content(0));
    let fake = Arc::new(fake);
    let pool = start_pool(&fake, 1, 3).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    pool.submit(job(0, 0, &tx));
    // Wait until the only worker is busy with job 0, so the rest must queue.
    wait_until("job 0 to start", || fake.attempts_of(&content(0)) == 1).await;
    pool.submit(job(1, 0, &tx));
    pool.submit(job(2, 10, &tx));
    pool.submit(job(3, 5, &tx));
    pool.submit(job(4, 0, &tx));
    pool.submit(job(5, 10, &tx));
    // Submits reach the pool before job 0 can report, so all five are queued by then.
    fake.gate.add_permits(1);
    collect(&mut rx, 6).await;
    let order: Vec<String> = [0, 2, 5, 3, 1, 4].iter().map(|n| content(*n)).collect();
    assert_eq!(fake.completed(), order);
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_pool_fails_waiting_and_running_jobs_and_later_submissions() {
    let mut fake = FakeExecutor::new();
    fake.gated.insert(content(0));
    let fake = Arc::new(fake);
    let pool = start_pool(&fake, 1, 3).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    pool.submit(job(0, 0, &tx));
    wait_until("job 0 to start", || fake.attempts_of(&content(0)) == 1).await;
    pool.submit(job(1, 0, &tx));
    pool.submit(job(2, 0, &tx));
    // Jobs 1 and 2 may still sit in the pool's mailbox when it stops: they must be
    // answered all the same.
    pool.stop().await;
    pool.submit(job(3, 0, &tx));
    let out = collect(&mut rx, 4).await;
    for n in 0..4 {
        assert_eq!(
            out[&n].as_ref().unwrap_err().kind,
            FailureKind::PoolStopped,
            "job {n}"
        );
    }
    let snap = pool.counters().snapshot();
    assert_eq!((snap.queued, snap.in_flight, snap.failed), (0, 0, 4));
}
