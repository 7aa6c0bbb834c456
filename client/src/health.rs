//! The endpoint actor: owns an endpoint's circuit-breaker recovery.
//!
//! Calls open the breaker themselves (an atomic flip in [`Endpoint::record_failure`],
//! no round-trip) and tell this actor with [`EndpointMsg::MarkDown`]. From then on the
//! actor probes the endpoint every `probe_interval` (each probe runs in its own task, so
//! the actor stays responsive) and re-admits it after `probe_successes` successes in a
//! row. Calls waiting on the group are woken through the shared health epoch.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::endpoint::Endpoint;
pub use super::endpoint::EndpointMsg;
use super::telemetry;

/// Startup arguments: the shared endpoint and probing settings.
pub struct EndpointArgs {
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) probe_interval: Duration,
    pub(crate) probe_successes: u32,
}

pub struct EndpointState {
    endpoint: Arc<Endpoint>,
    probe_interval: Duration,
    probe_successes: u32,
    /// A probe or a probe timer is outstanding.
    probing: bool,
    successes: u32,
}

/// One actor per endpoint (see the module docs).
pub struct EndpointActor;

impl EndpointState {
    fn schedule(&mut self, myself: &ActorRef<EndpointMsg>) {
        self.probing = true;
        myself.send_after(self.probe_interval, || EndpointMsg::Probe);
    }
}

impl Actor for EndpointActor {
    type Msg = EndpointMsg;
    type State = EndpointState;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<EndpointMsg>,
        args: EndpointArgs,
    ) -> Result<EndpointState, ActorProcessingErr> {
        if let Ok(mut slot) = args.endpoint.actor.lock() {
            *slot = Some(myself.clone());
        }
        let mut state = EndpointState {
            endpoint: args.endpoint,
            probe_interval: args.probe_interval,
            probe_successes: args.probe_successes.max(1),
            probing: false,
            successes: 0,
        };
        // A restarted actor picks up an endpoint that went down while it was gone.
        if !state.endpoint.is_healthy() {
            state.schedule(&myself);
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<EndpointMsg>,
        msg: EndpointMsg,
        state: &mut EndpointState,
    ) -> Result<(), ActorProcessingErr> {
        let name = state.endpoint.name().clone();
        match msg {
            EndpointMsg::MarkDown { reason } => {
                tracing::warn!(
                    endpoint = %name,
                    %reason,
                    probe_every = ?state.probe_interval,
                    "endpoint marked down; its queued calls move to healthy endpoints; probing it"
                );
                if !state.probing {
                    state.successes = 0;
                    state.schedule(&myself);
                }
            }
            EndpointMsg::Probe => {
                if state.endpoint.is_healthy() {
                    state.probing = false;
                    return Ok(());
                }
                let endpoint = state.endpoint.clone();
                let me = myself.clone();
                tokio::spawn(async move {
                    let result = endpoint.probe().await;
                    // The actor may have stopped meanwhile (shutdown): nothing to do then.
                    let _ = me.cast(EndpointMsg::ProbeDone(result));
                });
            }
            EndpointMsg::ProbeDone(Ok(())) => {
                state.successes += 1;
                if state.successes >= state.probe_successes {
                    state.probing = false;
                    state.successes = 0;
                    if let Some(change) = state.endpoint.mark_up() {
                        telemetry::record_limit(&state.endpoint, change);
                    }
                    tracing::info!(endpoint = %name, "endpoint re-admitted after successful health probes");
                } else {
                    state.schedule(&myself);
                }
            }
            EndpointMsg::ProbeDone(Err(problem)) => {
                state.successes = 0;
                tracing::debug!(endpoint = %name, %problem, "health probe failed");
                state.schedule(&myself);
            }
        }
        Ok(())
    }
}
