//! From a validated [`Config`] to the runtime settings of the model client, plus the
//! warnings `tmas config check` prints (things that are fine in a file but would fail or
//! surprise at run time).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tmas_client::{ApiKey, ClientConfig, EndpointSpec, TokenEstimate};

use super::endpoints::{DEFAULT_GROUP, EndpointConfig};
use super::error::{ConfigErrors, ConfigIssue, KeyPath};
use super::{Config, MethodName};
use crate::role::Role;

/// The process environment as UTF-8 pairs (non-UTF-8 variables cannot be config values
/// and are skipped).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl Config {
    /// Declared groups plus the implicit `default` group (every endpoint, sorted by name)
    /// when it is not declared.
    pub fn effective_groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups = self.groups.clone();
        if !groups.contains_key(DEFAULT_GROUP) && !self.endpoints.is_empty() {
            groups.insert(
                DEFAULT_GROUP.to_string(),
                self.endpoints.keys().cloned().collect(),
            );
        }
        groups
    }

    /// Names of the endpoints serving `role` (empty only in an invalid config).
    pub fn role_endpoints(&self, role: Role) -> Vec<String> {
        self.effective_groups()
            .remove(&self.roles[role].group)
            .unwrap_or_default()
    }

    /// The client group that carries `role`'s calls (see [`Config::client_config`]):
    /// pass it to `ModelClient::chat`.
    pub fn client_group(role: Role) -> &'static str {
        role.as_str()
    }

    /// True if some endpoint asks for the in-process simulator.
    pub fn uses_embedded_sim(&self) -> bool {
        self.endpoints.values().any(EndpointConfig::is_embedded_sim)
    }

    /// Points every `embedded-sim` endpoint at `url` (the in-process simulator's base URL,
    /// e.g. `http://127.0.0.1:PORT/v1`). Returns how many endpoints were changed.
    pub fn with_embedded_base_url(&mut self, url: &str) -> usize {
        let mut n = 0;
        for e in self.endpoints.values_mut().filter(|e| e.is_embedded_sim()) {
            e.base_url = url.to_string();
            n += 1;
        }
        n
    }

    /// The model client's settings. Keys are read from `env` by the names in
    /// `api_key_env`; a missing or empty variable is an error naming the endpoint and the
    /// variable (never a key).
    ///
    /// The groups are named after the roles (`solution`, …, `judge`: the value of
    /// `CallTags::role`), each holding the endpoints of the group that role is configured
    /// to use, so the client routes a call by its role alone.
    pub fn client_config(&self, env: &[(String, String)]) -> Result<ClientConfig, ConfigErrors> {
        let mut issues = Vec::new();
        let mut endpoints = Vec::with_capacity(self.endpoints.len());
        for (name, e) in &self.endpoints {
            let api_key = match &e.api_key_env {
                None => None,
                Some(var) => match lookup(env, var) {
                    Some(v) if !v.is_empty() => Some(ApiKey::new(v)),
                    _ => {
                        issues.push(missing_key_issue(name, var));
                        None
                    }
                },
            };
            endpoints.push(endpoint_spec(name, e, api_key));
        }
        if !issues.is_empty() {
            return Err(ConfigErrors(issues));
        }
        let groups = Role::ALL
            .iter()
            .map(|&role| {
                let members = self
                    .role_endpoints(role)
                    .into_iter()
                    .map(Arc::from)
                    .collect();
                (Arc::from(role.as_str()), members)
            })
            .collect();
        let routing = Role::ALL
            .iter()
            .filter_map(|&role| {
                let routing = self.routing.get(&self.roles[role].group)?;
                Some((Arc::from(role.as_str()), *routing))
            })
            .collect();
        Ok(ClientConfig {
            endpoints,
            groups,
            routing,
            global_max_in_flight: self.run.max_in_flight,
            global_requests_per_minute: self.run.requests_per_minute,
            global_tokens_per_minute: self.run.tokens_per_minute,
            policy: self.resilience.to_policy(),
        })
    }

    /// Non-fatal findings: unset key variables (fatal only when a run starts), a missing
    /// dataset, role caps the context window will lower, settings that have no effect.
    pub fn warnings(&self, env: &[(String, String)]) -> Vec<ConfigIssue> {
        let mut out = Vec::new();
        for (name, e) in &self.endpoints {
            if let Some(var) = &e.api_key_env
                && lookup(env, var).is_none_or(str::is_empty)
            {
                out.push(missing_key_issue(name, var));
            }
        }
        if let Some(ds) = &self.run.dataset
            && !ds.is_file()
        {
            out.push(ConfigIssue::new(
                "",
                "run.dataset",
                format!("dataset file {} not found (yet)", ds.display()),
            ));
        }
        let margin = self.resilience.context_margin;
        for role in Role::ALL {
            let cap = self.roles[role].max_tokens;
            for ep in self.role_endpoints(role) {
                let Some(e) = self.endpoints.get(&ep) else {
                    continue;
                };
                let room = e.context_window.saturating_sub(margin);
                if cap > room {
                    out.push(ConfigIssue::new(
                        "",
                        format!("roles.{role}.max_tokens"),
                        format!(
                            "{cap} exceeds endpoint `{ep}`'s context window minus margin \
                             ({room}); requests will ask for at most {room} minus the prompt"
                        ),
                    ));
                }
            }
        }
        for (name, e) in &self.endpoints {
            if e.is_embedded_sim() && e.model != self.simulator.model {
                out.push(ConfigIssue::new(
                    "",
                    format!("endpoints.{name}.model"),
                    format!(
                        "`{}` differs from simulator.model `{}` (the simulator serves the latter)",
                        e.model, self.simulator.model
                    ),
                ));
            }
        }
        if let Some(issue) = self.self_judging_issue() {
            out.push(issue);
        }
        out.extend(self.dedup_issues());
        if self.method.m == 0 && self.method.use_experience {
            out.push(ConfigIssue::new(
                "",
                "method.use_experience",
                "has no effect with method.m = 0 (experience evolution needs verification)",
            ));
        }
        out
    }
}

