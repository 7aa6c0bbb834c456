//! From config to client settings: keys, groups, the embedded simulator, warnings.

use super::*;

const TWO: &str = r#"
[endpoints.a]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
api_key_env = "TEST_KEY_A"
[endpoints.b]
base_url = "embedded-sim"
model = "sim"
tokenizer = "Cargo.toml"
[groups]
fast = ["b"]
[roles.judge]
group = "fast"
"#;

fn two() -> Config {
    Config::from_toml_str(TWO, "two.toml").expect("valid")
}

#[test]
fn keys_resolve_from_env_and_never_print() {
    let c = two();
    let cc = c
        .client_config(&env(&[("TEST_KEY_A", "sk-very-secret")]))
        .expect("resolves");
    let a = cc.endpoints.iter().find(|e| &*e.name == "a").expect("a");
    assert_eq!(
        a.api_key.as_ref().map(|k| k.expose()),
        Some("sk-very-secret")
    );
    assert!(!format!("{cc:?}").contains("sk-very-secret"));
    assert!(!c.to_toml_string().expect("toml").contains("sk-very-secret"));
}

#[test]
fn missing_key_variable_is_an_error_naming_endpoint_and_variable() {
    let errs = two().client_config(&[]).expect_err("unset");
    assert_eq!(
        errs.to_string(),
        "endpoints.a.api_key_env: environment variable TEST_KEY_A (API key of endpoint `a`) \
         is not set"
    );
    let errs = two()
        .client_config(&env(&[("TEST_KEY_A", "")]))
        .expect_err("empty");
    assert!(errs.has_path("endpoints.a.api_key_env"));
}

#[test]
fn groups_are_named_by_role() {
    let cc = two()
        .client_config(&env(&[("TEST_KEY_A", "k")]))
        .expect("resolves");
    let group = |role: &str| -> Vec<String> {
        let g = cc
            .groups
            .iter()
            .find(|(n, _)| &**n == role)
            .expect("role group");
        g.1.iter().map(|s| s.to_string()).collect()
    };
    assert_eq!(cc.groups.len(), crate::role::Role::ALL.len());
    assert_eq!(
        group("solution"),
        ["a", "b"],
        "implicit default = every endpoint"
    );
    assert_eq!(group("judge"), ["b"]);
    assert_eq!(cc.global_max_in_flight, 800);
    let b = cc.endpoints.iter().find(|e| &*e.name == "b").expect("b");
    assert!(matches!(
        &b.token_estimate,
        tmas_client::TokenEstimate::Tokenizer { path } if path.ends_with("Cargo.toml")
    ));
    let a = cc.endpoints.iter().find(|e| &*e.name == "a").expect("a");
    assert_eq!(
        a.token_estimate,
        tmas_client::TokenEstimate::Bytes {
            bytes_per_token: 3.0
        }
    );
}

#[test]
fn declared_default_group_wins_over_the_implicit_one() {
    let text = format!("{TWO}\n[groups.default]\n");
    // `[groups.default]` as a table is a type error: groups hold arrays.
    assert!(Config::from_toml_str(&text, "t").is_err());
    let text = TWO.replace("fast = [\"b\"]", "fast = [\"b\"]\ndefault = [\"a\"]");
    let c = Config::from_toml_str(&text, "t").expect("valid");
    assert_eq!(c.role_endpoints(Role::Solution), ["a"]);
}

#[test]
fn embedded_sim_url_is_substituted() {
    let mut c = two();
    assert!(c.uses_embedded_sim());
    assert_eq!(c.with_embedded_base_url("http://127.0.0.1:4321/v1"), 1);
    assert_eq!(c.endpoints["b"].base_url, "http://127.0.0.1:4321/v1");
    assert_eq!(c.endpoints["a"].base_url, "http://127.0.0.1:8000/v1");
    assert!(!c.uses_embedded_sim());
}

