//! Checks a [`ClientConfig`] before anything starts, naming the offending field.

use std::collections::HashSet;

use super::config::ClientConfig;
use super::error::ClientError;

fn bad(message: String) -> Result<(), ClientError> {
    Err(ClientError::Config { message })
}

impl ClientConfig {
    /// Every problem a config can have that would otherwise surface mid-run.
    pub fn validate(&self) -> Result<(), ClientError> {
        if self.endpoints.is_empty() {
            return bad("no endpoints are configured".into());
        }
        if self.global_max_in_flight == 0 {
            return bad("global_max_in_flight must be at least 1".into());
        }
        let mut names = HashSet::new();
        for e in &self.endpoints {
            let n = &e.name;
            if n.is_empty() {
                return bad(format!(
                    "an endpoint with base_url `{}` has an empty name",
                    e.base_url
                ));
            }
            if !names.insert(n.clone()) {
                return bad(format!("endpoint name `{n}` is used twice"));
            }
            if e.max_in_flight == 0 {
                return bad(format!("endpoint `{n}`: max_in_flight must be at least 1"));
            }
            if e.max_connecting == 0 {
                return bad(format!("endpoint `{n}`: max_connecting must be at least 1"));
            }
            if e.request_timeout.is_zero() || e.stream_idle_timeout.is_zero() {
                return bad(format!(
                    "endpoint `{n}`: request_timeout and stream_idle_timeout must be > 0"
                ));
            }
            if e.context_window <= self.policy.context_margin {
                return bad(format!(
                    "endpoint `{n}`: context_window {} must exceed the context margin {}",
                    e.context_window, self.policy.context_margin
                ));
            }
            if !(e.base_url.starts_with("http://") || e.base_url.starts_with("https://")) {
                return bad(format!(
                    "endpoint `{n}`: base_url `{}` must start with http:// or https://",
                    e.base_url
                ));
            }
        }
        if self.groups.is_empty() {
            return bad("no endpoint groups are configured".into());
        }
        let mut groups = HashSet::new();
        for (g, members) in &self.groups {
            if !groups.insert(g.clone()) {
                return bad(format!("group `{g}` is defined twice"));
            }
            if members.is_empty() {
                return bad(format!("group `{g}` has no endpoints"));
            }
            if let Some(m) = members.iter().find(|m| !names.contains(*m)) {
                return bad(format!("group `{g}` names unknown endpoint `{m}`"));
            }
        }
        if let Some((g, _)) = self.routing.iter().find(|(g, _)| !groups.contains(g)) {
            return bad(format!("routing names unknown group `{g}`"));
        }
        self.validate_policy()
    }

    /// The resilience policy's bounds.
    fn validate_policy(&self) -> Result<(), ClientError> {
        let p = &self.policy;
        if p.max_attempts == 0 || p.max_malformed_attempts == 0 {
            return bad(
                "policy: max_attempts and max_malformed_attempts must be at least 1".into(),
            );
        }
        if p.max_timeout_attempts == 0 {
            return bad("policy: max_timeout_attempts must be at least 1".into());
        }
        if !(p.timeout_growth.is_finite() && (1.0..=16.0).contains(&p.timeout_growth)) {
            return bad(format!(
                "policy: timeout_growth must be within 1..=16, got {}",
                p.timeout_growth
            ));
        }
        if p.breaker_window == 0 || p.breaker_min_calls == 0 || p.min_in_flight == 0 {
            return bad(
                "policy: breaker_window, breaker_min_calls and min_in_flight must be at least 1"
                    .into(),
            );
        }
        if !(p.breaker_failure_ratio > 0.0 && p.breaker_failure_ratio <= 1.0) {
            return bad(format!(
                "policy: breaker_failure_ratio must be within (0, 1], got {}",
                p.breaker_failure_ratio
            ));
        }
        if p.backoff_min > p.backoff_max {
            return bad(format!(
                "policy: backoff_min {:?} exceeds backoff_max {:?}",
                p.backoff_min, p.backoff_max
            ));
        }
        if p.breaker_failures == 0 || p.probe_successes == 0 || p.probe_interval.is_zero() {
            return bad(
                "policy: breaker_failures, probe_successes and probe_interval must be > 0".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::config::{EndpointSpec, ResiliencePolicy, TokenEstimate};

    fn config() -> ClientConfig {
        ClientConfig {
            endpoints: vec![EndpointSpec {
                name: "a".into(),
                base_url: "http://127.0.0.1:1/v1".into(),
                model: "m".into(),
                api_key: None,
                max_in_flight: 4,
                requests_per_minute: None,
                tokens_per_minute: None,
                request_timeout: Duration::from_secs(1),
                max_connecting: crate::config::DEFAULT_MAX_CONNECTING,
                stream_idle_timeout: Duration::from_secs(1),
                context_window: 4096,
                token_estimate: TokenEstimate::Bytes {
                    bytes_per_token: 3.0,
                },
            }],
            groups: vec![("g".into(), vec!["a".into()])],
            routing: Vec::new(),
            global_max_in_flight: 4,
            global_requests_per_minute: None,
            global_tokens_per_minute: None,
            policy: ResiliencePolicy::default(),
        }
    }

    #[test]
    fn accepts_a_good_config_and_names_bad_fields() {
        config().validate().unwrap();
        let mut c = config();
        c.groups[0].1.push(Arc::from("ghost"));
        assert!(c.validate().unwrap_err().to_string().contains("ghost"));
        let mut c = config();
        c.endpoints.push(c.endpoints[0].clone());
        assert!(c.validate().unwrap_err().to_string().contains("used twice"));
        let mut c = config();
        c.endpoints[0].context_window = 100;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("context_window")
        );
        let mut c = config();
        c.endpoints[0].max_in_flight = 0;
        assert!(c.validate().is_err());
        let mut c = config();
        c.endpoints[0].max_connecting = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("max_connecting")
        );
    }
}
