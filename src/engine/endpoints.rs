//! The endpoints a run talks to: the model client, and the in-process simulator when the
//! config names `embedded-sim`. Shared by `tmas run` and `tmas judge --llm`.

use std::net::SocketAddr;

use anyhow::Context;
use tmas_actors::client::ModelClient;

use crate::config::Config;
use crate::sim::SimServer;

/// A started model client and, if the config asked for it, the embedded simulator.
pub struct Endpoints {
    pub client: ModelClient,
    pub sim: Option<SimServer>,
}

impl Endpoints {
    /// Starts the embedded simulator when an endpoint is `embedded-sim` (pointing those
    /// endpoints of `config` at it; `answers` are the problems' reference answers, so its
    /// task model agrees with the judge), then the model client with keys from `env`.
    pub async fn start(
        config: &mut Config,
        env: &[(String, String)],
        answers: Option<Vec<(String, String)>>,
    ) -> anyhow::Result<Self> {
        let sim = if config.uses_embedded_sim() {
            let addr = SocketAddr::from(([127, 0, 0, 1], 0));
            let sim = SimServer::start(config.simulator.clone(), addr, answers)
                .await
                .context("starting the embedded simulator")?;
            config.with_embedded_base_url(&sim.base_url());
            tracing::info!(url = %sim.base_url(), "embedded simulator started");
            Some(sim)
        } else {
            None
        };
        let client = match config.client_config(env) {
            Ok(client_config) => ModelClient::start(client_config)
                .await
                .context("starting the model client"),
            Err(errors) => Err(anyhow::anyhow!("{errors}")),
        };
        match client {
            Ok(client) => Ok(Self { client, sim }),
            Err(e) => {
                if let Some(sim) = sim {
                    sim.shutdown().await;
                }
                Err(e)
            }
        }
    }

    /// Stops the client, then the simulator.
    pub async fn shutdown(self) {
        self.client.shutdown().await;
        if let Some(sim) = self.sim {
            sim.shutdown().await;
        }
    }
}
