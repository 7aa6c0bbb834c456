//! One supervised worker pool per agent role.
//!
//! A [`RolePool`] is a supervisor actor that runs up to a fixed number of calls at once
//! (`PoolSettings::workers`, the role's concurrency limit), each in a worker task of its
//! own (`pool/worker.rs`). Jobs wait in the supervisor's priority queue (`pool/queue.rs`)
//! and start one at a time as running ones finish. A worker lives for one call, so a
//! pool's size costs nothing until its calls use it.
//!
//! # Why a hand-written supervisor rather than `ractor::factory`
//! The pool must guarantee that a job survives a panic of the call running it, and that a
//! job which keeps panicking ends as a failure instead of looping. A factory restarts a
//! crashed worker but drops the job it held, and has no per-job crash count. Here the
//! supervisor keeps every job (the worker only gets a copy of the request) and records
//! which worker runs which job, so when a worker reports a panic it knows exactly what to
//! re-queue and how often that job has crashed. That is a few dozen lines on top of one
//! actor and plain tasks, simpler than bolting the same bookkeeping onto a factory.
//!
//! Jobs never vanish: each ends in exactly one reply — the call's outcome, a
//! `worker_panic` failure after [`PoolSettings::job_crash_limit`] crashes, or a
//! `pool_stopped` failure if the pool shuts down (or is already gone) first. The last case
//! is enforced by [`Job`]'s `Drop`, because ractor drops messages still in the mailbox of
//! a stopping actor.

mod counters;
mod queue;
mod worker;

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::{AbortHandle, JoinHandle};

pub use counters::{PoolCounters, PoolSnapshot};
pub use queue::{JobQueue, Ticket};
pub use worker::{WorkerId, WorkerReport};

use crate::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome, CallSpec, EmbeddingSpec};
use crate::wire::ModelRequest;
use worker::RunCall;

/// Where a job's outcome goes. Called exactly once.
pub type JobReply = Box<dyn FnOnce(CallKey, CallOutcome) + Send + 'static>;

/// One call to run in a pool.
///
/// A job always answers: if it is dropped unanswered — left in the mailbox of a pool that
/// stopped, refused by a stopped pool, dropped by a crashing supervisor — its `Drop`
/// sends a `pool_stopped` failure. That makes "never lost" a property of the type rather
/// than of every code path.
pub struct Job {
    key: CallKey,
    request: ModelRequest,
    group: Arc<str>,
    priority: i64,
    span: tracing::Span,
    reply: Option<JobReply>,
    /// Set once submitted, so the counters follow the job to its end.
    counters: Option<Arc<PoolCounters>>,
    running: bool,
}

impl Job {
    /// A chat call's job, with priority 0 and no span.
    pub fn new(spec: CallSpec, group: Arc<str>, reply: JobReply) -> Self {
        Self::of(spec.key, ModelRequest::Chat(spec.request), group, reply)
    }

    /// An embeddings call's job, with priority 0 and no span.
    pub fn embeddings(spec: EmbeddingSpec, group: Arc<str>, reply: JobReply) -> Self {
        Self::of(
            spec.key,
            ModelRequest::Embeddings(spec.request),
            group,
            reply,
        )
    }

    /// The job of the call `key` asking `request`, with priority 0 and no span.
    pub fn of(key: CallKey, request: ModelRequest, group: Arc<str>, reply: JobReply) -> Self {
        Self {
            key,
            request,
            group,
            priority: 0,
            span: tracing::Span::none(),
            reply: Some(reply),
            counters: None,
            running: false,
        }
    }

    /// Larger runs earlier; equal priorities run in submission order.
    pub fn with_priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// The call's span: the worker runs the executor inside it.
    pub fn with_span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    pub fn key(&self) -> &CallKey {
        &self.key
    }

    fn mark_running(&mut self, running: bool) {
        if let Some(c) = &self.counters {
            match (self.running, running) {
                (false, true) => c.on_started(),
                (true, false) => c.on_requeued(),
                _ => {}
            }
        }
        self.running = running;
    }

