//! Which config changes a resume accepts.
//!
//! The stored config is authoritative. A resume may change *operational* settings — where
//! the endpoints are, how many calls run at once, timeouts, retries, the shutdown grace —
//! because they change how fast results arrive, not what they are. Any other key that
//! differs (model, N, M, ε, seed, sampling, prompts, dataset selection, …) is
//! result-affecting: the resume is refused with the list of keys unless `--force` is
//! given. `method.iterations` is special: it may grow (extending a finished run) but not
//! shrink.

use toml::Value;

/// Key patterns (`*` = any one segment, a trailing `*` = anything below) that never
/// change results.
const OPERATIONAL: &[&str] = &[
    "run.max_concurrent_problems",
    "run.max_in_flight",
    "run.requests_per_minute",
    "run.tokens_per_minute",
    "run.out_dir",
    "run.admission",
    "run.max_active_problems",
    "run.call_priority",
    "run.shutdown_grace_secs",
    "method.iterations",
    "endpoints.*.base_url",
    "endpoints.*.api_key_env",
    "endpoints.*.max_in_flight",
    "endpoints.*.max_connecting",
    "endpoints.*.requests_per_minute",
    "endpoints.*.tokens_per_minute",
    "endpoints.*.request_timeout_secs",
    "endpoints.*.stream_idle_timeout_secs",
    "endpoints.*.tokenizer",
    "endpoints.*.bytes_per_token",
    "endpoints.*.stream",
    "groups.*",
    "roles.*.group",
    "roles.*.pool_size",
    "resilience.*",
    "simulator.latency",
    "simulator.per_output_token_us",
    "simulator.max_concurrency",
    "simulator.overload_status",
    "simulator.retry_after_secs",
    "simulator.record_requests",
    "simulator.stream_chunk_bytes",
    "simulator.faults.*",
];

fn matches(pattern: &str, path: &[String]) -> bool {
    let parts: Vec<&str> = pattern.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let Some(seg) = path.get(i) else {
            return false;
        };
        if *part == "*" && last {
            return true;
        }
        if *part != "*" && part != seg {
            return false;
        }
        if last {
            return path.len() == parts.len();
        }
    }
    false
}

/// Whether a dotted key path is operational (see the module docs).
pub fn is_operational(path: &[String]) -> bool {
    OPERATIONAL.iter().any(|p| matches(p, path))
}

fn flatten(prefix: &mut Vec<String>, value: &Value, out: &mut Vec<(Vec<String>, Value)>) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                prefix.push(k.clone());
                flatten(prefix, v, out);
                prefix.pop();
            }
        }
        other => out.push((prefix.clone(), other.clone())),
    }
}

/// Result-affecting keys whose values differ between two configs (as TOML values),
/// sorted, each as `key: stored → requested` (`unset` for a missing key).
pub fn result_affecting_differences(stored: &Value, requested: &Value) -> Vec<String> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flatten(&mut Vec::new(), stored, &mut a);
    flatten(&mut Vec::new(), requested, &mut b);
    let a: std::collections::BTreeMap<_, _> = a.into_iter().collect();
    let b: std::collections::BTreeMap<_, _> = b.into_iter().collect();
    let keys: std::collections::BTreeSet<&Vec<String>> = a.keys().chain(b.keys()).collect();
    let show = |v: Option<&Value>| v.map_or_else(|| "unset".to_owned(), Value::to_string);
    keys.into_iter()
        .filter(|k| !is_operational(k))
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{}: {} → {}", k.join("."), show(a.get(k)), show(b.get(k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Value {
        Value::Table(toml::from_str(text).unwrap())
    }

    #[test]
    fn operational_changes_pass_and_result_affecting_ones_are_named() {
        let stored = v(r#"
            [run]
            seed = 7
            max_in_flight = 64
            [method]
            n = 4
            iterations = 3
            [endpoints.a]
            base_url = "http://127.0.0.1:1"
            model = "m"
            [resilience]
            max_attempts = 3
        "#);
        let same_results = v(r#"
            [run]
            seed = 7
            max_in_flight = 800
            [method]
            n = 4
            iterations = 5
            [endpoints.a]
            base_url = "http://127.0.0.1:2"
            model = "m"
            [resilience]
            max_attempts = 9
        "#);
        assert!(result_affecting_differences(&stored, &same_results).is_empty());
        let different = v(r#"
            [run]
            seed = 8
            max_in_flight = 64
            [method]
            n = 4
            iterations = 3
            [endpoints.a]
            base_url = "http://127.0.0.1:1"
            model = "other"
            [resilience]
            max_attempts = 3
        "#);
        let diffs = result_affecting_differences(&stored, &different);
        assert_eq!(
            diffs,
            vec![
                "endpoints.a.model: \"m\" → \"other\"".to_owned(),
                "run.seed: 7 → 8".to_owned()
            ]
        );
    }

    #[test]
    fn patterns_match_whole_segments() {
        let p = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
        assert!(is_operational(&p("endpoints.gpu1.base_url")));
        assert!(!is_operational(&p("endpoints.gpu1.model")));
        assert!(is_operational(&p("simulator.faults.error_500")));
        assert!(!is_operational(&p("simulator.seed")));
        assert!(!is_operational(&p("run.max_in_flight_extra")));
        assert!(!is_operational(&p("resilience")));
    }
}
