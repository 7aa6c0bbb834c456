//! Crash and interrupt, then resume: the `tmas` binary against a `tmas sim-server`
//! process. The resumed run must end exactly where an uninterrupted one does (same
//! candidates, scores, banks, judge verdicts, Pass@1), and re-send at most the calls that
//! were in flight when it stopped (counted at the simulator). An interrupted run's table
//! and export say they are partial.

use crate::support::cli::*;

const PROBLEMS: usize = 4;
const ITERATIONS: u32 = 3;

#[test]
fn sigkill_mid_run_then_resume_equals_an_uninterrupted_run() {
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, PROBLEMS, ITERATIONS);
    let base = baseline(&sim, &config, &tmp.path().join("uninterrupted"));

    reset(&sim);
    let dir = tmp.path().join("killed");
    let dir_s = dir.display().to_string();
    let mut child = spawn_fresh(&config, &dir);
    wait_for_stored(&dir, base.requests / 3, &mut child);
    // Freeze the orchestrator so nothing changes between counting and killing: requests
    // the simulator received minus calls committed = the calls in flight at the kill.
    signal(&child, libc::SIGSTOP);
    let in_flight_at_sim = sim.stats()["in_flight"].as_u64().unwrap_or(0);
    let received = sim.settled_requests();
    let stored = stored_calls(&dir);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let in_flight = received - stored;
    assert!(
        stored < base.requests,
        "the kill came too late to test anything"
    );

    let out = ok(
        tmas(&["run", "--resume", &dir_s, "--progress-every", "0"]),
        "resume after SIGKILL",
    );
    let total = sim.requests();
    let resent = total - base.requests;
    eprintln!(
        "baseline {} requests; at the kill: {received} received, {stored} stored, {in_flight} in flight ({in_flight_at_sim} per /sim/stats); after resume {total} ({resent} re-sent)",
        base.requests
    );
    assert!(
        resent <= in_flight,
        "re-sent {resent} calls but only {in_flight} were in flight at the kill"
    );
    assert!(out.contains("replayed from the store"), "{out}");
    assert_eq!(export(&dir), base.export, "resumed results differ");
    assert_eq!(export_csv(&dir), base.csv);
    let pass = std::fs::read_to_string(dir.join("pass_at_1.csv")).unwrap();
    assert_eq!(pass, base.csv);
    let results = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    assert_eq!(results.lines().count(), PROBLEMS, "each problem once");
}

#[test]
fn sigint_stops_gracefully_with_code_130_and_resume_finishes_without_resending() {
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, PROBLEMS, ITERATIONS);
    let base = baseline(&sim, &config, &tmp.path().join("uninterrupted"));

    reset(&sim);
    let dir = tmp.path().join("interrupted");
    let dir_s = dir.display().to_string();
    let mut child = spawn_fresh(&config, &dir);
    wait_for_stored(&dir, base.requests / 3, &mut child);
    signal(&child, libc::SIGINT);
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "interrupted; resume with: tmas run --resume {dir_s}"
        )),
        "{stderr}"
    );
    // The calls in flight were waited for and stored: nothing the simulator answered is lost.
    let received = sim.requests();
    assert_eq!(
        received,
        stored_calls(&dir),
        "every answered call is stored"
    );
    assert!(
        received < base.requests,
        "the signal came too late to test anything"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "interrupted");
    // The table printed says it covers the finished problems only.
    let stdout = text(&output.stdout);
    let partial_line = stdout
        .lines()
        .find(|l| l.starts_with("partial: "))
        .unwrap_or_else(|| panic!("no `partial:` line above the table: {stdout}"));
    assert!(
        partial_line.contains(&format!("of {PROBLEMS} problems unfinished (")),
        "{partial_line}"
    );
    assert!(
        partial_line.contains("each row covers only the problems that have its iteration judged"),
        "{partial_line}"
    );
    let table_at = stdout.find("iteration  pass@1").expect("the table");
    assert!(stdout.find("partial: ").unwrap() < table_at, "{stdout}");

    // Exporting the unfinished run is refused unless --partial, whose rows say so.
    let refused = tmas(&["export", &dir_s]);
    let message = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains("problems are unfinished") && message.contains("--partial"),
        "{message}"
    );
    assert!(refused.stdout.is_empty(), "nothing exported");
    let jsonl = ok(tmas(&["export", &dir_s, "--partial"]), "export --partial");
    let statuses: Vec<String> = jsonl
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["status"].to_string())
        .collect();
    assert_eq!(statuses.len(), PROBLEMS);
    assert!(statuses.iter().any(|s| s == "\"partial\""), "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|s| s == "\"partial\"" || s == "\"done\""),
        "{statuses:?}"
    );
    let csv = ok(
        tmas(&["export", &dir_s, "--format", "csv", "--partial"]),
        "export --format csv --partial",
    );
    let mut rows = csv.lines();
    assert!(rows.next().unwrap().ends_with(",status"), "{csv}");
    assert!(rows.all(|r| r.ends_with(",partial")), "{csv}");

    ok(
        tmas(&["run", "--resume", &dir_s, "--progress-every", "0"]),
        "resume after SIGINT",
    );
    assert_eq!(sim.requests(), base.requests, "no call was sent twice");
    assert_eq!(export(&dir), base.export, "resumed results differ");
    assert_eq!(export_csv(&dir), base.csv);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed");
}

/// `tmas experiment`: two variants sharing one in-flight budget, SIGKILLed mid-way and
/// resumed, give the same comparison table and budget as an uninterrupted experiment.
#[test]
fn sigkill_mid_experiment_then_resume_gives_the_same_report() {
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), "embedded-sim", 3, 3);
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        r#"
name = "kill-test"
config = "config.toml"
report_iterations = [0, 2]

