//! `tmas sim-server` as a real process: the listening line, serving, options file and
//! dataset flags, and a clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cli::BIN;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_server_prints_its_address_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let options = dir.path().join("sim.toml");
    std::fs::write(
        &options,
        "seed = 4\nrecord_requests = 3\n[task]\nverifier_partial_rate = 0.0\n",
    )
    .unwrap();
    let dataset = dir.path().join("answers.jsonl");
    std::fs::write(
        &dataset,
        "{\"problem_id\": \"q1\", \"answer\": \"77\", \"question\": \"?\"}\n",
    )
    .unwrap();

    let mut child = Command::new(BIN)
        .args(["sim-server", "--port", "0", "--options"])
        .arg(&options)
        .arg("--dataset")
        .arg(&dataset)
        .args(["--latency", "fixed:1ms", "--verifier-fp-rate", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tmas binary starts");
    let stdout = child.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    let url = first
        .trim()
        .strip_prefix("tmas-sim listening on http://127.0.0.1:")
        .map(|port| {
            assert!(port.parse::<u16>().is_ok(), "{first:?}");
            first
                .trim()
                .strip_prefix("tmas-sim listening on ")
                .unwrap()
                .to_owned()
        });
    let root = url.unwrap_or_else(|| panic!("unexpected first line {first:?}"));

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    assert_eq!(
        client
            .get(format!("{root}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let v: Value = client
        .post(format!("{root}/v1/chat/completions"))
        .header("x-tmas-role", "verification")
        .header("x-tmas-problem", "q1")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Final answer: \\boxed{77}"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        text.ends_with("\\boxed{1}"),
        "the dataset's answer is used: {text}"
    );
    let stats: Value = client
        .get(format!("{root}/sim/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats["recent_requests"].as_array().unwrap().len(),
        1,
        "options file applied"
    );

    // SAFETY: plain signal to our own child process.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn sim_server_rejects_bad_options_with_a_clear_error() {
    let out = Command::new(BIN)
        .args(["sim-server", "--port", "0", "--fault-hang", "1.5"])
        .output()
        .expect("tmas binary runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("faults.hang"), "{err}");
    assert!(out.stdout.is_empty());
}

/// The `THP_enabled` line of `/proc/PID/status` (`None`: the kernel has none).
fn huge_pages_enabled(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| Some(line.strip_prefix("THP_enabled:")?.trim() == "1"))
}

/// Whether a started `tmas sim-server` (the same binary and start as every command) may
/// use transparent huge pages, with `allow` as `MIMALLOC_ALLOW_THP` (`None`: unset).
fn binary_huge_pages(allow: Option<&str>) -> Option<bool> {
    let mut command = Command::new(BIN);
    command
        .args(["sim-server", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    match allow {
        Some(value) => command.env("MIMALLOC_ALLOW_THP", value),
        None => command.env_remove("MIMALLOC_ALLOW_THP"),
    };
    let mut child = command.spawn().expect("tmas binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("tmas-sim listening"), "{line:?}");
    let enabled = huge_pages_enabled(child.id());
    let _ = child.kill();
    let _ = child.wait();
    enabled
}

#[test]
fn the_binary_runs_on_small_pages_unless_the_allocator_is_told_otherwise() {
    let Some(ours) = huge_pages_enabled(std::process::id()) else {
        eprintln!("SKIPPED: this kernel's /proc/PID/status has no THP_enabled line");
        return;
    };
    assert_eq!(
        binary_huge_pages(None),
        Some(false),
        "huge pages off by default"
    );
    // Set: mimalloc's own setting decides, and the process keeps what it inherited.
    assert_eq!(binary_huge_pages(Some("1")), Some(ours));
}