#[test]
fn warnings_cover_unset_keys_and_clamped_max_tokens() {
    let mut c = two();
    c.endpoints.get_mut("b").expect("b").context_window = 4096;
    let w = c.warnings(&[]);
    assert!(
        w.iter().any(|i| i.path == "endpoints.a.api_key_env"),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|i| i.path == "roles.judge.max_tokens" && i.message.contains("3840")),
        "{w:?}"
    );
    assert!(
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .all(|i| i.path != "endpoints.a.api_key_env")
    );
}

#[test]
fn rse_dedup_set_for_a_method_that_ignores_it_is_warned_about() {
    let warned = |extra: &str, path: &str| {
        let c = Config::from_toml_str(&format!("{TWO}\n{extra}"), "t").expect("valid");
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .into_iter()
            .filter(|i| i.path == path)
            .map(|i| i.message)
            .collect::<Vec<_>>()
    };
    let w = warned("[method]\nrse_dedup = \"embeddings\"", "method.rse_dedup");
    assert!(
        w[0].contains("no effect with method.name = \"tmas\""),
        "{w:?}"
    );
    let rse = "[method]\nname = \"rse\"\nrse_dedup = \"embeddings\"";
    assert!(warned(rse, "method.rse_dedup").is_empty());
}

#[test]
fn rse_dedup_auto_takes_embeddings_only_from_a_group_of_their_own() {
    let load = |extra: &str| {
        Config::from_toml_str(&format!("{TWO}\n[method]\nname = \"rse\"\n{extra}"), "t")
            .expect("valid")
    };
    // Every role on the default group: no embeddings server, the lexical rule, and a run
    // is told so.
    let c = load("");
    assert_eq!(
        c.method.rse_dedup,
        BankDedup::Jaccard,
        "resolved when loaded"
    );
    let notice = c.lexical_dedup_notice().expect("a notice");
    assert!(
        notice.contains("no embeddings server is configured"),
        "{notice}"
    );
    assert!(
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .any(|i| i.path == "method.rse_dedup" && i.message == notice)
    );
    // The embedding role on a group of its own: the released rule, no notice.
    let own = "[roles.embedding]\ngroup = \"fast\"";
    let c = load(own);
    assert_eq!(c.method.rse_dedup, BankDedup::Embeddings);
    assert_eq!(c.lexical_dedup_notice(), None);
    // Asked for by name, the lexical rule still gets its notice, saying why.
    let c = load(&format!("rse_dedup = \"jaccard\"\n{own}"));
    assert_eq!(c.method.rse_dedup, BankDedup::Jaccard);
    assert!(
        c.lexical_dedup_notice()
            .is_some_and(|n| n.contains("method.rse_dedup = \"jaccard\""))
    );
    // A method without a bank gets none.
    let c =
        Config::from_toml_str(&format!("{TWO}\n[method]\nname = \"pacore\""), "t").expect("valid");
    assert_eq!(c.lexical_dedup_notice(), None);
    // The stored config names the rule used, so a resume reads the same.
    let stored = load(own).to_toml_string().expect("toml");
    assert!(stored.contains("rse_dedup = \"embeddings\""), "{stored}");
}

