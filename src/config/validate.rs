//! Semantic validation: every rule is checked and every violation collected (not just the
//! first), each with its key path and reason. Range rules are pure; the checks that look
//! at the file system (prompt templates, tokenizers) are kept apart in [`check_paths`].

use std::collections::BTreeSet;
use std::path::Path;

use super::Config;
use super::endpoints::{DEFAULT_GROUP, EMBEDDED_SIM};
use super::error::{KeyIssue, KeyPath};
use super::schema::probe_interval_problem;
use crate::role::Role;

/// Collects issues under a base path.
struct Sink {
    issues: Vec<KeyIssue>,
}

impl Sink {
    fn push(&mut self, path: KeyPath, message: impl Into<String>) {
        self.issues.push(KeyIssue::new(path, message));
    }
    fn at_least_one(&mut self, path: KeyPath, value: u64) {
        if value == 0 {
            self.push(path, "must be at least 1, got 0");
        }
    }
    fn some_positive(&mut self, path: KeyPath, value: Option<u64>) {
        if value == Some(0) {
            self.push(
                path,
                "must be at least 1 when set (leave it out for no limit)",
            );
        }
    }
}

fn k(keys: &[&str]) -> KeyPath {
    KeyPath::keys(keys.iter().copied())
}

/// Every range and reference rule; no IO.
pub fn validate_values(c: &Config) -> Vec<KeyIssue> {
    let mut s = Sink { issues: Vec::new() };
    run_rules(c, &mut s);
    method_rules(c, &mut s);
    if c.judge.enabled {
        s.at_least_one(k(&["judge", "repeats"]), u64::from(c.judge.repeats));
    }
    endpoint_rules(c, &mut s);
    group_rules(c, &mut s);
    routing_rules(c, &mut s);
    role_rules(c, &mut s);
    resilience_rules(c, &mut s);
    prompt_rules(c, &mut s);
    serve_rules(c, &mut s);
    // The simulator's own rules (its error names the field inside `[simulator]`).
    if let Err(e) = c.simulator.validate() {
        s.push(sub_path(k(&["simulator"]), &e.field), e.message);
    }
    s.issues
}

fn run_rules(c: &Config, s: &mut Sink) {
    let r = &c.run;
    s.at_least_one(
        k(&["run", "max_concurrent_problems"]),
        r.max_concurrent_problems as u64,
    );
    s.at_least_one(k(&["run", "max_in_flight"]), r.max_in_flight as u64);
    s.some_positive(
        k(&["run", "requests_per_minute"]),
        r.requests_per_minute.map(u64::from),
    );
    s.some_positive(
        k(&["run", "tokens_per_minute"]),
        r.tokens_per_minute.map(u64::from),
    );
    s.some_positive(k(&["run", "limit"]), r.limit.map(|v| v as u64));
    if r.ids.as_ref().is_some_and(Vec::is_empty) {
        s.push(
            k(&["run", "ids"]),
            "an empty list selects no problem (leave it out for all)",
        );
    }
    if r.out_dir.as_os_str().is_empty() {
        s.push(k(&["run", "out_dir"]), "must not be empty");
    }
    if let Some(a) = r.max_active_problems
        && a < r.max_concurrent_problems
    {
        s.push(
            k(&["run", "max_active_problems"]),
            format!(
                "must be at least run.max_concurrent_problems ({}), got {a}",
                r.max_concurrent_problems
            ),
        );
    }
}