impl Config {
    /// A warning when `rse_dedup` or `bank_dedup` asks for embeddings in a method that
    /// ignores it, or when the method's banks de-duplicate lexically where they could read
    /// meaning (see [`Config::lexical_dedup_notice`]). (Whether an endpoint would get both
    /// chat and embeddings calls depends on the roles the method calls:
    /// `Config::endpoint_sharing_issues`, in the method layer.)
    fn dedup_issues(&self) -> Vec<ConfigIssue> {
        let m = &self.method;
        let mut out = Vec::new();
        if let Some(notice) = self.lexical_dedup_notice() {
            out.push(ConfigIssue::new("", self.dedup_key(), notice));
        }
        for (key, method, dedup) in [
            ("method.rse_dedup", MethodName::Rse, m.rse_dedup),
            ("method.bank_dedup", MethodName::Tmas, m.bank_dedup),
        ] {
            if dedup.uses_embeddings() && m.name != method {
                out.push(ConfigIssue::new(
                    "",
                    key,
                    format!(
                        "has no effect with method.name = \"{}\" (only {} reads it)",
                        m.name.as_str(),
                        method.as_str()
                    ),
                ));
            }
        }
        out
    }

    /// The key that sets how the configured method de-duplicates its banks.
    fn dedup_key(&self) -> &'static str {
        if self.method.name == MethodName::Rse {
            "method.rse_dedup"
        } else {
            "method.bank_dedup"
        }
    }

    /// What a run prints at start when the method's banks de-duplicate lexically: for
    /// RSE always (the released RSE uses sentence embeddings, so its results are not the
    /// original's), for TMAS when no embeddings server is configured (items that say one
    /// thing in other words then stay apart; with a server, `bank_dedup = "jaccard"` is a
    /// choice: the released TMAS's rule).
    pub fn lexical_dedup_notice(&self) -> Option<String> {
        self.lexical_dedup(false)
    }

    /// [`Config::lexical_dedup_notice`] as `--quiet` prints it: RSE's only. TMAS's banks
    /// are lexical by default, as released, so a quiet run is not told on every start.
    pub fn lexical_dedup_notice_quiet(&self) -> Option<String> {
        self.lexical_dedup(true)
    }

    fn lexical_dedup(&self, quiet: bool) -> Option<String> {
        let m = &self.method;
        if m.dedup()?.uses_embeddings() {
            return None;
        }
        let server = self.embedding_server_configured();
        let why = if server {
            format!("{} = \"jaccard\"", self.dedup_key())
        } else {
            "no embeddings server is configured ([roles.embedding] has no group of its own)"
                .to_string()
        };
        match m.name {
            MethodName::Rse => Some(format!(
                "RSE de-duplicates its bank lexically (token similarity ≥ method.dedup_threshold = {}), \
                 not by sentence embeddings as the released RSE does: {why}; see \
                 docs/configuration.md, \"An embeddings endpoint for RSE\"",
                m.dedup_threshold
            )),
            _ if server || quiet => None,
            _ => Some(format!(
                "TMAS de-duplicates its banks lexically (token similarity ≥ method.dedup_threshold = {}), \
                 so items that say one thing in other words stay apart: {why}; see \
                 docs/configuration.md, \"An embeddings endpoint for the banks\"",
                m.dedup_threshold
            )),
        }
    }

    /// A warning when the LLM judge would be served by the same endpoint and model as the
    /// solution role: the model under test would grade itself (the paper judged with a
    /// different model, DeepSeek-V3.2).
    fn self_judging_issue(&self) -> Option<ConfigIssue> {
        if !self.judge.enabled {
            return None;
        }
        let target = |name: &String| {
            self.endpoints
                .get(name)
                .map(|e| (e.base_url.clone(), e.model.clone()))
        };
        let solution: Vec<(String, String)> = self
            .role_endpoints(Role::Solution)
            .iter()
            .filter_map(target)
            .collect();
        let shared: Vec<String> = self
            .role_endpoints(Role::Judge)
            .iter()
            .filter(|name| target(name).is_some_and(|t| solution.contains(&t)))
            .cloned()
            .collect();
        if shared.is_empty() {
            return None;
        }
        Some(ConfigIssue::new(
            "",
            "roles.judge.group",
            format!(
                "the judge uses the same endpoint and model as the solution role ({}): the \
                 model under test grades its own answers; point roles.judge.group at a group \
                 serving another model (the paper judged with DeepSeek-V3.2)",
                shared.join(", ")
            ),
        ))
    }
}

fn missing_key_issue(endpoint: &str, var: &str) -> ConfigIssue {
    let path = KeyPath::keys(["endpoints", endpoint, "api_key_env"]);
    ConfigIssue::new(
        "",
        path.to_string(),
        format!("environment variable {var} (API key of endpoint `{endpoint}`) is not set"),
    )
}

fn endpoint_spec(name: &str, e: &EndpointConfig, api_key: Option<ApiKey>) -> EndpointSpec {
    let token_estimate = match &e.tokenizer {
        Some(path) => TokenEstimate::Tokenizer { path: path.clone() },
        None => TokenEstimate::Bytes {
            bytes_per_token: e.bytes_per_token as f32,
        },
    };
    EndpointSpec {
        name: Arc::from(name),
        base_url: e.base_url.clone(),
        model: e.model.clone(),
        api_key,
        max_in_flight: e.max_in_flight,
        max_connecting: e.max_connecting,
        requests_per_minute: e.requests_per_minute,
        tokens_per_minute: e.tokens_per_minute,
        request_timeout: Duration::from_secs(e.request_timeout_secs),
        stream_idle_timeout: Duration::from_secs(e.stream_idle_timeout_secs),
        context_window: e.context_window,
        token_estimate,
    }
}