    /// Delivers the outcome (first call only) and updates the counters.
    fn complete(&mut self, outcome: CallOutcome) {
        let Some(reply) = self.reply.take() else {
            return;
        };
        if let Some(c) = &self.counters {
            c.on_finished(self.running, outcome.is_ok());
        }
        reply(self.key.clone(), outcome);
    }

    fn fail(mut self, kind: &str, message: String) {
        self.complete(Err(CallFailure::new(kind, message)));
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.reply.is_some() {
            let role = self.key.role.clone();
            let message =
                format!("role `{role}`: the worker pool stopped before the call finished");
            self.complete(Err(CallFailure::new("pool_stopped", message)));
        }
    }
}

/// Shape of one pool.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub role: Arc<str>,
    /// The most calls this role runs at once (each in a worker task). At least 1.
    pub workers: usize,
    /// A job whose call has panicked this many times is failed with kind `worker_panic`.
    /// At least 1 (1 = never retried after a crash).
    pub job_crash_limit: u32,
}

/// Messages of the pool supervisor. Use [`RolePool::submit`] rather than sending `Submit`
/// directly: it keeps the counters right and fails the job if the pool is gone.
pub enum PoolMsg {
    Submit(Job),
    /// Sent by a worker whose call finished.
    WorkerDone(WorkerReport),
    /// Sent by a worker whose call panicked.
    WorkerLost {
        worker: WorkerId,
        why: String,
    },
}

/// Errors starting a pool.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("role `{role}`: pool settings invalid: {reason}")]
    Settings { role: Arc<str>, reason: String },
    #[error("role `{role}`: could not start the pool actor: {source}")]
    Spawn {
        role: Arc<str>,
        source: ractor::SpawnErr,
    },
}

/// Handle to a running pool; cheap to clone.
#[derive(Clone)]
pub struct RolePool {
    actor: ActorRef<PoolMsg>,
    counters: Arc<PoolCounters>,
}

impl RolePool {
    /// Starts the supervisor. The pool is unlinked (it outlives any one
    /// problem); stop it with [`RolePool::stop`].
    pub async fn spawn(
        settings: PoolSettings,
        executor: Arc<dyn CallExecutor>,
        counters: Arc<PoolCounters>,
    ) -> Result<(Self, JoinHandle<()>), PoolError> {
        if settings.workers == 0 {
            return Err(PoolError::Settings {
                role: settings.role,
                reason: "workers must be at least 1".into(),
            });
        }
        if settings.job_crash_limit == 0 {
            return Err(PoolError::Settings {
                role: settings.role,
                reason: "job_crash_limit must be at least 1".into(),
            });
        }
        let role = settings.role.clone();
        let args = PoolArgs {
            settings,
            executor,
            counters: counters.clone(),
        };
        let (actor, join) = Actor::spawn(None, PoolSupervisor, args)
            .await
            .map_err(|source| PoolError::Spawn { role, source })?;
        Ok((Self { actor, counters }, join))
    }

    /// Queues a job. Never loses it: if the pool has stopped, the job's reply gets a
    /// `pool_stopped` failure immediately.
    pub fn submit(&self, mut job: Job) {
        self.counters.on_submitted();
        job.counters = Some(self.counters.clone());
        // A refused job comes back inside the error; dropping it answers `pool_stopped`.
        let _ = self.actor.send_message(PoolMsg::Submit(job));
    }

    pub fn counters(&self) -> &Arc<PoolCounters> {
        &self.counters
    }

    /// Stops the pool and its workers and waits until they are gone. Jobs still queued or
    /// running get a `pool_stopped` failure.
    pub async fn stop(&self) {
        // An error only means the pool had already stopped.
        let _ = self
            .actor
            .stop_and_wait(Some("pool stopped".into()), None)
            .await;
    }
}

struct PoolSupervisor;