fn method_rules(c: &Config, s: &mut Sink) {
    let m = &c.method;
    s.at_least_one(k(&["method", "n"]), u64::from(m.n));
    s.at_least_one(k(&["method", "iterations"]), u64::from(m.iterations));
    s.at_least_one(
        k(&["method", "max_bank_attempts"]),
        u64::from(m.max_bank_attempts),
    );
    s.some_positive(
        k(&["method", "max_rollouts"]),
        m.max_rollouts.map(u64::from),
    );
    if !(0.0..=1.0).contains(&m.epsilon) {
        s.push(
            k(&["method", "epsilon"]),
            format!("must be within [0, 1], got {}", m.epsilon),
        );
    }
    if !(m.dedup_threshold > 0.0 && m.dedup_threshold <= 1.0) {
        s.push(
            k(&["method", "dedup_threshold"]),
            format!("must be within (0, 1], got {}", m.dedup_threshold),
        );
    }
    s.at_least_one(
        k(&["method", "rse_extraction_attempts"]),
        u64::from(m.rse_extraction_attempts),
    );
    if !(m.embedding_threshold > 0.0 && m.embedding_threshold <= 1.0) {
        s.push(
            k(&["method", "embedding_threshold"]),
            format!("must be within (0, 1], got {}", m.embedding_threshold),
        );
    }
    if m.name == super::MethodName::MajorityVote {
        s.at_least_one(k(&["method", "k"]), u64::from(m.k));
        if m.iterations != 1 {
            s.push(
                k(&["method", "iterations"]),
                format!(
                    "majority-vote is one vote over method.k samples: set iterations = 1 (got {})",
                    m.iterations
                ),
            );
        }
    }
    if let Some(a) = m.max_verification_attempts
        && a < m.m
    {
        s.push(
            k(&["method", "max_verification_attempts"]),
            format!("must be at least method.m ({}), got {a}", m.m),
        );
    }
}

fn serve_rules(c: &Config, s: &mut Sink) {
    let v = &c.serve;
    for (i, name) in v.api_key_envs.iter().enumerate() {
        if !is_env_name(name) {
            // Never echoed: it may be a pasted key.
            s.push(
                k(&["serve", "api_key_envs"]).index(i),
                "must be the name of an environment variable (letters, digits and `_`), not a key",
            );
        }
    }
    s.at_least_one(
        k(&["serve", "max_calls_per_request"]),
        u64::from(v.max_calls_per_request),
    );
    s.at_least_one(k(&["serve", "max_body_bytes"]), v.max_body_bytes as u64);
    s.at_least_one(k(&["serve", "max_choices"]), u64::from(v.max_choices));
}

fn prompt_rules(c: &Config, s: &mut Sink) {
    use super::TemplateKind;
    for name in c.prompts.keys() {
        let p = k(&["prompts", name]);
        if TemplateKind::from_name(name).is_none() {
            let known: Vec<&str> = TemplateKind::ALL.iter().map(|t| t.name()).collect();
            s.push(
                p,
                format!("unknown template `{name}` (known: {})", known.join(", ")),
            );
        } else if let Some(role) = Role::from_label(name)
            && c.roles[role].prompt.is_some()
        {
            s.push(p, format!("set twice: also roles.{name}.prompt (keep one)"));
        }
    }
}

/// `base` extended by a relative path written as `a.b[2].c`.
fn sub_path(base: KeyPath, rel: &str) -> KeyPath {
    let mut path = base;
    for part in rel.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            path = path.key(key);
        }
        for idx in pieces {
            match idx.trim_end_matches(']').parse::<usize>() {
                Ok(i) => path = path.index(i),
                Err(_) => path = path.key(idx.trim_end_matches(']')),
            }
        }
    }
    path
}

