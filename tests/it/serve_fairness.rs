//! Requests share one runtime fairly: a 3-iteration request sent while a 20-iteration one
//! runs is not starved behind it. Measured by completion order in the server's run store
//! (`--out`: calls are stored as they finish), not by wall-clock thresholds.

use serde_json::json;

use crate::support::cli::{Sim, path_arg, read_store, stored_calls};
use crate::support::serve::{Server, eventually, write_serve_config};

/// Calls of one TMAS problem with N, M, T (every reply usable).
fn tmas_calls(n: u64, m: u64, t: u64) -> u64 {
    t * (n * (m + 2) + 2)
}

/// The calls of `problem` by completion order (the store's insertion order).
fn completion_ranks(conn: &rusqlite::Connection, problem: &str) -> Vec<i64> {
    let mut stmt = conn
        .prepare("SELECT rowid FROM calls WHERE problem_id = ?1 ORDER BY rowid")
        .unwrap();
    stmt.query_map([problem], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_short_request_is_not_starved_behind_a_long_one_under_a_small_in_flight_cap() {
    let sim = Sim::start(0, 5);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("served");
    let config = write_serve_config(dir.path(), &sim.root, "");
    let server = Server::start_with(
        &config,
        &["--out", path_arg(&out), "--set", "run.max_in_flight=2"],
        &[],
    );
    let (n, m) = (8, 4);
    let ask = |t: u64| {
        json!({
            "model": "tmas/tmas-sim",
            "messages": [{"role": "user", "content": format!("A {t}-iteration question.")}],
            "tmas": {"n": n, "m": m, "iterations": t},
        })
    };
    let addr = server.addr.clone();
    let long_body = ask(20);
    let long = std::thread::spawn(move || {
        crate::support::serve::request(
            &addr,
            "POST",
            "/v1/chat/completions",
            &[],
            &long_body.to_string(),
        )
    });
    // The long request is two iterations in when the short one arrives.
    assert!(
        eventually(std::time::Duration::from_secs(60), || {
            stored_calls(&out) >= 2 * tmas_calls(n, m, 1)
        }),
        "the long request made no progress"
    );
    let short = server.post(&ask(3));
    assert_eq!(short.status, 200, "{}", short.body);
    let long = long.join().unwrap();
    assert_eq!(long.status, 200, "{}", long.body);
    let (status, stderr) = server.terminate();
    assert!(status.success(), "{status:?}\n{stderr}");

    let conn = read_store(&out);
    let long = completion_ranks(&conn, "req-0-c0");
    let short = completion_ranks(&conn, "req-1-c0");
    assert_eq!(long.len() as u64, tmas_calls(n, m, 20));
    assert_eq!(short.len() as u64, tmas_calls(n, m, 3));
    let (first, last) = (short[0], *short.last().unwrap());
    // Completion order: the short request ended while the long one had most of its
    // calls still to make.
    let long_after = long.iter().filter(|&&r| r > last).count();
    assert!(
        long_after as u64 > tmas_calls(n, m, 20) / 2,
        "the long request had only {long_after} calls left when the short one ended"
    );
    // While the short request ran, the long one completed fewer calls than the short one
    // made: the short one's calls went first whenever both waited for a slot. (With
    // `run.call_priority = "oldest-problem-first"` the short one waits behind each of the
    // long one's stages of 32 verifications, and ends after the long one made most of
    // its calls.)
    let long_during = long.iter().filter(|&&r| r > first && r < last).count();
    assert!(
        long_during < short.len(),
        "the long request completed {long_during} calls while the short one ({} calls) ran",
        short.len()
    );
}