[[variant]]
name = "TMAS"
set = { "method.name" = "tmas" }

[[variant]]
name = "V-R"
set = { "method.name" = "verify-refine" }
"#,
    )
    .unwrap();
    let exp_s = exp.display().to_string();
    let a = tmp.path().join("a");
    ok(
        tmas(&[
            "experiment",
            &exp_s,
            "--out",
            &a.display().to_string(),
            "--progress-every",
            "0",
        ]),
        "uninterrupted experiment",
    );
    let read = |dir: &std::path::Path, f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let total = stored_calls(&a.join("TMAS")) + stored_calls(&a.join("V-R"));

    let b = tmp.path().join("b");
    let b_s = b.display().to_string();
    let mut child = spawn_tmas(&["experiment", &exp_s, "--out", &b_s, "--progress-every", "0"]);
    wait_for_stored(
        &b.join("TMAS"),
        stored_calls(&a.join("TMAS")) / 3,
        &mut child,
    );
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let at_kill = stored_calls(&b.join("TMAS")) + stored_calls(&b.join("V-R"));
    assert!(at_kill < total, "the kill came too late to test anything");

    let out = ok(
        tmas(&["experiment", "--resume", &b_s, "--progress-every", "0"]),
        "experiment resume",
    );
    assert!(out.contains("| TMAS | tmas |"), "{out}");
    for f in ["comparison.csv", "comparison.md", "budget.csv"] {
        assert_eq!(
            read(&b, f),
            read(&a, f),
            "{f} differs after SIGKILL + resume"
        );
    }
    for f in ["pass_at_1.png", "pass_at_1_tokens.svg"] {
        assert!(b.join(f).is_file(), "{f} written");
    }
    let csv = read(&b, "comparison.csv");
    assert!(
        csv.lines().count() == 3 && csv.contains(",completed,"),
        "{csv}"
    );
}

/// Proof mode: a run SIGKILLed before any problem is judged and then resumed grades every
/// proof with the proof grader against the dataset's reference solution and grading
/// guidelines, exactly as an uninterrupted run does (the run store keeps that material;
/// without it a resumed run would grade against the short answer).
#[test]
fn sigkill_mid_proof_run_then_resume_grades_against_the_reference_proofs() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_proof_config(tmp.path(), "embedded-sim", 5, 2);
    let a = tmp.path().join("uninterrupted");
    ok(run_fresh(&config, &a), "uninterrupted proof run");
    let total = stored_calls(&a);
    let expected = judge_prompts(&a);
    // 5 problems × 2 iterations × N = 2 candidates × R = 2 grader repeats.
    assert_eq!(expected.len(), 5 * 2 * 2 * 2, "{:?}", expected.keys());

    let b = tmp.path().join("killed");
    let mut child = spawn_fresh(&config, &b);
    wait_for_stored(&b, total / 3, &mut child);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let judged_before_kill = judge_prompts(&b).len();
    assert!(
        judged_before_kill < expected.len(),
        "the kill came too late to test anything"
    );
    ok(
        tmas(&[
            "run",
            "--resume",
            &b.display().to_string(),
            "--progress-every",
            "0",
        ]),
        "resume of the proof run",
    );
    let resumed = judge_prompts(&b);
    assert_eq!(
        resumed.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(proof_dataset())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (key, prompt) in &resumed {
        assert_eq!(
            Some(prompt),
            expected.get(key),
            "{key}: the resumed run's grader prompt differs"
        );
        let row = rows
            .iter()
            .find(|r| key.starts_with(&format!("{}/", r["problem_id"].as_str().unwrap())))
            .unwrap_or_else(|| panic!("{key}: no dataset row"));
        for field in ["reference_solution", "grading_guidelines"] {
            let material = row[field].as_str().unwrap();
            assert!(
                prompt.contains(material),
                "{key}: {field} not in the grader prompt"
            );
        }
        assert!(prompt.contains("<proof>"), "{key}: not the proof grader");
    }
    assert_eq!(export(&b), export(&a), "resumed results differ");
}

/// `tmas experiment`: variants running at once share one model client per endpoint, so
/// the endpoint's `max_in_flight` caps the calls of all variants together (counted at the
/// simulator), not each variant's on its own.
#[test]
fn experiment_variants_share_each_endpoints_in_flight_cap() {
    const CAP: u64 = 2;
    let sim = Sim::start(0, 20);
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), &sim.root, 4, 2);
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        r#"
name = "shared-cap"
config = "config.toml"
report_iterations = [0, 1]

[[variant]]
name = "TMAS"
set = { "method.name" = "tmas" }

[[variant]]
name = "V-R"
set = { "method.name" = "verify-refine" }

[[variant]]
name = "MV"
set = { "method.name" = "majority-vote", "method.iterations" = 1 }
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    ok(
        tmas(&[
            "experiment",
            &exp.display().to_string(),
            "--out",
            &out.display().to_string(),
            "--progress-every",
            "0",
            "--set",
            &format!("endpoints.sim.max_in_flight={CAP}"),
        ]),
        "experiment with a per-endpoint cap",
    );
    let stats = sim.stats();
    let peak = stats["peak_in_flight"].as_u64().unwrap();
    let stored: u64 = ["TMAS", "V-R", "MV"]
        .iter()
        .map(|v| stored_calls(&out.join(v)))
        .sum();
    assert_eq!(sim.requests(), stored, "every request is one stored call");
    // Without a shared client each of the three variants would hold up to CAP calls.
    assert!(
        peak <= CAP,
        "{peak} requests in flight at the endpoint, its cap is {CAP}"
    );
    assert_eq!(
        peak, CAP,
        "the variants kept the endpoint busy up to its cap"
    );
}