/// A portable environment variable name: letters, digits and `_`, not starting with a digit.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn endpoint_rules(c: &Config, s: &mut Sink) {
    if c.endpoints.is_empty() {
        s.push(
            k(&["endpoints"]),
            "no endpoint defined (add an [endpoints.NAME] table with base_url and model)",
        );
    }
    let margin = c.resilience.context_margin;
    for (name, e) in &c.endpoints {
        let p = k(&["endpoints", name]);
        if name.is_empty() {
            s.push(p.clone(), "endpoint name must not be empty");
        }
        let url_ok = e.base_url == EMBEDDED_SIM
            || e.base_url.starts_with("http://")
            || e.base_url.starts_with("https://");
        if !url_ok {
            s.push(
                p.key("base_url"),
                format!(
                    "must start with http:// or https://, or be `{EMBEDDED_SIM}`, got {:?}",
                    e.base_url
                ),
            );
        }
        if e.model.trim().is_empty() {
            s.push(p.key("model"), "must not be empty");
        }
        if let Some(var) = &e.api_key_env
            && !is_env_name(var)
        {
            // Never echo the value: a key pasted here by mistake must not reach a log.
            s.push(
                p.key("api_key_env"),
                "must be the NAME of an environment variable (letters, digits, `_`), \
                 not the key itself",
            );
        }
        s.at_least_one(p.key("max_in_flight"), e.max_in_flight as u64);
        s.at_least_one(p.key("max_connecting"), e.max_connecting as u64);
        s.some_positive(
            p.key("requests_per_minute"),
            e.requests_per_minute.map(u64::from),
        );
        s.some_positive(
            p.key("tokens_per_minute"),
            e.tokens_per_minute.map(u64::from),
        );
        s.at_least_one(p.key("request_timeout_secs"), e.request_timeout_secs);
        s.at_least_one(
            p.key("stream_idle_timeout_secs"),
            e.stream_idle_timeout_secs,
        );
        if e.context_window <= margin {
            s.push(
                p.key("context_window"),
                format!(
                    "must exceed resilience.context_margin ({margin}), got {}",
                    e.context_window
                ),
            );
        }
        if !(e.bytes_per_token.is_finite() && e.bytes_per_token > 0.0) {
            s.push(
                p.key("bytes_per_token"),
                format!("must be greater than 0, got {}", e.bytes_per_token),
            );
        }
    }
}

fn group_rules(c: &Config, s: &mut Sink) {
    for (name, members) in &c.groups {
        let p = k(&["groups", name]);
        if members.is_empty() {
            s.push(p.clone(), "a group needs at least one endpoint");
        }
        let mut seen = BTreeSet::new();
        for (i, m) in members.iter().enumerate() {
            if !c.endpoints.contains_key(m) {
                s.push(
                    p.index(i),
                    format!(
                        "unknown endpoint `{m}` (defined: {})",
                        names(c.endpoints.keys())
                    ),
                );
            }
            if !seen.insert(m.as_str()) {
                s.push(p.index(i), format!("endpoint `{m}` is listed twice"));
            }
        }
    }
}

