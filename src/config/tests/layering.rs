//! Precedence: defaults < file < environment < command line; errors name their layer.

use super::*;

fn load_layers(
    file: &str,
    env_pairs: &[(&str, &str)],
    sets: &[&str],
) -> Result<Config, ConfigErrors> {
    let cli: Vec<CliOverride> = sets.iter().map(|s| CliOverride::set(*s)).collect();
    load_str(
        &format!("{file}\n{ENDPOINT}"),
        "t.toml",
        &env(env_pairs),
        &cli,
    )
}

#[test]
fn each_layer_beats_the_one_below() {
    let file = "[method]\nn = 4\nm = 4\niterations = 4\n";
    let env = [("TMAS_METHOD__M", "5"), ("TMAS_METHOD__ITERATIONS", "5")];
    let c = load_layers(file, &env, &["method.iterations=6"]).expect("loads");
    assert_eq!(c.method.epsilon, 0.2, "default");
    assert_eq!(c.method.n, 4, "file beats default");
    assert_eq!(c.method.m, 5, "env beats file");
    assert_eq!(c.method.iterations, 6, "CLI beats env");
}

#[test]
fn later_cli_overrides_win() {
    let c = load_layers("", &[], &["run.seed=1", "run.seed=2"]).expect("loads");
    assert_eq!(c.run.seed, 2);
}

#[test]
fn env_reaches_nested_tables_and_ignores_other_tmas_vars() {
    let env = [
        ("TMAS_API_KEY", "sk-secret"),
        ("TMAS_ROLES__SOLUTION__TEMPERATURE", "0.7"),
        ("TMAS_ENDPOINTS__LOCAL__MAX_IN_FLIGHT", "16"),
        ("TMAS_RUN__DATASET", "data/x.jsonl"),
    ];
    let c = load_layers("", &env, &[]).expect("loads");
    assert_eq!(c.roles[Role::Solution].temperature, 0.7);
    assert_eq!(c.endpoints["local"].max_in_flight, 16);
    assert_eq!(
        c.run.dataset.as_deref(),
        Some(std::path::Path::new("data/x.jsonl"))
    );
}

#[test]
fn env_error_names_the_variable() {
    let errs = load_layers("", &[("TMAS_METHOD__EPSILON", "1.5")], &[]).expect_err("range");
    assert_eq!(
        errs.to_string(),
        "environment TMAS_METHOD__EPSILON: method.epsilon: must be within [0, 1], got 1.5"
    );
    let errs = load_layers("", &[("TMAS_METHOD__EPSILOM", "0.5")], &[]).expect_err("typo");
    let i = errs.iter().next().expect("issue");
    assert_eq!(i.origin, "environment TMAS_METHOD__EPSILOM");
    assert_eq!(i.path, "method.epsilom");
}

#[test]
fn cli_error_names_the_flag_and_key() {
    let errs = load_layers(
        "[method]\nn = 4",
        &[("TMAS_METHOD__N", "3")],
        &["method.n=0"],
    )
    .expect_err("n = 0");
    assert_eq!(
        errs.to_string(),
        "--set method.n: method.n: must be at least 1, got 0"
    );
    let errs = load_layers("", &[], &["method.n=\"many\""]).expect_err("type");
    assert!(
        errs.to_string()
            .starts_with("--set method.n: method.n: invalid type"),
        "{errs}"
    );
}

#[test]
fn file_error_is_not_blamed_on_an_unrelated_override() {
    let errs = load_layers(
        "[method]\nn = 0\n",
        &[("TMAS_METHOD__M", "3")],
        &["run.seed=1"],
    )
    .expect_err("n = 0");
    assert_eq!(
        errs.to_string(),
        "t.toml:2:5: method.n: must be at least 1, got 0"
    );
}

#[test]
fn convenience_flags_come_after_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, ENDPOINT).expect("write");
    let args = ConfigArgs {
        config: path,
        set: vec!["run.seed=3".into(), "method.n=2".into()],
        seed: Some(7),
        dataset: Some("data/with space.jsonl".into()),
        epsilon: Some(0.5),
        ..ConfigArgs::default()
    };
    let c = args.load_with_env(&[], &Default::default()).expect("loads");
    assert_eq!(c.run.seed, 7);
    assert_eq!(c.method.n, 2);
    assert_eq!(c.method.epsilon, 0.5);
    assert_eq!(
        c.run.dataset.as_deref(),
        Some(std::path::Path::new("data/with space.jsonl"))
    );
    let bad = ConfigArgs {
        epsilon: Some(2.0),
        ..args
    };
    let errs = bad
        .load_with_env(&[], &Default::default())
        .expect_err("range");
    assert!(
        errs.to_string().starts_with("--epsilon: method.epsilon:"),
        "{errs}"
    );
}
