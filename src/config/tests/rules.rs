//! One test per validation rule, plus "all errors are collected".

use super::*;

#[test]
fn minimal_config_has_the_paper_defaults() {
    let c = load_text("").expect("minimal config loads");
    assert_eq!((c.method.n, c.method.m, c.method.iterations), (8, 8, 20));
    assert_eq!(c.method.epsilon, 0.2);
    assert_eq!(c.run.max_in_flight, 800);
    assert_eq!(c.run.max_concurrent_problems, 100);
    assert_eq!(c.run.admission, AdmissionKind::Fixed);
    assert_eq!(c.run.call_priority, CallPriority::LeastProgressFirst);
    assert_eq!(c.roles[Role::Solution].temperature, 1.0);
    assert_eq!(c.roles[Role::Verification].temperature, 1.0);
    for r in [
        &c.roles[Role::Summary],
        &c.roles[Role::Experience],
        &c.roles[Role::Guideline],
    ] {
        assert_eq!(r.temperature, 0.6);
        assert_eq!(r.max_tokens, 128_000);
    }
    assert_eq!(c.roles[Role::Solution].top_p, 0.95);
    assert_eq!(c.judge.repeats, 4);
    assert_eq!(c.endpoints["local"].context_window, 131_072);
    // Derived defaults are written in.
    assert_eq!(c.run.max_active_problems, Some(200));
    assert_eq!(c.method.max_verification_attempts, Some(16));
}

#[test]
fn partial_role_table_keeps_that_roles_defaults() {
    let c = load_text("[roles.summary]\ntop_p = 0.9\n").expect("loads");
    assert_eq!(c.roles[Role::Summary].top_p, 0.9);
    assert_eq!(
        c.roles[Role::Summary].temperature,
        0.6,
        "role-specific default kept"
    );
}

#[test]
fn resilience_defaults_are_the_client_policy_defaults() {
    let ours = format!("{:?}", ResilienceConfig::default().to_policy());
    let theirs = format!("{:?}", tmas_client::ResiliencePolicy::default());
    assert_eq!(ours, theirs);
}

#[test]
fn epsilon_must_be_within_0_1() {
    issue_at(
        "[method]\nepsilon = 1.5",
        "method.epsilon",
        "within [0, 1], got 1.5",
    );
    issue_at(
        "[method]\nepsilon = -0.1",
        "method.epsilon",
        "within [0, 1]",
    );
    assert!(load_text("[method]\nepsilon = 0").is_ok());
    assert!(load_text("[method]\nepsilon = 1").is_ok());
}

#[test]
fn counts_must_be_positive() {
    issue_at("[method]\nn = 0", "method.n", "at least 1");
    issue_at(
        "[method]\niterations = 0",
        "method.iterations",
        "at least 1",
    );
    issue_at(
        "[method]\nmax_bank_attempts = 0",
        "method.max_bank_attempts",
        "at least 1",
    );
    issue_at(
        "[method]\nmax_rollouts = 0",
        "method.max_rollouts",
        "at least 1",
    );
    issue_at(
        "[run]\nmax_in_flight = 0",
        "run.max_in_flight",
        "at least 1",
    );
    issue_at(
        "[run]\nmax_concurrent_problems = 0",
        "run.max_concurrent_problems",
        "at least 1",
    );
    issue_at("[run]\nlimit = 0", "run.limit", "at least 1");
    issue_at(
        "[run]\nrequests_per_minute = 0",
        "run.requests_per_minute",
        "at least 1",
    );
    issue_at(
        "[run]\ntokens_per_minute = 0",
        "run.tokens_per_minute",
        "at least 1",
    );
    issue_at("[judge]\nrepeats = 0", "judge.repeats", "at least 1");
    assert!(load_text("[judge]\nrepeats = 0\nenabled = false").is_ok());
}

#[test]
fn m_zero_is_allowed() {
    let c = load_text("[method]\nm = 0").expect("M = 0 disables verification");
    assert_eq!(c.method.max_verification_attempts, Some(0));
}

#[test]
fn run_selection_rules() {
    issue_at("[run]\nids = []", "run.ids", "selects no problem");
    issue_at("[run]\nout_dir = \"\"", "run.out_dir", "must not be empty");
    issue_at(
        "[run]\nmax_concurrent_problems = 10\nmax_active_problems = 5",
        "run.max_active_problems",
        "at least run.max_concurrent_problems (10), got 5",
    );
}

#[test]
fn verification_attempts_cover_m() {
    issue_at(
        "[method]\nm = 8\nmax_verification_attempts = 4",
        "method.max_verification_attempts",
        "at least method.m (8)",
    );
}

#[test]
fn dedup_threshold_within_0_exclusive_1() {
    issue_at(
        "[method]\ndedup_threshold = 0",
        "method.dedup_threshold",
        "(0, 1]",
    );
    issue_at(
        "[method]\ndedup_threshold = 1.5",
        "method.dedup_threshold",
        "(0, 1]",
    );
    assert!(load_text("[method]\ndedup_threshold = 1").is_ok());
}

