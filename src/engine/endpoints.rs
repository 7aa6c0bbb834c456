//! The endpoints a run talks to: the model client, and the in-process simulator when the
//! config names `embedded-sim`. Shared by `tmas run` and `tmas judge --llm`; the runs of
//! one process (the variants of `tmas experiment`) share them through
//! [`SharedEndpoints`].

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::Context;
use tmas_client::ModelClient;

use crate::config::{Config, EndpointConfig, ResilienceConfig};
use crate::sim::{SimOptions, SimServer};

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
            Err(errors) => Err(errors.into()),
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

/// The settings that make two runs' model clients the same client: endpoints (before
/// `embedded-sim` is resolved), groups, resilience policy and simulator options.
#[derive(Debug, Clone, PartialEq)]
struct EndpointSettings {
    endpoints: BTreeMap<String, EndpointConfig>,
    groups: BTreeMap<String, Vec<String>>,
    resilience: ResilienceConfig,
    simulator: SimOptions,
}

impl EndpointSettings {
    fn of(config: &Config) -> Self {
        Self {
            endpoints: config.endpoints.clone(),
            groups: config.groups.clone(),
            resilience: config.resilience.clone(),
            simulator: config.simulator.clone(),
        }
    }
}

/// Model clients shared by the runs of one process (`tmas experiment`): runs whose
/// endpoint settings are equal get one client, so each endpoint has one in-flight cap,
/// one adaptive limit, one rate limiter and one circuit breaker whatever the number of
/// runs sending to it; with `embedded-sim` they share one simulator, which knows every
/// run's answers ([`SharedEndpoints::add_answers`] before the first run starts).
#[derive(Default)]
pub struct SharedEndpoints {
    answers: std::sync::Mutex<Vec<(String, String)>>,
    started: tokio::sync::Mutex<Vec<(EndpointSettings, Endpoints)>>,
}

impl std::fmt::Debug for SharedEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedEndpoints").finish_non_exhaustive()
    }
}

impl SharedEndpoints {
    /// Problems' reference answers for a shared embedded simulator (the first answer
    /// given for an id wins).
    pub fn add_answers(&self, answers: impl IntoIterator<Item = (String, String)>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(answers);
    }

    /// The client for `config`'s endpoints: started on first use, then the same one for
    /// every run with equal settings. Points `config`'s `embedded-sim` endpoints at the
    /// shared simulator, as [`Endpoints::start`] does.
    pub async fn client_for(
        &self,
        config: &mut Config,
        env: &[(String, String)],
    ) -> anyhow::Result<ModelClient> {
        let key = EndpointSettings::of(config);
        let mut started = self.started.lock().await;
        if let Some((_, endpoints)) = started.iter().find(|(k, _)| *k == key) {
            if let Some(sim) = &endpoints.sim {
                config.with_embedded_base_url(&sim.base_url());
            }
            return Ok(endpoints.client.clone());
        }
        let mut answers = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut seen = std::collections::HashSet::new();
        answers.retain(|(id, _)| seen.insert(id.clone()));
        let endpoints = Endpoints::start(config, env, Some(answers)).await?;
        let client = endpoints.client.clone();
        started.push((key, endpoints));
        Ok(client)
    }

    /// Stops every shared client and simulator (after the last run ended).
    pub async fn shutdown(&self) {
        let started = std::mem::take(&mut *self.started.lock().await);
        for (_, endpoints) in started {
            endpoints.shutdown().await;
        }
    }
}
