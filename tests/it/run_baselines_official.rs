//! The baselines' released settings on the simulator, as a user runs them: the RSE preset
//! (`config/rse-official.toml`) sends its attempts a system message with the bank and the
//! question alone, samples with top_k 20 and 38,912 tokens, de-duplicates by embeddings
//! on its embeddings server, and a run without such a server says at start that it falls
//! back to the lexical rule, as an experiment does for each such variant.

use std::path::Path;

use crate::support::cli::*;

/// (role, iteration, request summary) of every call stored in `run_dir`.
fn stored_requests(run_dir: &Path) -> Vec<(String, u32, serde_json::Value)> {
    let conn = read_store(run_dir);
    let mut stmt = conn
        .prepare("SELECT role, iteration, request_json FROM calls")
        .expect("query");
    stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, u32>(1)?,
            r.get::<_, String>(2)?,
        ))
    })
    .expect("rows")
    .map(|row| {
        let (role, it, json) = row.expect("row");
        (role, it, serde_json::from_str(&json).expect("request json"))
    })
    .collect()
}

/// `tmas run` of the preset against `sim`, 2 problems, N = 2, T = 3, plus `extra` flags.
fn run_preset(sim: &Sim, dir: &Path, extra: &[&str]) -> std::process::Output {
    let url = format!("{}/v1", sim.root);
    let sets = [
        format!("endpoints.local.base_url=\"{url}\""),
        format!("endpoints.embed.base_url=\"{url}\""),
        format!("endpoints.judge.base_url=\"{url}\""),
        "run.limit=2".into(),
        "method.n=2".into(),
        "method.iterations=3".into(),
        "judge.enabled=false".into(),
    ];
    let mut args: Vec<String> = vec![
        "run".into(),
        "-c".into(),
        "config/rse-official.toml".into(),
        "--dataset".into(),
        dataset().display().to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--progress-every".into(),
        "0".into(),
        "--no-preflight".into(),
    ];
    for s in &sets {
        args.push("--set".into());
        args.push(s.clone());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    tmas(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn the_rse_preset_runs_as_released_and_says_when_it_falls_back_to_lexical() {
    let sim = Sim::start(0, 0);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("official");
    let out = run_preset(&sim, &dir, &[]);
    assert!(out.status.success(), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("lexically"), "{stderr}");

    let calls = stored_requests(&dir);
    let roles_of = |req: &serde_json::Value| -> Vec<String> {
        req["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["role"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let mut with_bank = 0;
    for (role, it, req) in &calls {
        match role.as_str() {
            "solution" | "extraction" => {
                assert_eq!(req["top_k"], 20, "{role} it{it}: {req}");
                assert_eq!(req["max_tokens"], 38912, "{role} it{it}: {req}");
                // Stored as the f32 sent.
                let t = req["temperature"].as_f64().expect("temperature");
                assert!((t - 0.6).abs() < 1e-6, "{role} it{it}: {req}");
            }
            "embedding" => {}
            other => panic!("unexpected role {other}"),
        }
        if role == "solution" && *it > 0 {
            // From It1 on the bank is there: system message, then the question alone.
            assert_eq!(roles_of(req), ["system", "user"], "it{it}: {req}");
            with_bank += 1;
        }
        if role == "solution" && *it == 0 {
            assert_eq!(roles_of(req), ["user"], "{req}");
        }
    }
    assert_eq!(
        with_bank,
        2 * 2 * 2,
        "two problems, two attempts, It1 and It2"
    );
    assert!(
        calls.iter().any(|(role, _, _)| role == "embedding"),
        "the preset de-duplicates by embeddings on its embeddings server"
    );

    // Without an embeddings server of its own, the run warns at start and makes no
    // embeddings call.
    let lexical = tmp.path().join("lexical");
    let out = run_preset(
        &sim,
        &lexical,
        &["--set", "roles.embedding.group=\"default\""],
    );
    assert!(out.status.success(), "{}", show(&out));
    let stderr = text(&out.stderr);
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("warning: RSE de-duplicates its bank lexically"))
        .unwrap_or_else(|| panic!("no warning in:\n{stderr}"));
    assert!(
        warning.contains("no embeddings server is configured"),
        "{warning}"
    );
    assert!(
        !stored_requests(&lexical)
            .iter()
            .any(|(role, _, _)| role == "embedding")
    );
}

#[test]
fn an_experiment_says_at_start_which_rse_variant_falls_back_to_lexical() {
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), "embedded-sim", 1, 2);
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        "name = \"rse-check\"\nconfig = \"config.toml\"\n\n\
         [[variant]]\nname = \"lexical\"\nset = { \"method.name\" = \"rse\" }\n\n\
         [[variant]]\nname = \"refine\"\nset = { \"method.name\" = \"self-refine\" }\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let out = tmas(&[
        "experiment",
        path_arg(&exp),
        "--out",
        path_arg(&out_dir),
        "--progress-every",
        "0",
        "--set",
        "judge.enabled=false",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: variant"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with("warning: variant lexical: RSE de-duplicates its bank lexically"),
        "{stderr}"
    );
}
