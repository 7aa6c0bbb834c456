//! A server that cuts a running stream whenever another request arrives (llama.cpp's
//! server by default, `interrupt_requests`): the `tmas` binary streaming against a
//! `tmas sim-server` process with `--fault-interrupt-on-arrival`. Each cut stream is an
//! overload signal: the endpoint's limit falls until streams stop being cut, the retries
//! are bounded in time rather than spending the call's attempts, and every call is
//! answered.

use crate::support::cli::*;

#[test]
fn a_server_that_cuts_a_stream_for_the_next_request_gets_every_call_answered() {
    // 16 ms per 512-byte chunk: a reply streams for a few dozen milliseconds, time enough
    // for the next request to cut it.
    let sim = Sim::start_with(
        0,
        5,
        &[
            "--fault-interrupt-on-arrival",
            "--per-output-token-us",
            "125",
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 3, 2);
    let dir = tmp.path().join("run");
    let out = tmas(&[
        "run",
        "-c",
        path_arg(&config),
        "--out",
        path_arg(&dir),
        "--progress-every",
        "0",
        "--set",
        "endpoints.sim.stream=true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(text(&out.stdout).contains("calls: all"), "{}", show(&out));
    let stats = sim.stats();
    let cut = stats["faults"]["interrupted_on_arrival"]
        .as_u64()
        .unwrap_or(0);
    assert!(cut > 0, "no stream was cut: {stats}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed", "{summary}");
    // The limit fell to what the server runs without cutting: most calls went through on
    // their first attempt, not after a cut each.
    let answered = stored_calls(&dir);
    assert!(
        cut < answered / 2,
        "{cut} streams cut for {answered} calls answered"
    );
}