struct PoolArgs {
    settings: PoolSettings,
    executor: Arc<dyn CallExecutor>,
    counters: Arc<PoolCounters>,
}

/// A job as the supervisor keeps it while queued or running.
struct Held {
    job: Job,
    crashes: u32,
}

struct PoolState {
    settings: PoolSettings,
    executor: Arc<dyn CallExecutor>,
    counters: Arc<PoolCounters>,
    /// Worker id → (the job it runs, the job's place in line, the worker's task).
    busy: HashMap<WorkerId, (Held, Ticket, AbortHandle)>,
    next_worker: WorkerId,
    queue: JobQueue<Held>,
}

impl PoolState {
    /// Starts queued jobs, each in a worker of its own, while fewer than the pool's size
    /// run.
    fn dispatch(&mut self, myself: &ActorRef<PoolMsg>) {
        while self.busy.len() < self.settings.workers {
            let Some((ticket, mut held)) = self.queue.pop() else {
                return;
            };
            let run = RunCall {
                key: held.job.key.clone(),
                group: held.job.group.clone(),
                request: held.job.request.clone(),
                span: held.job.span.clone(),
            };
            held.job.mark_running(true);
            let id = self.next_worker;
            self.next_worker += 1;
            let task = worker::spawn(id, run, self.executor.clone(), myself.clone());
            self.busy.insert(id, (held, ticket, task));
        }
    }

    /// A worker's call panicked: re-queue or fail its job.
    fn on_worker_lost(&mut self, id: WorkerId, why: String) {
        // Counted before any reply goes out, so whoever sees the reply sees the restart.
        self.counters.on_worker_restart();
        let Some((mut held, ticket, _)) = self.busy.remove(&id) else {
            return;
        };
        held.crashes += 1;
        let key = held.job.key.clone();
        if held.crashes >= self.settings.job_crash_limit {
            tracing::error!(call = %key, crashes = held.crashes, error = %why,
                "call crashed its worker too often; failing it");
            let msg = format!(
                "call {key} crashed a `{}` worker {} times; last: {why}",
                self.settings.role, held.crashes
            );
            held.job.fail("worker_panic", msg);
        } else {
            tracing::warn!(call = %key, crashes = held.crashes, error = %why,
                "worker crashed; re-queueing its call");
            held.job.mark_running(false);
            self.queue.requeue(ticket, held);
        }
    }

    /// Fails every queued and running job; running workers are stopped (their outcome
    /// would have nowhere to go).
    fn fail_all(&mut self, why: &str) {
        for held in self.queue.drain() {
            held.job.fail("pool_stopped", why.to_owned());
        }
        for (_, (held, _, task)) in self.busy.drain() {
            task.abort();
            held.job.fail("pool_stopped", why.to_owned());
        }
    }
}

impl Actor for PoolSupervisor {
    type Msg = PoolMsg;
    type State = PoolState;
    type Arguments = PoolArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<PoolMsg>,
        args: PoolArgs,
    ) -> Result<PoolState, ActorProcessingErr> {
        Ok(PoolState {
            busy: HashMap::new(),
            next_worker: 0,
            queue: JobQueue::default(),
            settings: args.settings,
            executor: args.executor,
            counters: args.counters,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<PoolMsg>,
        msg: PoolMsg,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PoolMsg::Submit(job) => {
                let priority = job.priority;
                state.queue.push(priority, Held { job, crashes: 0 });
            }
            PoolMsg::WorkerDone(WorkerReport { worker, outcome }) => {
                if let Some((mut held, _, _)) = state.busy.remove(&worker) {
                    held.job.complete(outcome);
                }
            }
            PoolMsg::WorkerLost { worker, why } => state.on_worker_lost(worker, why),
        }
        state.dispatch(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<PoolMsg>,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        let why = format!(
            "role `{}`: the worker pool was stopped",
            state.settings.role
        );
        state.fail_all(&why);
        Ok(())
    }
}
