//! One pool worker: runs one call at a time and reports back to its supervisor.
//!
//! The worker holds nothing the supervisor does not also hold: it gets a copy of the
//! request, while the job itself (key, reply, retry count) stays with the supervisor. So
//! when a worker panics mid-call — ractor catches the panic and kills the actor, losing its
//! mailbox — nothing is lost: the supervisor still has the job and runs it again.

use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef};
use tracing::Instrument;

use super::PoolMsg;
use crate::strategy::{CallExecutor, CallKey, CallOutcome};
use tmas_client::wire::ModelRequest;

pub(crate) struct PoolWorker;

pub(crate) struct WorkerArgs {
    pub executor: Arc<dyn CallExecutor>,
    pub supervisor: ActorRef<PoolMsg>,
}

pub(crate) struct WorkerState {
    executor: Arc<dyn CallExecutor>,
    supervisor: ActorRef<PoolMsg>,
}

/// Work for a worker. The supervisor sends one at a time and only to an idle worker.
pub(crate) struct RunCall {
    pub key: CallKey,
    pub group: Arc<str>,
    pub request: ModelRequest,
    pub span: tracing::Span,
}

/// What a worker tells its supervisor when a call is over.
pub struct WorkerReport {
    pub(crate) worker: ActorId,
    pub(crate) outcome: CallOutcome,
}

impl Actor for PoolWorker {
    type Msg = RunCall;
    type State = WorkerState;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: WorkerArgs,
    ) -> Result<WorkerState, ActorProcessingErr> {
        Ok(WorkerState {
            executor: args.executor,
            supervisor: args.supervisor,
        })
    }

    /// Awaits the call inside the handler: this worker takes nothing else meanwhile, which
    /// is what makes the pool's worker count its concurrency limit.
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: RunCall,
        state: &mut WorkerState,
    ) -> Result<(), ActorProcessingErr> {
        let RunCall {
            key,
            group,
            request,
            span,
        } = msg;
        // Created inside the call's span: an executor that spawns a task (the model
        // client does) takes the span along, so the request's spans nest under the call.
        let call = span.in_scope(|| match request {
            ModelRequest::Chat(r) => state.executor.execute_call(&key, group, r),
            ModelRequest::Embeddings(r) => state.executor.execute_embeddings(&key, group, r),
        });
        let outcome = call.instrument(span).await;
        let report = WorkerReport {
            worker: myself.get_id(),
            outcome,
        };
        // The supervisor is gone only while the pool shuts down; the job has been failed
        // by its `post_stop` then, so dropping the report loses nothing.
        let _ = state.supervisor.send_message(PoolMsg::WorkerDone(report));
        Ok(())
    }
}