/// `[routing]` may only name groups that exist (declared, or the implicit `default`).
fn routing_rules(c: &Config, s: &mut Sink) {
    let mut known: Vec<String> = c.groups.keys().cloned().collect();
    if !c.groups.contains_key(DEFAULT_GROUP) {
        known.push(DEFAULT_GROUP.to_string());
    }
    for group in c.routing.keys() {
        if !known.contains(group) {
            s.push(
                k(&["routing", group]),
                format!("unknown group `{group}` (groups: {})", known.join(", ")),
            );
        }
    }
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

fn role_rules(c: &Config, s: &mut Sink) {
    for role in Role::ALL {
        let r = &c.roles[role];
        let p = k(&["roles", role.as_str()]);
        // With no endpoint at all, `endpoints` already carries the error.
        let known =
            c.endpoints.is_empty() || c.groups.contains_key(&r.group) || r.group == DEFAULT_GROUP;
        if !known {
            s.push(
                p.key("group"),
                format!(
                    "unknown group `{}` (declared: {}; `{DEFAULT_GROUP}` = all endpoints \
                     unless declared)",
                    r.group,
                    names(c.groups.keys())
                ),
            );
        }
        if !(r.temperature.is_finite() && r.temperature >= 0.0) {
            s.push(
                p.key("temperature"),
                format!("must be at least 0, got {}", r.temperature),
            );
        }
        if !(r.top_p > 0.0 && r.top_p <= 1.0) {
            s.push(
                p.key("top_p"),
                format!("must be within (0, 1], got {}", r.top_p),
            );
        }
        s.at_least_one(p.key("max_tokens"), u64::from(r.max_tokens));
        if let Some(top_k) = r.top_k {
            s.at_least_one(p.key("top_k"), u64::from(top_k));
        }
        if role.is_embedding() && r.prompt.is_some() {
            s.push(
                p.key("prompt"),
                "the embedding role sends the bank items themselves, no prompt template: \
                 remove it",
            );
        }
        s.some_positive(p.key("pool_size"), r.pool_size.map(|v| v as u64));
    }
}

fn resilience_rules(c: &Config, s: &mut Sink) {
    let r = &c.resilience;
    let p = k(&["resilience"]);
    s.at_least_one(p.key("max_attempts"), u64::from(r.max_attempts));
    s.at_least_one(
        p.key("max_malformed_attempts"),
        u64::from(r.max_malformed_attempts),
    );
    s.at_least_one(p.key("breaker_failures"), u64::from(r.breaker_failures));
    s.at_least_one(
        p.key("max_timeout_attempts"),
        u64::from(r.max_timeout_attempts),
    );
    s.at_least_one(p.key("breaker_window"), r.breaker_window as u64);
    s.at_least_one(p.key("breaker_min_calls"), r.breaker_min_calls as u64);
    s.at_least_one(p.key("min_in_flight"), r.min_in_flight as u64);
    if !(r.timeout_growth.is_finite() && (1.0..=16.0).contains(&r.timeout_growth)) {
        s.push(
            p.key("timeout_growth"),
            format!("must be within 1..=16, got {}", r.timeout_growth),
        );
    }
    if !(r.breaker_failure_ratio > 0.0 && r.breaker_failure_ratio <= 1.0) {
        s.push(
            p.key("breaker_failure_ratio"),
            format!("must be within (0, 1], got {}", r.breaker_failure_ratio),
        );
    }
    if r.breaker_min_calls > r.breaker_window {
        s.push(
            p.key("breaker_min_calls"),
            format!(
                "must not exceed resilience.breaker_window ({}), got {}",
                r.breaker_window, r.breaker_min_calls
            ),
        );
    }
    if let Some(problem) = probe_interval_problem(r.probe_interval_secs) {
        s.push(p.key("probe_interval_secs"), problem);
    }
    s.at_least_one(p.key("probe_successes"), u64::from(r.probe_successes));
    if r.backoff_min_ms > r.backoff_max_ms {
        s.push(
            p.key("backoff_min_ms"),
            format!(
                "must not exceed resilience.backoff_max_ms ({}), got {}",
                r.backoff_max_ms, r.backoff_min_ms
            ),
        );
    }
}

/// Files the config points at that must exist now: prompt templates and tokenizers.
/// (The dataset is checked by the loader when a run starts; `config check` warns.)
pub fn check_paths(c: &Config) -> Vec<KeyIssue> {
    let mut out = Vec::new();
    let mut need = |path: KeyPath, file: &Path, what: &str| {
        if !file.is_file() {
            out.push(KeyIssue::new(
                path,
                format!("{what} file {} not found", file.display()),
            ));
        }
    };
    for role in Role::ALL {
        if let Some(file) = &c.roles[role].prompt {
            need(
                k(&["roles", role.as_str(), "prompt"]),
                file,
                "prompt template",
            );
        }
    }
    for (name, file) in &c.prompts {
        need(k(&["prompts", name]), file, "prompt template");
    }
    for (name, e) in &c.endpoints {
        if let Some(file) = &e.tokenizer {
            need(k(&["endpoints", name, "tokenizer"]), file, "tokenizer");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_with_indices() {
        let p = sub_path(k(&["simulator"]), "task.strategy_weights[2]");
        assert_eq!(p.to_string(), "simulator.task.strategy_weights[2]");
        assert_eq!(sub_path(k(&["s"]), "model").to_string(), "s.model");
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("TMAS_API_KEY"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("sk-abc"));
        assert!(!is_env_name(""));
    }
}
