//! A judge outside a run: `tmas judge --llm`, `tmas rl-score` and `tmas rl-serve` load a
//! config file, start its endpoints (and the embedded simulator when it names one) and ask
//! its LLM judge, as `tmas run` would.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tmas_actors::strategy::CallExecutor;

use crate::config::Config;
use crate::config::layers::CliOverride;
use crate::config::loader::load_with;
use crate::config::resolve::process_env;
use crate::engine::endpoints::Endpoints;
use crate::engine::judging::LlmJudge;
use crate::method::PromptSet;

/// A config's endpoints, prompt templates and LLM judge, until [`JudgeSession::shutdown`].
pub struct JudgeSession {
    /// The config as loaded (`--set` applied, endpoints resolved), for the other roles a
    /// caller asks through [`JudgeSession::executor`].
    pub config: Config,
    pub prompts: Arc<PromptSet>,
    /// The judge of `config` ([`LlmJudge::of_config`], with its `judge.policy` and
    /// `judge.input`).
    pub llm: LlmJudge,
    endpoints: Endpoints,
}

impl JudgeSession {
    /// Loads `config_path` with the `set` overrides (`KEY=VALUE`), loads its prompt
    /// templates and starts its endpoints.
    pub async fn start(config_path: &Path, set: &[String]) -> anyhow::Result<Self> {
        let env = process_env();
        let overrides: Vec<CliOverride> = set.iter().map(CliOverride::set).collect();
        let mut config = load_with(config_path, &env, &overrides).map_err(anyhow::Error::new)?;
        let prompts = Arc::new(
            PromptSet::load(&config.prompt_overrides()).context("loading prompt templates")?,
        );
        let endpoints = Endpoints::start(&mut config, &env, None).await?;
        let executor: Arc<dyn CallExecutor> = Arc::new(endpoints.client.clone());
        let (policy, input) = (config.judge.policy, config.judge.input);
        let llm = LlmJudge::of_config(&config, executor, prompts.clone(), policy, input);
        Ok(Self {
            config,
            prompts,
            llm,
            endpoints,
        })
    }

    /// The model client of the session's endpoints.
    pub fn executor(&self) -> Arc<dyn CallExecutor> {
        self.llm.executor.clone()
    }

    /// Stops the model client and the embedded simulator.
    pub async fn shutdown(self) {
        self.endpoints.shutdown().await;
    }
}
