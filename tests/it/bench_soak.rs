//! `tmas bench soak` scaled down to seconds: simulator processes behind one endpoint
//! group, a clean run and runs under fault schedules compared call by call. The command
//! must lose no call, give every answer and the Pass@1 table of its clean run, keep the
//! cap, and exit 1 otherwise. Counts and structure only: no timing is asserted.

use crate::support::cli::{command, only_result};

/// Runs `tmas bench soak ARGS` in `dir`; asserts it succeeded and returns its stdout.
fn bench_soak(dir: &std::path::Path, args: &[&str]) -> String {
    let out = command(&["--log", "warn", "bench", "soak"])
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tmas bench soak");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// Under overload (503 + Retry-After), a request timeout, SIGKILL and restart of each
/// simulator, 500s, dropped connections, hangs and malformed bodies.
#[test]
fn bench_soak_under_the_full_fault_schedule_loses_nothing_and_matches_the_clean_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stdout = bench_soak(
        dir.path(),
        &[
            "--problems",
            "10",
            "--candidates",
            "4",
            "--verifications",
            "2",
            "--iterations",
            "2",
            "--max-in-flight",
            "24",
            "--latency",
            "lognormal:100ms:0.8",
            "--kill-every",
            "3..5",
            "--down-secs",
            "1",
            "--request-timeout-secs",
            "2",
        ],
    );
    for needle in [
        "calls lost       0 in 1 run(s); answers and table identical in every run",
        "verdict          1 of 1 run(s) passed",
        "verdict          PASS",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    let (name, _, v) = only_result(dir.path());
    assert!(name.starts_with("soak-"), "{name}");
    let rep = &v["repetitions"][0];
    let run = &rep["variants"][0];
    assert_eq!(run["scenario"], "full");
    assert_eq!(run["limit"], "aimd");
    // The schedule really ran: faults of every kind asked for, kills, overload.
    let faults = &run["faulty"]["sims"]["faults"];
    assert!(faults["overload"].as_u64().unwrap_or(0) > 0, "{faults}");
    assert!(faults["error_500"].as_u64().unwrap_or(0) > 0, "{faults}");
    assert!(
        run["faulty"]["sims"]["kills"].as_u64().unwrap_or(0) >= 1,
        "{v}"
    );
    assert_eq!(run["comparison"]["lost_total"], 0);
    assert_eq!(rep["clean"]["problems_done"], 10);
    assert_eq!(run["faulty"]["problems_done"], 10);
}

/// `--runs 2` with two scenarios and two limits: each repetition runs one clean run and
/// then every scenario × limit against it; the summary has one entry per scenario × limit
/// with the figures of both repetitions.
#[test]
fn bench_soak_repeats_every_scenario_and_limit_against_each_clean_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keep = dir.path().join("kept");
    let stdout = bench_soak(
        dir.path(),
        &[
            "--problems",
            "4",
            "--candidates",
            "2",
            "--verifications",
            "2",
            "--iterations",
            "1",
            "--max-in-flight",
            "24",
            "--latency",
            "lognormal:100ms:0.8",
            "--request-timeout-secs",
            "2",
            "--runs",
            "2",
            "--seed-per-run",
            "--scenario",
            "overload,overload-timeout",
            "--limit-policy",
            "gradient",
            "--limit-policy",
            "declared",
            "--out",
            keep.to_str().expect("UTF-8 temp path"),
        ],
    );
    assert!(stdout.contains("verdict          PASS"), "{stdout}");
    assert_eq!(
        stdout.matches("clean run: ").count(),
        2,
        "one clean run per repetition\n{stdout}"
    );
    let (_, _, v) = only_result(dir.path());
    let reps = v["repetitions"].as_array().expect("repetitions");
    assert_eq!(reps.len(), 2);
    let expected = [
        ("overload", "gradient"),
        ("overload", "declared"),
        ("overload-timeout", "gradient"),
        ("overload-timeout", "declared"),
    ];
    for (k, rep) in reps.iter().enumerate() {
        assert_eq!(rep["seed"], 1 + k as u64, "--seed-per-run");
        assert_eq!(rep["clean"]["problems_done"], 4);
        let variants = rep["variants"].as_array().expect("variants");
        let got: Vec<(&str, &str)> = variants
            .iter()
            .map(|r| {
                (
                    r["scenario"].as_str().unwrap_or_default(),
                    r["limit"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(got, expected);
        for r in variants {
            assert_eq!(r["comparison"]["lost_total"], 0, "{r}");
            assert_eq!(r["comparison"]["calls"], 40, "{r}");
            assert_eq!(r["tables_identical"], true);
            assert!(r["wall_ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
            assert!(
                r["capacity_allowed_s"].as_f64().is_some_and(|x| x > 0.0),
                "{r}"
            );
            // The simulators report their busy time, so the work ratio is always there.
            assert!(r["work_ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
            assert!(
                r["wall_over_work_allowed"]
                    .as_f64()
                    .is_some_and(|x| x > 0.0),
                "{r}"
            );
        }
        for dir in ["clean", "overload-gradient", "overload-timeout-declared"] {
            let store = keep.join(format!("rep-{}", k + 1)).join(dir).join("run");
            assert!(store.is_dir(), "{} kept", store.display());
        }
    }
    let summary = v["summary"].as_array().expect("summary");
    assert_eq!(summary.len(), 4);
    for (s, (scenario, limit)) in summary.iter().zip(expected) {
        assert_eq!(
            (s["scenario"].as_str(), s["limit"].as_str()),
            (Some(scenario), Some(limit))
        );
        assert_eq!(s["runs"], 2);
        assert_eq!(s["passed"], 2);
        assert_eq!(s["calls_lost"], 0);
        assert_eq!(s["identical_every_run"], true);
        for figure in ["wall_ratio", "wall_over_capacity_allowed"] {
            let f = &s[figure];
            assert!(f["min"].as_f64() <= f["median"].as_f64(), "{s}");
            assert!(f["median"].as_f64() <= f["max"].as_f64(), "{s}");
        }
        // Both endpoints' limits, sampled in every run.
        assert!(s["limits"]["sim-a"]["median"]["median"].is_number(), "{s}");
        assert!(s["limits"]["sim-b"]["median"]["median"].is_number(), "{s}");
    }
    assert!(v["clean_wall_s"]["median"].is_number(), "{v}");
}
