//! The cluster recipes in `deploy/`: the Slurm scripts run end to end under a stub Slurm
//! environment (the array variables set by hand, `tmas sim-server` as the model server),
//! and the Kubernetes manifests parse as the kinds they claim, with the fields the
//! recipe relies on.

use std::path::Path;
use std::process::Command;

use crate::support::cli::*;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `bash deploy/slurm/SCRIPT` as array task `task` of `count`, with tmas and the simulator.
fn slurm(
    script: &str,
    task: Option<u32>,
    count: u32,
    config: &Path,
    runs: &Path,
    port: u16,
) -> std::process::Output {
    let bin = env!("CARGO_BIN_EXE_tmas");
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("deploy/slurm").join(script))
        .current_dir(repo())
        .env("RUST_LOG", "warn")
        .env("TMAS", bin)
        .env("TMAS_CONFIG", config)
        .env("TMAS_RUNS", runs)
        .env("TMAS_ENDPOINT", "sim")
        .env("PORT", port.to_string())
        .env(
            "SERVER_CMD",
            format!(
                "{bin} sim-server --port {port} --sim-seed 7 --latency fixed:20ms --dataset {}",
                dataset().display()
            ),
        )
        .env("SLURM_ARRAY_TASK_MIN", "0")
        .env("SLURM_ARRAY_TASK_COUNT", count.to_string());
    if let Some(task) = task {
        cmd.env("SLURM_ARRAY_TASK_ID", task.to_string());
    }
    cmd.output().expect("bash runs")
}

#[test]
fn the_slurm_array_runs_each_shard_resumes_a_requeued_one_and_merges() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "http://127.0.0.1:1", 4, 1);
    let runs = tmp.path().join("runs");
    let port = free_port();
    for task in 0..2 {
        let out = slurm("tmas-shard.sbatch", Some(task), 2, &config, &runs, port);
        assert!(out.status.success(), "task {task}: {}", show(&out));
        assert!(
            text(&out.stderr).contains(&format!("shard {task}/2, from Slurm")),
            "{}",
            show(&out)
        );
    }
    // Re-queued: the task finds its shard and resumes it (nothing left to run).
    let again = slurm("tmas-shard.sbatch", Some(0), 2, &config, &runs, port);
    assert!(again.status.success(), "{}", show(&again));
    assert!(text(&again.stderr).contains("resuming"), "{}", show(&again));

    let merged = slurm("tmas-merge.sbatch", None, 2, &config, &runs, port);
    assert!(merged.status.success(), "{}", show(&merged));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(runs.join("merged/run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed", "{summary}");
    assert_eq!(summary["problems_total"], 4, "{summary}");
}

#[test]
fn the_kubernetes_manifests_are_the_kinds_the_recipe_needs() {
    let docs = |name: &str| -> Vec<serde_yaml::Value> {
        let text = std::fs::read_to_string(repo().join("deploy/kubernetes").join(name)).unwrap();
        serde_yaml::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{name}: {e}")))
            .collect()
    };
    let shards = docs("tmas-shards.yaml");
    assert_eq!(shards.len(), 1);
    let job = &shards[0];
    assert_eq!(
        (job["apiVersion"].as_str(), job["kind"].as_str()),
        (Some("batch/v1"), Some("Job"))
    );
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    assert!(spec["backoffLimitPerIndex"].as_u64().is_some());
    // TMAS_SHARDS must equal the Job's completions, or shards would overlap or be missing.
    let env = spec["template"]["spec"]["containers"][0]["env"]
        .as_sequence()
        .unwrap();
    let shards_var = env
        .iter()
        .find(|e| e["name"].as_str() == Some("TMAS_SHARDS"))
        .and_then(|e| e["value"].as_str())
        .unwrap();
    assert_eq!(shards_var.parse::<u64>().ok(), spec["completions"].as_u64());

    let merge = docs("tmas-merge.yaml");
    assert_eq!(merge[0]["kind"].as_str(), Some("Job"));
    let vllm = docs("vllm.yaml");
    let kinds: Vec<_> = vllm
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["Deployment", "Service"]);
}