#[test]
fn bank_dedup_auto_reads_meaning_only_with_an_embeddings_server_and_says_so_without() {
    let load = |extra: &str| {
        Config::from_toml_str(&format!("{TWO}\n[method]\n{extra}"), "t").expect("valid")
    };
    // TMAS with every role on the default group: the lexical rule, and a run is told why.
    let c = load("");
    assert_eq!(
        c.method.bank_dedup,
        BankDedup::Jaccard,
        "resolved when loaded"
    );
    let notice = c.lexical_dedup_notice().expect("a notice");
    assert!(
        notice.starts_with("TMAS de-duplicates its banks lexically")
            && notice.contains("no embeddings server is configured"),
        "{notice}"
    );
    assert!(
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .any(|i| i.path == "method.bank_dedup" && i.message == notice)
    );
    // An embeddings server of its own: the meaning-aware rule, no notice; the stored
    // config names it.
    let own = "[roles.embedding]\ngroup = \"fast\"";
    let c = load(&format!("\n{own}"));
    assert_eq!(c.method.bank_dedup, BankDedup::Embeddings);
    assert!(c.method.uses_embeddings());
    assert!(c.method.roles().contains(&Role::Embedding));
    assert_eq!(c.lexical_dedup_notice(), None);
    let stored = c.to_toml_string().expect("toml");
    assert!(stored.contains("bank_dedup = \"embeddings\""), "{stored}");
    // Chosen by name beside a server, the lexical rule (the released TMAS's) needs no
    // warning.
    let c = load(&format!("bank_dedup = \"jaccard\"\n{own}"));
    assert_eq!(c.method.bank_dedup, BankDedup::Jaccard);
    assert!(!c.method.roles().contains(&Role::Embedding));
    assert_eq!(c.lexical_dedup_notice(), None);
    // Asked of a method that has no such bank, it is named as without effect.
    let c = load("name = \"self-refine\"\nbank_dedup = \"embeddings\"");
    assert!(
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .any(|i| i.path == "method.bank_dedup" && i.message.contains("only tmas reads it"))
    );
}

#[test]
fn role_top_k_reaches_the_wire_only_when_set() {
    assert_eq!(two().role(Role::Solution).sampling().top_k, None);
    let c =
        Config::from_toml_str(&format!("{TWO}\n[roles.solution]\ntop_k = 20"), "t").expect("valid");
    assert_eq!(c.role(Role::Solution).sampling().top_k, Some(20));
    let err = Config::from_toml_str(&format!("{TWO}\n[roles.solution]\ntop_k = 0"), "t")
        .expect_err("top_k 0");
    assert!(
        err.iter().any(|i| i.path == "roles.solution.top_k"),
        "{err:?}"
    );
}

#[test]
fn role_sampling_is_the_wire_type() {
    let s = two().role(Role::Summary).sampling();
    assert_eq!((s.temperature, s.top_p, s.max_tokens), (0.6, 0.95, 128_000));
}

#[test]
fn embedded_sim_model_mismatch_is_a_warning() {
    let c = two();
    let w = c.warnings(&env(&[("TEST_KEY_A", "k")]));
    assert!(
        w.iter()
            .any(|i| i.path == "endpoints.b.model" && i.message.contains("tmas-sim")),
        "{w:?}"
    );
    let mut c = c;
    c.endpoints.get_mut("b").expect("b").model = c.simulator.model.clone();
    assert!(
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .all(|i| i.path != "endpoints.b.model")
    );
}

#[test]
fn tmas_params_follow_the_config() {
    let text = format!(
        "{TWO}\n[method]\nn = 3\nm = 2\nmax_rollouts = 5\n[run]\nseed = 11\n\
         [roles.summary]\ntemperature = 0.3\n"
    );
    let mut c = Config::from_toml_str(&text, "t").expect("valid");
    let p = c.tmas_params();
    assert_eq!((p.n, p.m, p.iterations, p.seed), (3, 2, 20, 11));
    assert_eq!(p.max_rollouts, Some(5));
    assert_eq!(p.max_verification_attempts, 4, "derived 2 × M");
    assert_eq!(p.roles[Role::Summary].sampling.temperature, 0.3);
    assert_eq!(p.roles[Role::Judge].sampling.max_tokens, 32_768);
    assert!(
        !p.roles[Role::Solution].stream,
        "endpoints default to stream = false"
    );
    c.endpoints.get_mut("b").expect("b").stream = true;
    assert!(
        c.role_call(Role::Judge).stream,
        "judge group = [b], all streaming"
    );
    assert!(
        !c.role_call(Role::Solution).stream,
        "mixed group does not stream"
    );
}