#[test]
fn rse_dedup_and_embedding_threshold() {
    let c = load_text("").expect("loads");
    assert_eq!(
        c.method.rse_dedup,
        BankDedup::Jaccard,
        "auto resolves to jaccard without an embeddings server"
    );
    assert_eq!(c.method.rse_extraction_attempts, 6);
    assert_eq!(c.method.self_refine_history, SelfRefineHistory::Full);
    issue_at(
        "[method]\nrse_extraction_attempts = 0",
        "method.rse_extraction_attempts",
        "at least 1",
    );
    issue_at(
        "[method]\nself_refine_history = \"some\"",
        "method.self_refine_history",
        "unknown variant `some`",
    );
    assert_eq!(c.method.embedding_threshold, 0.8);
    assert!(!c.method.uses_embeddings());
    let c = load_text("[method]\nname = \"rse\"\nrse_dedup = \"embeddings\"").expect("loads");
    assert!(c.method.uses_embeddings());
    issue_at(
        "[method]\nembedding_threshold = 0",
        "method.embedding_threshold",
        "within (0, 1], got 0",
    );
    issue_at(
        "[method]\nembedding_threshold = 1.2",
        "method.embedding_threshold",
        "(0, 1]",
    );
    issue_at(
        "[method]\nrse_dedup = \"cosine\"",
        "method.rse_dedup",
        "unknown variant `cosine`",
    );
    issue_at(
        "[roles.embedding]\nprompt = \"Cargo.toml\"",
        "roles.embedding.prompt",
        "no prompt template",
    );
}

#[test]
fn sampling_rules() {
    issue_at(
        "[roles.solution]\ntemperature = -1",
        "roles.solution.temperature",
        "at least 0",
    );
    issue_at("[roles.judge]\ntop_p = 0", "roles.judge.top_p", "(0, 1]");
    issue_at(
        "[roles.summary]\ntop_p = 1.5",
        "roles.summary.top_p",
        "(0, 1]",
    );
    issue_at(
        "[roles.guideline]\nmax_tokens = 0",
        "roles.guideline.max_tokens",
        "at least 1",
    );
    issue_at(
        "[roles.experience]\npool_size = 0",
        "roles.experience.pool_size",
        "at least 1",
    );
}

#[test]
fn group_rules() {
    issue_at("[groups]\nbig = []", "groups.big", "at least one endpoint");
    issue_at(
        "[groups]\nbig = [\"nope\"]",
        "groups.big[0]",
        "unknown endpoint `nope`",
    );
    issue_at(
        "[groups]\nbig = [\"local\", \"local\"]",
        "groups.big[1]",
        "listed twice",
    );
    issue_at(
        "[roles.solution]\ngroup = \"big\"",
        "roles.solution.group",
        "unknown group `big`",
    );
    assert!(load_text("[groups]\nbig = [\"local\"]\n[roles.solution]\ngroup = \"big\"").is_ok());
}

/// A config with its own endpoint table (the helper's endpoint would clash).
fn endpoint_issue(keys: &str, path: &str, needle: &str) -> ConfigIssue {
    let text =
        format!("[endpoints.e]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n{keys}");
    let errs = load_str(&text, "t.toml", &[], &[]).expect_err("should fail");
    let found = errs.iter().find(|i| i.path == path).cloned();
    let issue = found.unwrap_or_else(|| panic!("no issue at {path}; got:\n{errs}"));
    assert!(issue.message.contains(needle), "{issue}");
    issue
}

#[test]
fn endpoint_rules() {
    endpoint_issue(
        "max_in_flight = 0",
        "endpoints.e.max_in_flight",
        "at least 1",
    );
    endpoint_issue(
        "requests_per_minute = 0",
        "endpoints.e.requests_per_minute",
        "at least 1",
    );
    endpoint_issue(
        "tokens_per_minute = 0",
        "endpoints.e.tokens_per_minute",
        "at least 1",
    );
    endpoint_issue(
        "request_timeout_secs = 0",
        "endpoints.e.request_timeout_secs",
        "at least 1",
    );
    endpoint_issue(
        "stream_idle_timeout_secs = 0",
        "endpoints.e.stream_idle_timeout_secs",
        "at least 1",
    );
    endpoint_issue(
        "bytes_per_token = 0.0",
        "endpoints.e.bytes_per_token",
        "greater than 0",
    );
    endpoint_issue(
        "context_window = 256",
        "endpoints.e.context_window",
        "must exceed resilience.context_margin (256)",
    );
    endpoint_issue(
        "tokenizer = \"/no/such/tokenizer.json\"",
        "endpoints.e.tokenizer",
        "not found",
    );
}

