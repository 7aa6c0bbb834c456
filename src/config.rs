//! Configuration: the TOML schema, its defaults (in one place: the `Default` impls of the
//! section types), layering and validation.
//!
//! Precedence, lowest first: built-in defaults < config file < `TMAS_*` environment
//! variables (`TMAS_METHOD__EPSILON=0.3`; `__` separates keys) < command-line overrides
//! (`--set method.n=4` and convenience flags, in the order given). The layers are merged
//! as TOML values and deserialized once, so every error names the exact key path and the
//! layer that set it. `docs/configuration.md` describes every key.
//!
//! - [`schema`]: `[run]`, `[method]`, `[judge]`, `[resilience]`.
//! - [`endpoints`]: `[endpoints.NAME]`, `[groups]`, `[roles.ROLE]`.
//! - [`layers`]: environment and command-line overrides, value-level merging.
//! - [`loader`]: [`load`] and friends; [`validate`]: the rules.
//! - [`resolve`]: runtime settings for the model client, warnings.
//! - [`templates`]: the prompt template kinds and their names (keys of `[prompts]`).
//! - The method's parameters are built from a config in `crate::method::from_config`.
//! - [`args`]: the clap flags a command flattens to accept `--config`/`--set`/shortcuts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::role::Role;
use crate::sim::SimOptions;

pub(crate) mod args;
pub(crate) mod endpoints;
pub(crate) mod error;
pub(crate) mod layers;
pub(crate) mod loader;
pub(crate) mod relative;
pub(crate) mod resolve;
pub(crate) mod schema;
pub(crate) mod shard;
pub(crate) mod templates;
pub(crate) mod validate;

pub use args::{ConfigArgs, ShardArgs, shard_override};
pub use endpoints::{DEFAULT_GROUP, EMBEDDED_SIM, EndpointConfig, RoleConfig, Roles};
pub use error::{BadInput, ConfigErrors, ConfigIssue, KeyIssue, KeyPath};
pub use layers::{CliOverride, ENV_PREFIX};
pub use loader::{load, load_str, load_str_in, load_with};
pub use schema::{
    AdmissionKind, BankDedup, CallPriority, FailedCandidates, JudgeConfig, JudgeInput,
    LlmJudgePolicy, MethodConfig, MethodName, ResilienceConfig, RunConfig, SelfRefineHistory,
    ServeConfig,
};
pub use shard::{Shard, ShardSource, shard_from_env};
pub use templates::TemplateKind;

/// A whole configuration. Build it with [`load`] (file + environment + overrides) or
/// [`Config::from_toml_str`]; deserializing it directly skips the defaults layer, so
/// partial tables would fail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub run: RunConfig,
    pub method: MethodConfig,
    pub judge: JudgeConfig,
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Group name → endpoint names. [`load`] adds the implicit `default` group.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Vec<String>>,
    /// Group name → how the group picks an endpoint per call (`least-load`, the default,
    /// or `prefix-affinity`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub routing: BTreeMap<String, tmas_client::Routing>,
    pub roles: Roles,
    /// Template name (`solution_refine`, `rollout`, … see `config/prompts/`) → file
    /// replacing the built-in template. `roles.ROLE.prompt` is a shorthand for the
    /// template named after the role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, std::path::PathBuf>,
    pub resilience: ResilienceConfig,
    /// Options of the in-process simulator (used by `embedded-sim` endpoints).
    #[serde(default)]
    pub simulator: SimOptions,
    /// Span export, metrics endpoint, `--trace-content` (see README "See a run in Jaeger";
    /// the standard `OTEL_*` variables override the OTLP keys).
    #[serde(default)]
    pub observability: tmas_observability::ObservabilityConfig,
    /// What `tmas serve` allows a caller (API keys, limits per request).
    #[serde(default)]
    pub serve: ServeConfig,
}

impl Config {
    /// Parses and validates TOML text with no environment or command-line layer.
    pub fn from_toml_str(text: &str, label: &str) -> Result<Self, ConfigErrors> {
        load_str(text, label, &[], &[])
    }

    /// Runs every validation rule (including the file-existence checks) on a config
    /// built or modified in code.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        let issues: Vec<ConfigIssue> = validate::validate_values(self)
            .into_iter()
            .chain(validate::check_paths(self))
            .map(|ki| ConfigIssue::new("", ki.path.to_string(), ki.message))
            .collect();
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(issues))
        }
    }

    /// Writes derived defaults (those computed from other keys) into the config, so the
    /// printed config shows the values actually used.
    pub fn fill_derived(&mut self) {
        let active = self.run.effective_max_active_problems();
        self.run.max_active_problems = Some(active);
        let attempts = self.method.effective_max_verification_attempts();
        self.method.max_verification_attempts = Some(attempts);
        self.groups = self.effective_groups();
        // Each key turns to embeddings only for the method that reads it, so the other
        // method's key never warns as set without effect.
        let server = self.embedding_server_configured();
        let name = self.method.name;
        self.method.rse_dedup = (self.method.rse_dedup).resolved(server && name == MethodName::Rse);
        self.method.bank_dedup =
            (self.method.bank_dedup).resolved(server && name == MethodName::Tmas);
    }

    /// Whether the `embedding` role is routed to a group of its own: not the solution
    /// role's, whose chat servers would refuse embeddings requests, and not the implicit
    /// `default` group, which holds every endpoint (a config that moves its chat roles to
    /// named groups and says nothing of embeddings leaves the role there). What
    /// `rse_dedup = "auto"` and `bank_dedup = "auto"` take as "an embeddings server is
    /// configured".
    pub fn embedding_server_configured(&self) -> bool {
        let group = &self.roles[Role::Embedding].group;
        *group != self.roles[Role::Solution].group && group != DEFAULT_GROUP
    }

    /// The resolved config as TOML (only names of key variables, never keys).
    pub fn to_toml_string(&self) -> Result<String, toml::ser::Error> {
        toml::to_string_pretty(self)
    }

    /// The settings of one role.
    pub fn role(&self, role: Role) -> &RoleConfig {
        &self.roles[role]
    }
}

#[cfg(test)]
mod tests;