#[test]
fn prompt_overrides_merge_roles_and_prompts_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.md");
    let b = dir.path().join("b.md");
    std::fs::write(&a, "x").expect("write");
    std::fs::write(&b, "y").expect("write");
    let text = format!(
        "{TWO}\n[prompts]\nsolution_refine = {:?}\n[roles.verification]\nprompt = {:?}\n",
        a.display().to_string(),
        b.display().to_string()
    );
    let c = Config::from_toml_str(&text, "t").expect("valid");
    let o = c.prompt_overrides();
    assert_eq!(o.get("solution_refine"), Some(&a));
    assert_eq!(o.get("verification"), Some(&b));
    assert_eq!(o.len(), 2);
}

#[test]
fn prompts_table_rules() {
    let errs = Config::from_toml_str(
        &format!("{TWO}\n[prompts]\nsolutoin = \"Cargo.toml\"\n"),
        "t",
    )
    .expect_err("unknown template");
    assert!(
        errs.to_string()
            .contains("prompts.solutoin: unknown template `solutoin`"),
        "{errs}"
    );
    let errs = Config::from_toml_str(
        &format!("{TWO}\n[prompts]\nrollout = \"/no/such.md\"\n"),
        "t",
    )
    .expect_err("missing file");
    assert!(errs.has_path("prompts.rollout"), "{errs}");
    let text = format!(
        "{TWO}\n[prompts]\nverification = \"Cargo.toml\"\n[roles.verification]\nprompt = \"Cargo.toml\"\n"
    );
    let errs = Config::from_toml_str(&text, "t").expect_err("twice");
    assert!(errs.to_string().contains("set twice"), "{errs}");
}

#[test]
fn a_judge_on_the_solution_roles_endpoint_and_model_is_a_warning() {
    let judged_by_itself = |c: &Config| {
        c.warnings(&env(&[("TEST_KEY_A", "k")]))
            .iter()
            .any(|i| i.path == "roles.judge.group" && i.message.contains("grades its own"))
    };
    // The judge's group `fast` = [b]; the solution role's default group holds a and b.
    assert!(judged_by_itself(&two()));
    // Separate groups, but two endpoint names for the same server and model.
    let same_server = r#"
[endpoints.a]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
[endpoints.j]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
[groups]
default = ["a"]
judges = ["j"]
[roles.judge]
group = "judges"
"#;
    let mut c = Config::from_toml_str(same_server, "s.toml").expect("valid");
    assert!(judged_by_itself(&c));
    // Another model on that server: no warning; nor with the LLM judge off.
    c.endpoints.get_mut("j").expect("j").model = "deepseek".into();
    assert!(!judged_by_itself(&c));
    let mut off = two();
    off.judge.enabled = false;
    assert!(!judged_by_itself(&off));
}

#[test]
fn routing_is_per_group_and_reaches_each_roles_client_group() {
    use tmas_client::Routing;
    let text = format!("{TWO}[routing]\ndefault = \"prefix-affinity\"\nfast = \"least-load\"\n");
    let c = Config::from_toml_str(&text, "routing.toml").expect("valid");
    let cc = c
        .client_config(&env(&[("TEST_KEY_A", "k")]))
        .expect("resolves");
    let routing = |role: &str| {
        cc.routing
            .iter()
            .find(|(g, _)| &**g == role)
            .map(|(_, r)| *r)
    };
    assert_eq!(routing("solution"), Some(Routing::PrefixAffinity));
    assert_eq!(routing("verification"), Some(Routing::PrefixAffinity));
    assert_eq!(routing("judge"), Some(Routing::LeastLoad));
    // Round-trips through the printed config.
    let printed = c.to_toml_string().expect("toml");
    assert!(printed.contains("prefix-affinity"), "{printed}");

    let errs = Config::from_toml_str(&format!("{TWO}[routing]\nslow = \"least-load\"\n"), "x")
        .expect_err("unknown group");
    assert!(errs.has_path("routing.slow"), "{errs}");
    assert!(
        Config::from_toml_str(&format!("{TWO}[routing]\nfast = \"round-robin\"\n"), "x").is_err()
    );
}