#[test]
fn endpoint_url_and_model_rules() {
    let text = "[endpoints.e]\nbase_url = \"127.0.0.1:8000\"\nmodel = \" \"\n";
    let errs = load_str(text, "t.toml", &[], &[]).expect_err("invalid");
    assert!(errs.has_path("endpoints.e.base_url"), "{errs}");
    assert!(errs.has_path("endpoints.e.model"), "{errs}");
    let text = "[endpoints.e]\nbase_url = \"embedded-sim\"\nmodel = \"m\"\n";
    assert!(load_str(text, "t.toml", &[], &[]).is_ok());
}

#[test]
fn api_key_env_must_be_a_name_and_is_never_echoed() {
    let secret = "sk-live-abc123";
    let issue = endpoint_issue(
        &format!("api_key_env = \"{secret}\""),
        "endpoints.e.api_key_env",
        "NAME of an environment variable",
    );
    assert!(!issue.to_string().contains(secret), "{issue}");
}

#[test]
fn at_least_one_endpoint() {
    let errs = load_str("[method]\nn = 2\n", "t.toml", &[], &[]).expect_err("no endpoint");
    assert!(errs.has_path("endpoints"), "{errs}");
}

#[test]
fn prompt_template_must_exist() {
    issue_at(
        "[roles.verification]\nprompt = \"/no/such/template.md\"",
        "roles.verification.prompt",
        "prompt template file /no/such/template.md not found",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("v.md");
    std::fs::write(&file, "x").expect("write");
    let text = format!(
        "[roles.verification]\nprompt = {:?}",
        file.display().to_string()
    );
    assert!(load_text(&text).is_ok());
}

#[test]
fn resilience_rules() {
    issue_at(
        "[resilience]\nbackoff_min_ms = 5000\nbackoff_max_ms = 100",
        "resilience.backoff_min_ms",
        "must not exceed resilience.backoff_max_ms (100)",
    );
    for key in [
        "max_attempts",
        "max_malformed_attempts",
        "breaker_failures",
        "max_timeout_attempts",
        "breaker_window",
        "breaker_min_calls",
        "min_in_flight",
        "probe_successes",
    ] {
        issue_at(
            &format!("[resilience]\n{key} = 0"),
            &format!("resilience.{key}"),
            "at least 1",
        );
    }
}

#[test]
fn the_probe_interval_takes_fractions_of_a_second_within_bounds() {
    let c = load_text("[resilience]\nprobe_interval_secs = 0.25").expect("a quarter second");
    assert_eq!(
        c.resilience.to_policy().probe_interval,
        std::time::Duration::from_millis(250)
    );
    // Whole seconds, as configs written before fractions were allowed say it.
    let c = load_text("[resilience]\nprobe_interval_secs = 3").expect("whole seconds");
    assert_eq!(
        c.resilience.to_policy().probe_interval,
        std::time::Duration::from_secs(3)
    );
    for bad in ["0", "0.01", "-1", "7200", "nan"] {
        issue_at(
            &format!("[resilience]\nprobe_interval_secs = {bad}"),
            "resilience.probe_interval_secs",
            "must be between 0.05 and 3600 seconds",
        );
    }
}

#[test]
fn every_semantic_error_is_reported() {
    let errs = load_text("[method]\nn = 0\nepsilon = 2.0\n[roles.solution]\ntop_p = 0")
        .expect_err("three errors");
    assert_eq!(errs.len(), 3, "{errs}");
    for p in ["method.n", "method.epsilon", "roles.solution.top_p"] {
        assert!(errs.has_path(p), "missing {p} in:\n{errs}");
    }
}

#[test]
fn validate_on_a_config_built_in_code() {
    let mut c = load_text("").expect("loads");
    assert!(c.validate().is_ok());
    c.method.epsilon = 3.0;
    let errs = c.validate().expect_err("invalid");
    assert_eq!(
        errs.to_string(),
        "method.epsilon: must be within [0, 1], got 3"
    );
}

#[test]
fn simulator_section_is_validated_by_the_simulator_rules() {
    issue_at(
        "[simulator]\noverload_status = 404",
        "simulator.overload_status",
        "429 or 503",
    );
    issue_at("[simulator]\nbogus = 1", "simulator.bogus", "unknown field");
    let c = load_text("[simulator]\nseed = 9").expect("loads");
    assert_eq!(c.simulator.seed, 9);
}

#[test]
fn a_methods_shape_names_the_keys_its_call_graph_uses() {
    let shape = |name| {
        MethodConfig {
            name,
            k: 5,
            n: 3,
            m: 2,
            iterations: 4,
            epsilon: 0.25,
            ..MethodConfig::default()
        }
        .shape()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
    };
    assert_eq!(shape(MethodName::Tmas), "n=3 m=2 iterations=4 epsilon=0.25");
    assert_eq!(shape(MethodName::VerifyRefine), "n=3 m=2 iterations=4");
    assert_eq!(shape(MethodName::MajorityVote), "k=5 iterations=4");
    for name in [MethodName::SelfRefine, MethodName::Pacore, MethodName::Rse] {
        assert_eq!(shape(name), "n=3 iterations=4", "{name:?}");
    }
}
