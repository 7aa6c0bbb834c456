//! One supervised worker pool per agent role.
//!
//! A [`RolePool`] is a supervisor actor with up to a fixed number of worker children
//! (`pool/worker.rs`); that number is the role's concurrency limit. Jobs wait in the
//! supervisor's priority queue (`pool/queue.rs`) and go to idle workers one at a time.
//! Workers start as jobs need them (one at first), so a pool's size costs nothing until
//! its calls use it.
//!
//! # Why a hand-written supervisor rather than `ractor::factory`
//! The pool must guarantee that a job survives the panic of the worker running it, and
//! that a job which keeps crashing workers ends as a failure instead of looping. A factory
//! restarts a crashed worker but drops the job it held, and has no per-job crash count.
//! Here the supervisor keeps every job (the worker only gets a copy of the request) and
//! records which worker runs which job, so on `ActorFailed` it knows exactly what to re-queue
//! and how often that job has crashed. That is a few dozen lines on top of plain actors,
//! simpler than bolting the same bookkeeping onto a factory.
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

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::task::JoinHandle;

pub use counters::{PoolCounters, PoolSnapshot};
pub use queue::{JobQueue, Ticket};
pub use worker::WorkerReport;

use crate::strategy::{CallExecutor, CallFailure, CallKey, CallOutcome, CallSpec, EmbeddingSpec};
use tmas_client::failure::FailureKind;
use tmas_client::wire::ModelRequest;
use worker::{PoolWorker, RunCall, WorkerArgs};

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

    fn fail(mut self, kind: FailureKind, message: String) {
        self.complete(Err(CallFailure::new(kind, message)));
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.reply.is_some() {
            let role = self.key.role.clone();
            let message =
                format!("role `{role}`: the worker pool stopped before the call finished");
            self.complete(Err(CallFailure::new(FailureKind::PoolStopped, message)));
        }
    }
}

/// Shape of one pool.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub role: Arc<str>,
    /// Most workers = the most calls this role runs at once. At least 1. They start as
    /// calls queue, not all at once.
    pub workers: usize,
    /// A job that has crashed this many workers is failed with kind `worker_panic`.
    /// At least 1 (1 = never retried after a crash).
    pub job_crash_limit: u32,
}

/// Messages of the pool supervisor. Use [`RolePool::submit`] rather than sending `Submit`
/// directly: it keeps the counters right and fails the job if the pool is gone.
pub enum PoolMsg {
    Submit(Job),
    /// Sent by workers.
    WorkerDone(WorkerReport),
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
    /// Starts the supervisor and its workers. The pool is unlinked (it outlives any one
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
    idle: Vec<ActorRef<RunCall>>,
    /// Worker id → (worker, job it is running, the job's place in line).
    busy: HashMap<ActorId, (ActorRef<RunCall>, Held, Ticket)>,
    queue: JobQueue<Held>,
}

impl PoolState {
    async fn spawn_worker(&mut self, myself: &ActorRef<PoolMsg>) -> Result<(), ractor::SpawnErr> {
        let args = WorkerArgs {
            executor: self.executor.clone(),
            supervisor: myself.clone(),
        };
        let (worker, _join) =
            Actor::spawn_linked(None, PoolWorker, args, myself.get_cell()).await?;
        self.idle.push(worker);
        Ok(())
    }

    /// Starts workers for the queued jobs no idle worker can take, up to the pool's
    /// size. Workers start when calls need them, not all at once: a pool sized for
    /// 10,000 calls in flight holds only as many workers (each a task with its mailboxes)
    /// as its calls have ever run at once, and a role a method never calls holds one.
    async fn grow(&mut self, myself: &ActorRef<PoolMsg>) {
        while self.queue.len() > self.idle.len()
            && self.idle.len() + self.busy.len() < self.settings.workers
        {
            if let Err(err) = self.spawn_worker(myself).await {
                tracing::error!(role = %self.settings.role, error = %err,
                    "could not start another worker; queued calls wait for a running one");
                return;
            }
        }
    }

