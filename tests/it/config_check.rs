//! `tmas config check` as a user runs it: the presets pass, an invalid file fails with
//! exit status 2 and every error names the file, line, key path and reason.

use std::path::Path;
use std::process::Output;

use crate::support::cli::{command, text};

fn tmas_config_check(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(&["config", "check"]);
    cmd.arg(file).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the tmas binary")
}

#[test]
fn presets_pass() {
    for preset in [
        "config/paper.toml",
        "config/demo.toml",
        "config/rse-official.toml",
        "config/pacore-official.toml",
    ] {
        let out = tmas_config_check(Path::new(preset), &[], &[]);
        assert!(
            out.status.success(),
            "{preset}: status {:?}\n{}",
            out.status,
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("[roles.verification]"),
            "{preset}:\n{stdout}"
        );
        assert!(stdout.contains("[resilience]"), "{preset}:\n{stdout}");
    }
}

#[test]
fn paper_preset_resolves_to_the_released_defaults() {
    let out = tmas_config_check(Path::new("config/paper.toml"), &[], &[]);
    let stdout = text(&out.stdout);
    for line in [
        "n = 8",
        "m = 8",
        "iterations = 20",
        "epsilon = 0.2",
        "max_in_flight = 800",
        "max_concurrent_problems = 100",
        "max_tokens = 128000",
        "top_p = 0.95",
        "base_url = \"http://127.0.0.1:8000/v1\"",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing `{line}` in:\n{stdout}"
        );
    }
}

#[test]
fn baseline_presets_resolve_to_the_released_settings_without_warnings() {
    for (preset, lines) in [
        (
            "config/rse-official.toml",
            &[
                "name = \"rse\"",
                "rse_dedup = \"embeddings\"",
                "embedding_threshold = 0.8",
                "rse_extraction_attempts = 6",
                "temperature = 0.6",
                "top_k = 20",
                "max_tokens = 38912",
            ][..],
        ),
        (
            "config/pacore-official.toml",
            &["name = \"pacore\"", "top_p = 1.0", "max_attempts = 5"][..],
        ),
    ] {
        let out = tmas_config_check(Path::new(preset), &[], &[]);
        assert!(out.status.success(), "{preset}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("warning"), "{preset}:\n{stderr}");
        let stdout = text(&out.stdout);
        for line in lines {
            assert!(
                stdout.lines().any(|l| l == *line),
                "{preset}: missing `{line}` in:\n{stdout}"
            );
        }
    }
}

#[test]
fn invalid_file_fails_with_key_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[method]\nepsilon = 1.5\n\
         [endpoints.local]\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\n\
         [roles.solution]\ntemperature = \"hot\"\n",
    )
    .expect("write");
    let out = tmas_config_check(&file, &[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    let f = file.display().to_string();
    let expected = [
        format!(
            "error: {f}:7:15: roles.solution.temperature: invalid type: string \"hot\", expected f64"
        ),
        format!("error: {f}:2:11: method.epsilon: must be within [0, 1], got 1.5"),
    ];
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines, expected, "stderr:\n{stderr}");
}

#[test]
fn overrides_and_environment_are_applied_and_named() {
    let paper = Path::new("config/paper.toml");
    let out = tmas_config_check(paper, &["--set", "method.n=3"], &[("TMAS_METHOD__M", "2")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.lines().any(|l| l == "n = 3"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "m = 2"), "{stdout}");

    let out = tmas_config_check(paper, &[], &[("TMAS_METHOD__EPSILON", "1.5")]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "error: environment TMAS_METHOD__EPSILON: method.epsilon: must be within [0, 1], got 1.5"
    );
}

#[test]
fn api_key_is_never_printed() {
    let paper = Path::new("config/paper.toml");
    let out = tmas_config_check(
        paper,
        &["--set", "endpoints.local.api_key_env=TMAS_TEST_KEY"],
        &[("TMAS_TEST_KEY", "sk-do-not-print-me")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("api_key_env = \"TMAS_TEST_KEY\""), "{all}");
    assert!(!all.contains("sk-do-not-print-me"));
}
