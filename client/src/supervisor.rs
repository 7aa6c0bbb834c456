//! The client's root actor: spawns one [`EndpointActor`] per endpoint and restarts any
//! that fails, so probing of a down endpoint never silently stops.
//!
//! ractor's default supervision stops the parent when a child exits; this one overrides
//! `handle_supervisor_evt` to restart the child instead. A restarted actor re-reads the
//! endpoint's shared state (which lives outside the actor), so nothing is lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};

use super::endpoint::Endpoint;
use super::health::{EndpointActor, EndpointArgs};

/// Messages of [`ClientSupervisor`].
#[derive(Debug)]
pub enum SupervisorMsg {
    /// How many endpoint actors are alive, and how many restarts happened.
    Status(RpcReplyPort<SupervisorStatus>),
}

/// Answer to [`SupervisorMsg::Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupervisorStatus {
    pub live_endpoint_actors: usize,
    pub restarts: u64,
}

pub struct SupervisorArgs {
    pub(crate) endpoints: Vec<Arc<Endpoint>>,
    pub(crate) probe_interval: Duration,
    pub(crate) probe_successes: u32,
}

pub struct SupervisorState {
    args: SupervisorArgs,
    /// Live child -> index into `args.endpoints`.
    children: HashMap<ActorId, usize>,
    restarts: u64,
}

/// Root actor of a [`super::ModelClient`].
pub struct ClientSupervisor;

async fn spawn_child(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    index: usize,
) -> Result<(), ActorProcessingErr> {
    let endpoint = state.args.endpoints[index].clone();
    let args = EndpointArgs {
        endpoint,
        probe_interval: state.args.probe_interval,
        probe_successes: state.args.probe_successes,
    };
    let (child, _join) = Actor::spawn_linked(None, EndpointActor, args, myself.get_cell()).await?;
    state.children.insert(child.get_id(), index);
    Ok(())
}

impl ClientSupervisor {
    async fn restart(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        who: &ActorCell,
        why: &str,
    ) -> Result<(), ActorProcessingErr> {
        let Some(index) = state.children.remove(&who.get_id()) else {
            return Ok(());
        };
        let name = state.args.endpoints[index].name().clone();
        tracing::error!(endpoint = %name, reason = why, "endpoint actor stopped; restarting it");
        state.restarts += 1;
        spawn_child(myself, state, index).await
    }
}

impl Actor for ClientSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let mut state = SupervisorState {
            args,
            children: HashMap::new(),
            restarts: 0,
        };
        for index in 0..state.args.endpoints.len() {
            spawn_child(&myself, &mut state, index).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Status(reply) => {
                let _ = reply.send(SupervisorStatus {
                    live_endpoint_actors: state.children.len(),
                    restarts: state.restarts,
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(who, err) => {
                self.restart(&myself, state, &who, &err.to_string()).await?;
            }
            SupervisionEvent::ActorTerminated(who, _, reason) => {
                let why = reason.unwrap_or_else(|| "terminated".to_string());
                self.restart(&myself, state, &who, &why).await?;
            }
            _ => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Children must not be restarted by events that arrive while we stop.
        state.children.clear();
        myself.stop_children(Some("client shut down".to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EndpointSpec, ResiliencePolicy, TokenEstimate};
    use crate::endpoint::Health;
    use crate::tokens::TokenCounter;

    fn endpoint() -> Arc<Endpoint> {
        let spec = EndpointSpec {
            name: "e".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            api_key: None,
            max_in_flight: 1,
            requests_per_minute: None,
            tokens_per_minute: None,
            request_timeout: Duration::from_secs(1),
            max_connecting: crate::config::DEFAULT_MAX_CONNECTING,
            stream_idle_timeout: Duration::from_secs(1),
            context_window: 4096,
            token_estimate: TokenEstimate::Bytes {
                bytes_per_token: 3.0,
            },
        };
        let counter = TokenCounter::from_estimate(&spec.token_estimate).unwrap();
        Arc::new(
            Endpoint::new(
                spec,
                counter,
                &ResiliencePolicy::default(),
                Arc::new(Health::new()),
            )
            .unwrap(),
        )
    }

    async fn status(sup: &ActorRef<SupervisorMsg>) -> SupervisorStatus {
        ractor::call!(sup, SupervisorMsg::Status).unwrap()
    }

    #[tokio::test]
    async fn a_killed_endpoint_actor_is_restarted_and_takes_over_the_endpoint() {
        let ep = endpoint();
        let args = SupervisorArgs {
            endpoints: vec![ep.clone()],
            probe_interval: Duration::from_secs(60),
            probe_successes: 1,
        };
        let (sup, join) = Actor::spawn(None, ClientSupervisor, args).await.unwrap();
        assert_eq!(
            status(&sup).await,
            SupervisorStatus {
                live_endpoint_actors: 1,
                restarts: 0
            }
        );
        let first = ep.actor.lock().unwrap().clone().unwrap();
        first.get_cell().kill();

        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while status(&sup).await.restarts == 0 {
            assert!(std::time::Instant::now() < deadline, "no restart");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status(&sup).await.live_endpoint_actors, 1);
        let second = ep.actor.lock().unwrap().clone().unwrap();
        assert_ne!(
            first.get_id(),
            second.get_id(),
            "the endpoint points at the new actor"
        );
        sup.stop(None);
        join.await.unwrap();
    }
}
