//! One call's worker: a task that runs the call and reports back to its supervisor.
//!
//! The worker holds nothing the supervisor does not also hold: it gets a copy of the
//! request, while the job itself (key, reply, crash count) stays with the supervisor. So
//! when the call panics, nothing is lost: the panic is caught at the task's edge, reported
//! as [`PoolMsg::WorkerLost`], and the supervisor still has the job and runs it again.
//!
//! A worker is a task, not an actor: it lives for one call, so it needs no mailbox, and at
//! 10,000 calls in flight an actor per call (a cell and its four channels, ~10–15 KB) was
//! a seventh of the process's heap.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::ActorRef;
use tokio::task::AbortHandle;
use tracing::Instrument;

use super::PoolMsg;
use crate::strategy::{CallExecutor, CallKey, CallOutcome};
use crate::wire::ModelRequest;

/// Which running call a report is about (the supervisor's own numbering).
pub type WorkerId = u64;

/// Work for a worker.
pub(crate) struct RunCall {
    pub key: CallKey,
    pub group: Arc<str>,
    pub request: ModelRequest,
    pub span: tracing::Span,
}

/// What a worker tells its supervisor when a call is over.
pub struct WorkerReport {
    pub(crate) worker: WorkerId,
    pub(crate) outcome: CallOutcome,
}

/// Starts the worker `id` on `call`; it reports to `supervisor` once, with the call's
/// outcome or, if the call panicked, the panic's message.
pub(crate) fn spawn(
    id: WorkerId,
    call: RunCall,
    executor: Arc<dyn CallExecutor>,
    supervisor: ActorRef<PoolMsg>,
) -> AbortHandle {
    let RunCall {
        key,
        group,
        request,
        span,
    } = call;
    let run = async move {
        // Created inside the call's span: an executor that spawns a task (the model
        // client does) takes the span along, so the request's spans nest under the call.
        let call = span.in_scope(|| match request {
            ModelRequest::Chat(r) => executor.execute_call(&key, group, r),
            ModelRequest::Embeddings(r) => executor.execute_embeddings(&key, group, r),
        });
        call.instrument(span).await
    };
    tokio::spawn(async move {
        // Also catches a panic of the executor before its future starts.
        let message = match AssertUnwindSafe(run).catch_unwind().await {
            Ok(outcome) => PoolMsg::WorkerDone(WorkerReport {
                worker: id,
                outcome,
            }),
            Err(panic) => PoolMsg::WorkerLost {
                worker: id,
                why: panic_text(panic.as_ref()),
            },
        };
        // The supervisor is gone only while the pool shuts down; the job has been failed
        // by its `post_stop` then, so dropping the report loses nothing.
        let _ = supervisor.send_message(message);
    })
    .abort_handle()
}

/// A panic's payload as text (`panic!` gives a `&str` or a `String`).
fn panic_text(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    format!("panicked: {text}")
}
