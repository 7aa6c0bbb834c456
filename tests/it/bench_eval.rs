//! Smoke test of `tmas bench eval`: a tiny run proves the command works end to end
//! (engine, run store, simulator child) and writes well-formed JSON. No timing is
//! asserted: benchmarks measure, tests do not.

use std::path::Path;

use crate::support::cli::{command, only_result};

/// Runs `tmas bench eval ARGS` in `dir`, asserts it succeeded and returns its stdout.
fn bench_eval(dir: &Path, args: &[&str]) -> String {
    let out = command(&["bench", "eval"])
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tmas bench eval");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

#[test]
fn bench_eval_runs_a_tiny_workload_and_writes_its_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keep = dir.path().join("kept-run");
    let keep_arg = keep.display().to_string();
    let stdout = bench_eval(
        dir.path(),
        &[
            "--problems",
            "3",
            "--candidates",
            "2",
            "--verifications",
            "2",
            "--iterations",
            "2",
            "--max-in-flight",
            "6",
            "--latency",
            "lognormal:2ms:0.5",
            "--solution-bytes",
            "3000",
            "--summary-bytes",
            "500",
            "--sim-worker-threads",
            "1",
            "--worker-threads",
            "2",
            "--out",
            &keep_arg,
        ],
    );
    assert!(stdout.contains("slot utilization"), "{stdout}");
    let (name, text, v) = only_result(dir.path());
    assert!(
        name.starts_with("eval-") && name.ends_with(".json"),
        "{name}"
    );

    // 3 problems × 2 iterations × (2 solutions + 2×2 verifications + 2 summaries + 2 bank
    // calls) = 60 calls, none failed, and the cap held.
    assert_eq!(v["problems_done"], 3, "{text}");
    assert_eq!(v["problems_failed"], 0, "{text}");
    assert_eq!(v["calls"], 60, "{text}");
    assert_eq!(v["sim_requests"], 60, "{text}");
    assert!(v["sim_peak_in_flight"].as_u64().unwrap() <= 6, "{text}");
    assert!(v["sim_peak_in_flight"].as_u64().unwrap() >= 1, "{text}");
    for key in [
        "wall_s",
        "calls_per_s",
        "busy_s",
        "slot_utilization",
        "bound_capacity_s",
        "bound_chain_s",
        "lower_bound_s",
        "wall_over_bound",
        "model_utilization",
        "cpu_s_per_1k_calls",
        "peak_rss_mib",
    ] {
        let x = v[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing: {text}"));
        assert!(x.is_finite() && x > 0.0, "{key} = {x}: {text}");
    }
    // The bound can never exceed what was measured, so the ratio is at least 1
    // (up to the millisecond rounding of stored latencies).
    assert!(v["wall_over_bound"].as_f64().unwrap() >= 0.99, "{text}");
    // The modelled ceiling is a utilization.
    assert!(
        v["model_utilization"].as_f64().unwrap() <= 1.0 + 1e-9,
        "{text}"
    );
    assert!(stdout.contains("model ceiling"), "{stdout}");
    // The oracle order (foresight of every latency) is modelled too.
    let oracle = v["model_oracle_utilization"]
        .as_f64()
        .expect("model_oracle_utilization");
    assert!(oracle > 0.0 && oracle <= 1.0 + 1e-9, "{text}");
    assert!(stdout.contains("model oracle"), "{stdout}");
    assert_eq!(v["admission"], "work-conserving", "{text}");
    // The store writer's CPU is part of the process's.
    if cfg!(target_os = "linux") {
        let store = v["store_writer_cpu_s"]
            .as_f64()
            .expect("store_writer_cpu_s");
        let total = v["cpu_s"].as_f64().expect("cpu_s");
        assert!(store > 0.0 && store <= total + 1e-6, "{text}");
    }
    // The thread counts asked for are the ones that ran.
    assert_eq!(v["engine_worker_threads"], 2, "{text}");
    assert_eq!(v["sim_worker_threads"], 1, "{text}");
    assert_eq!(v["call_priority"], "least-progress-first", "{text}");
    // The last problem is one of the three, inside the run, and never shorter than its
    // own chain.
    let last = &v["last_problem"];
    assert!(
        last["problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("bench-")),
        "{text}"
    );
    let (start, end, chain) = (
        last["start_s"].as_f64().unwrap(),
        last["end_s"].as_f64().unwrap(),
        last["chain_s"].as_f64().unwrap(),
    );
    assert!(start >= 0.0 && end > start && chain > 0.0, "{text}");
    assert!(end - start >= chain - 0.01, "{text}");
    // --out leaves the run's store in place.
    assert!(keep.join("run").join("run.sqlite").is_file());
}

/// `--runs 2 --seed-per-run`: two runs, each in its own process with its own seed, their
/// figures and a median-and-range summary in one JSON.
#[test]
fn bench_eval_repeats_a_run_in_separate_processes_and_summarizes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stdout = bench_eval(
        dir.path(),
        &[
            "--runs",
            "2",
            "--settle-secs",
            "0",
            "--seed",
            "5",
            "--seed-per-run",
            "--problems",
            "2",
            "--candidates",
            "2",
            "--verifications",
            "1",
            "--iterations",
            "1",
            "--max-in-flight",
            "4",
            "--latency",
            "fixed:1ms",
            "--solution-bytes",
            "500",
            "--summary-bytes",
            "100",
            "--sim-worker-threads",
            "1",
            "--worker-threads",
            "1",
        ],
    );
    assert!(stdout.contains("== run 2 of 2"), "{stdout}");
    assert!(
        stdout.contains("2 runs, each in its own process"),
        "{stdout}"
    );
    // One JSON for the whole command (the children write none of their own).
    let (_, text, v) = only_result(dir.path());
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{text}");
    // --seed-per-run: run k draws with seed 5 + k − 1.
    assert_eq!(runs[0]["seed"], 5, "{text}");
    assert_eq!(runs[1]["seed"], 6, "{text}");
    for r in runs {
        // 2 problems × (2 solutions + 2 verifications + 2 summaries + 2 bank calls).
        assert_eq!(r["calls"], 16, "{text}");
        assert_eq!(r["problems_failed"], 0, "{text}");
        // The global option reached the child.
        assert_eq!(r["engine_worker_threads"], 1, "{text}");
    }
    let s = &v["summary"];
    assert_eq!(s["runs"], 2, "{text}");
    for key in ["slot_utilization", "cpu_s_per_1k_calls", "peak_rss_mib"] {
        let (median, min, max) = (
            s[key]["median"].as_f64().expect("median"),
            s[key]["min"].as_f64().expect("min"),
            s[key]["max"].as_f64().expect("max"),
        );
        assert!(min <= median && median <= max, "{key}: {text}");
        let values: Vec<f64> = runs.iter().map(|r| r[key].as_f64().unwrap()).collect();
        assert_eq!(min, values.iter().copied().fold(f64::INFINITY, f64::min));
        assert_eq!(
            max,
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        );
    }
}

/// `tmas bench schedule` (the zero-overhead scheduling model) prints one row per policy
/// and writes its JSON: one workload, every admission × priority × gate.
#[test]
fn bench_schedule_compares_every_policy_and_writes_its_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = command(&["bench", "schedule"])
        .current_dir(dir.path())
        .args([
            "--problems",
            "12",
            "--iterations",
            "2",
            "--max-in-flight",
            "40",
            "--latency-draws",
            "2",
        ])
        .output()
        .expect("run tmas bench schedule");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let path = std::fs::read_dir(dir.path().join("bench-results"))
        .expect("bench-results written")
        .map(|e| e.expect("dir entry").path())
        .find(|p| p.to_string_lossy().contains("schedule-"))
        .expect("schedule-*.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let policies = v["policies"].as_array().expect("policies");
    // 2 admissions × 4 call orders (two runtime priorities, the latency-aware estimate and
    // the oracle) × 2 gates.
    assert_eq!(policies.len(), 16, "{v}");
    assert!(
        policies
            .iter()
            .any(|p| p["call_priority"] == "latency-aware"),
        "{v}"
    );
    for p in policies {
        let outcomes = p["outcomes"].as_array().expect("outcomes");
        assert_eq!(outcomes.len(), 2);
        for o in outcomes {
            // 12 problems × 2 iterations × (8 + 64 + 8 + 2) calls.
            assert_eq!(o["calls"], 12 * 2 * 82, "{o}");
            let u = o["utilization"].as_f64().expect("utilization");
            assert!(u > 0.0 && u <= 1.0 + 1e-9, "{o}");
            let wall = o["wall_secs"].as_f64().expect("wall");
            let bound = o["bound_secs"].as_f64().expect("bound");
            assert!(wall + 1e-9 >= bound, "{o}");
        }
        assert!(stdout.contains(p["call_priority"].as_str().expect("name")));
    }
    // Every order meets the same latencies, so each draw's busy time and longest chain
    // are the same in every row.
    let first = &policies[0]["outcomes"];
    for p in policies {
        for (o, f) in p["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .zip(first.as_array().unwrap())
        {
            let (a, b) = (
                o["busy_secs"].as_f64().unwrap(),
                f["busy_secs"].as_f64().unwrap(),
            );
            assert!((a - b).abs() < 1e-6, "{o} vs {f}");
            assert_eq!(o["chain_secs"], f["chain_secs"], "{o} vs {f}");
        }
    }
    assert!(stdout.contains("critical-path (oracle)"), "{stdout}");
}