    /// Hands queued jobs to idle workers until one side runs out.
    fn dispatch(&mut self) {
        while !self.queue.is_empty() {
            let Some(worker) = self.idle.pop() else {
                return;
            };
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
            if worker.send_message(run).is_err() {
                // The worker died between reporting idle and now; its supervision event
                // will replace it. The job goes back to its place.
                held.job.mark_running(false);
                self.queue.requeue(ticket, held);
                continue;
            }
            self.busy.insert(worker.get_id(), (worker, held, ticket));
        }
    }

    /// A worker died (panic or unexpected stop): re-queue or fail its job, replace it.
    async fn on_worker_lost(&mut self, myself: &ActorRef<PoolMsg>, id: ActorId, why: String) {
        self.idle.retain(|w| w.get_id() != id);
        // Counted before any reply goes out, so whoever sees the reply sees the restart.
        self.counters.on_worker_restart();
        if let Some((_, mut held, ticket)) = self.busy.remove(&id) {
            held.crashes += 1;
            let key = held.job.key.clone();
            if held.crashes >= self.settings.job_crash_limit {
                tracing::error!(call = %key, crashes = held.crashes, error = %why,
                    "call crashed its worker too often; failing it");
                let msg = format!(
                    "call {key} crashed a `{}` worker {} times; last: {why}",
                    self.settings.role, held.crashes
                );
                held.job.fail(FailureKind::WorkerPanic, msg);
            } else {
                tracing::warn!(call = %key, crashes = held.crashes, error = %why,
                    "worker crashed; re-queueing its call");
                held.job.mark_running(false);
                self.queue.requeue(ticket, held);
            }
        }
        if let Err(err) = self.spawn_worker(myself).await {
            tracing::error!(role = %self.settings.role, error = %err,
                "could not replace a crashed worker; the pool runs with one fewer");
        }
        if self.idle.is_empty() && self.busy.is_empty() {
            self.fail_all(&format!(
                "role `{}`: every worker of the pool is gone and none could be restarted",
                self.settings.role
            ));
        }
    }

    fn fail_all(&mut self, why: &str) {
        for held in self.queue.drain() {
            held.job.fail(FailureKind::PoolStopped, why.to_owned());
        }
        for (_, (_, held, _)) in self.busy.drain() {
            held.job.fail(FailureKind::PoolStopped, why.to_owned());
        }
    }
}

impl Actor for PoolSupervisor {
    type Msg = PoolMsg;
    type State = PoolState;
    type Arguments = PoolArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PoolMsg>,
        args: PoolArgs,
    ) -> Result<PoolState, ActorProcessingErr> {
        let mut state = PoolState {
            idle: Vec::new(),
            busy: HashMap::new(),
            queue: JobQueue::default(),
            settings: args.settings,
            executor: args.executor,
            counters: args.counters,
        };
        // One worker now, so that a pool that cannot start any fails here; the rest
        // start as calls queue (`grow`).
        state.spawn_worker(&myself).await?;
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<PoolMsg>,
        msg: PoolMsg,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PoolMsg::Submit(job) => {
                if state.idle.is_empty() && state.busy.is_empty() {
                    let why = format!(
                        "role `{}`: the pool has no workers left",
                        state.settings.role
                    );
                    job.fail(FailureKind::PoolStopped, why);
                    return Ok(());
                }
                let priority = job.priority;
                state.queue.push(priority, Held { job, crashes: 0 });
                state.grow(&myself).await;
            }
            PoolMsg::WorkerDone(WorkerReport { worker, outcome }) => {
                if let Some((worker, mut held, _)) = state.busy.remove(&worker) {
                    held.job.complete(outcome);
                    state.idle.push(worker);
                }
            }
        }
        state.dispatch();
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<PoolMsg>,
        event: SupervisionEvent,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                state
                    .on_worker_lost(&myself, cell.get_id(), err.to_string())
                    .await;
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let why = reason.unwrap_or_else(|| "worker stopped".into());
                state.on_worker_lost(&myself, cell.get_id(), why).await;
            }
            _ => {}
        }
        state.dispatch();
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
