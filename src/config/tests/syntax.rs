//! Parse and type errors: file, line/column, key path and reason.

use super::*;

#[test]
fn wrong_type_names_file_line_column_and_key_path() {
    let text = "[roles.solution]\ntemperature = \"hot\"\n";
    let errs = load_text(text).expect_err("wrong type");
    assert_eq!(
        errs.to_string(),
        "t.toml:2:15: roles.solution.temperature: invalid type: string \"hot\", expected f64"
    );
}

#[test]
fn unknown_keys_are_rejected_with_their_path() {
    let errs = load_text("[method]\nepsilom = 0.3\n").expect_err("typo");
    let i = errs.iter().next().expect("one issue");
    assert_eq!(i.path, "method.epsilom", "{errs}");
    assert!(i.message.contains("unknown field `epsilom`"), "{i}");
    assert!(i.origin.starts_with("t.toml:2:"), "{i}");

    let errs = load_text("[nonsense]\nx = 1\n").expect_err("unknown section");
    assert!(errs.has_path("nonsense"), "{errs}");

    let errs = load_text("[roles.critic]\ntemperature = 1.0\n").expect_err("unknown role");
    assert!(errs.has_path("roles.critic"), "{errs}");
    let i = errs.iter().next().expect("one issue");
    assert!(i.message.contains("unknown role `critic`"), "{i}");
    assert!(i.message.contains("critique"), "{i}");
    assert!(i.origin.starts_with("t.toml:1:"), "{i}");
}

#[test]
fn several_type_errors_are_all_reported() {
    let text = "[method]\nn = \"eight\"\nfoo = 1\n[run]\nseed = -1\n[roles.judge]\ntop_p = 0\n";
    let errs = load_text(text).expect_err("errors");
    for p in ["method.n", "method.foo", "run.seed", "roles.judge.top_p"] {
        assert!(errs.has_path(p), "missing {p} in:\n{errs}");
    }
}

#[test]
fn bad_enum_value_lists_the_choices() {
    let i = issue_at(
        "[run]\nadmission = \"greedy\"",
        "run.admission",
        "unknown variant `greedy`",
    );
    assert!(i.message.contains("work-conserving"), "{i}");
}

#[test]
fn every_admission_and_call_priority_reads_by_its_name() {
    for kind in AdmissionKind::ALL {
        let c = load_text(&format!("[run]\nadmission = \"{kind}\"")).expect("loads");
        assert_eq!(c.run.admission, kind);
    }
    for priority in CallPriority::ALL {
        let c = load_text(&format!("[run]\ncall_priority = \"{priority}\"")).expect("loads");
        assert_eq!(c.run.call_priority, priority);
    }
    // The names as written in config files (and in the resolved config a run stores).
    let c = load_text("[run]\nadmission = \"work-conserving\"\ncall_priority = \"latency-aware\"")
        .expect("loads");
    assert_eq!(c.run.admission, AdmissionKind::WorkConserving);
    assert_eq!(c.run.call_priority, CallPriority::LatencyAware);
    let text = c.to_toml_string().expect("serializes");
    assert!(text.contains("call_priority = \"latency-aware\""), "{text}");
    let i = issue_at(
        "[run]\ncall_priority = \"fifo\"",
        "run.call_priority",
        "unknown variant `fifo`",
    );
    assert!(i.message.contains("latency-aware"), "{i}");
}

#[test]
fn missing_required_endpoint_key() {
    let errs = load_str(
        "[endpoints.e]\nbase_url = \"http://127.0.0.1:1/v1\"\n",
        "t.toml",
        &[],
        &[],
    )
    .expect_err("model missing");
    let i = errs.iter().next().expect("an issue");
    assert_eq!(i.path, "endpoints.e");
    assert!(i.message.contains("missing field `model`"), "{i}");
    assert_eq!(i.origin, "t.toml:1:1");
}

#[test]
fn toml_syntax_error_has_line_and_column() {
    let errs = load_str("[method]\nn = = 3\n", "bad.toml", &[], &[]).expect_err("syntax");
    let i = errs.iter().next().expect("an issue");
    assert!(i.origin.starts_with("bad.toml:2:"), "{i}");
    assert!(i.message.starts_with("TOML syntax error"), "{i}");
    assert!(!i.to_string().contains('\n'), "one line per error: {i}");
}

#[test]
fn unreadable_file_is_an_error_naming_it() {
    let errs = load(std::path::Path::new("/no/such/config.toml"), &[], &[]).expect_err("missing");
    assert!(
        errs.to_string()
            .starts_with("/no/such/config.toml: cannot read"),
        "{errs}"
    );
}

#[test]
fn printed_config_loads_back_identically() {
    let c =
        load_text("[method]\nn = 3\n[groups]\nbig = [\"local\"]\n[roles.judge]\ngroup = \"big\"")
            .expect("loads");
    let text = c.to_toml_string().expect("serializes");
    let back = Config::from_toml_str(&text, "printed").expect("reloads");
    assert_eq!(back, c);
    assert!(text.contains("top_p = 0.95"), "{text}");
}

#[test]
fn an_api_key_in_the_file_gets_a_hint_and_is_not_echoed() {
    let text = "[endpoints.e]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\
                api_key = \"sk-secret-123\"\n";
    let errs = load_str(text, "t.toml", &[], &[]).expect_err("api_key is not a key");
    let s = errs.to_string();
    assert!(
        s.contains("endpoints.e.api_key: unknown field `api_key`"),
        "{s}"
    );
    assert!(s.contains("name that variable in api_key_env"), "{s}");
    assert!(!s.contains("sk-secret-123"), "{s}");
}

#[test]
fn a_stored_config_names_its_method_and_older_ones_are_tmas() {
    use crate::config::MethodName;
    let rse = "[run]\nseed = 1\n\n[method]\nname = \"rse\"\nn = 4\n";
    assert_eq!(MethodName::of_stored_config(rse), MethodName::Rse);
    assert_eq!(
        MethodName::of_stored_config("[method]\nn = 4\n"),
        MethodName::Tmas
    );
    assert_eq!(MethodName::of_stored_config("not toml ["), MethodName::Tmas);
}
