//! `tmas serve --out DIR`: a server keeps every request in a run store, stopped by
//! SIGTERM it leaves it complete and closed, and the commands that read runs read it
//! without errors and without scoring requests that have no reference answer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cli::{Sim, ok, path_arg, read_store, show, tmas};
use crate::support::serve::{Events, Server, eventually, post_then_leave, write_serve_config};

fn ask(model: &str, question: &str, ext: Value) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "tmas": ext,
    })
}

#[test]
fn a_servers_store_holds_every_request_and_reads_as_an_unscored_run() {
    let sim = Sim::start(0, 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("served");
    let config = write_serve_config(dir.path(), &sim.root, "");
    let server = Server::start_with(&config, &["--out", path_arg(&out)], &[]);

    // Two choices at once, then a stream with a larger T than the served config's (2),
    // then the plain model (passed through), whole and streamed: a problem of one call.
    let mut body = ask(
        "tmas/tmas-sim",
        "Find the sum of the first 10 odd numbers.",
        json!({"n": 2, "m": 1, "iterations": 2}),
    );
    body["n"] = json!(2);
    let reply = server.post(&body);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = reply.json();
    let mut calls = reply["usage"]["tmas"]["calls"].as_u64().unwrap();
    let mut body = ask(
        "tmas/tmas-sim",
        "How many primes are below 30?",
        json!({"n": 2, "m": 1, "iterations": 3}),
    );
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let events = Events::open(&server.addr, &body).rest();
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let usage = events[events.len() - 2].json();
    calls += usage["usage"]["tmas"]["calls"].as_u64().unwrap();
    let plain = server.post(&json!({
        "model": "tmas-sim",
        "messages": [{"role": "user", "content": "Say hi."}],
    }));
    assert_eq!(plain.status, 200, "{}", plain.body);
    let plain_text = plain.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let streamed = Events::open(
        &server.addr,
        &json!({
            "model": "tmas-sim",
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Say hello."}],
            "stream": true,
        }),
    )
    .rest();
    assert_eq!(streamed.last().unwrap().data, "[DONE]");

    let (status, stderr) = server.terminate();
    assert!(status.success(), "{status:?}\n{stderr}");

    // The store: one problem per choice, in arrival order, each done with the T its
    // request asked for, no reference and no verdict; every call the replies counted.
    let conn = read_store(&out);
    let mut stmt = conn
        .prepare(
            "SELECT problem_id, status, iterations, reference_answer, question FROM problems \
             ORDER BY ordinal",
        )
        .unwrap();
    let problems: Vec<(String, String, i64, String, String)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let ids: Vec<&str> = problems.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        ids,
        ["req-0-c0", "req-0-c1", "req-1-c0", "req-2-c0", "req-3-c0"]
    );
    for (id, status, iterations, reference, question) in &problems {
        assert_eq!(status, "done", "{id}");
        assert!(reference.is_empty(), "{id}: no reference answer");
        let asked = match &id[..5] {
            "req-0" => 2,
            "req-1" => 3,
            _ => 1,
        };
        assert_eq!(*iterations, asked, "{id}");
        assert!(!question.is_empty());
    }
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    // The plain model's choices: one call each, its whole conversation as the prompt.
    assert_eq!(count("SELECT COUNT(*) FROM calls") as u64, calls + 2);
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM calls WHERE problem_id IN ('req-2-c0', 'req-3-c0') \
             AND role = 'solution' AND ok = 1"
        ),
        2
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM judge_verdicts"),
        0,
        "nothing judged"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM candidates"),
        2 * 2 + 2 * 2 + 2 * 3 + 2
    );
    assert!(count("SELECT COUNT(*) FROM bank_versions") > 0);
    let meta = |key: &str| {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
            r.get::<_, String>(0)
        })
        .unwrap()
    };
    assert_eq!(meta("status"), "completed");
    assert_eq!(meta("iterations"), "3");
    // Each problem's method keys, as its request set them.
    let method: Value = serde_json::from_str(&meta("request/req-1-c0")).unwrap();
    assert_eq!(
        (
            &method["name"],
            &method["n"],
            &method["m"],
            &method["iterations"]
        ),
        (&json!("tmas"), &json!(2), &json!(1), &json!(3))
    );
    assert_eq!(meta("request/req-2-c0"), r#"{"pass_through":"tmas-sim"}"#);
    drop(stmt);
    drop(conn);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["problems_done"], 5);
    // The plain model's record: its reply as its one candidate.
    let record: Value =
        serde_json::from_slice(&std::fs::read(out.join("problems/req-2-c0.json")).unwrap())
            .unwrap();
    let candidates = &record["outcome"]["iterations"][0]["candidates"];
    assert_eq!(candidates.as_array().map(Vec::len), Some(1), "{record}");
    assert_eq!(candidates[0]["solution"], json!(plain_text));
    assert_eq!(summary["final_pass_at_1"], Value::Null, "no score, not 0");
    assert!(out.join("problems/req-1-c0.json").is_file());

    // `tmas report`: no Pass@1 table (nothing to score), the calls and the banks.
    let report = ok(tmas(&["report", path_arg(&out)]), "tmas report");
    assert!(
        report.contains("Pass@1: not scored: none of the 5 problems has a reference answer"),
        "{report}"
    );
    assert!(report.contains("problems: 5 complete"), "{report}");
    assert!(!report.contains("pass@1(%)"), "{report}");
    assert!(!report.contains("unfinished"), "{report}");

    // `tmas view --out`: the pages, each request's problem without a reference.
    let pages = dir.path().join("pages");
    ok(
        tmas(&["view", path_arg(&out), "--out", path_arg(&pages)]),
        "tmas view --out",
    );
    let problem = std::fs::read_to_string(pages.join("p2.html")).unwrap();
    assert!(
        problem.contains("How many primes are below 30?"),
        "{problem}"
    );
    assert!(problem.contains("none (a request recorded by tmas serve"));
    let index = std::fs::read_to_string(pages.join("index.html")).unwrap();
    assert!(!index.contains(">0.0<"), "no Pass@1 of 0 shown:\n{index}");

    // `tmas export`: a line per request.
    let lines = ok(tmas(&["export", path_arg(&out)]), "tmas export");
    assert_eq!(lines.lines().count(), 5);

    // `tmas rl-data`: refused, saying why; nothing written.
    let parquet = dir.path().join("rl.parquet");
    let refused = tmas(&["rl-data", path_arg(&out), "--output", path_arg(&parquet)]);
    assert_eq!(refused.status.code(), Some(2), "{}", show(&refused));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("reference answer"), "{}", show(&refused));
    assert!(!parquet.exists());

    // Nor anything to judge again.
    let judged = dir.path().join("judged.json");
    let rejudge = tmas(&["judge", "--run", path_arg(&out), "-o", path_arg(&judged)]);
    assert!(!rejudge.status.success(), "{}", show(&rejudge));
    assert!(
        String::from_utf8_lossy(&rejudge.stderr).contains("no reference answer"),
        "{}",
        show(&rejudge)
    );

    // And it is not a run to resume.
    let resume = tmas(&["run", "--resume", path_arg(&out), "--no-preflight"]);
    assert_eq!(resume.status.code(), Some(2), "{}", show(&resume));
    assert!(
        String::from_utf8_lossy(&resume.stderr).contains("has no reference answer"),
        "{}",
        show(&resume)
    );
}

#[test]
fn a_serve_store_is_created_in_a_new_or_empty_directory_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "embedded-sim", "");
    // `dir` holds the config: not empty.
    let refused = tmas(&[
        "serve",
        "-c",
        path_arg(&config),
        "--addr",
        "127.0.0.1:0",
        "--out",
        path_arg(dir.path()),
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", show(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not empty"),
        "{}",
        show(&refused)
    );
}

/// An endpoint key variable that is not set stops the server before it creates its store
/// (a start that fails after that closes the store as stopped: the unit test in src/serve.rs).
#[test]
fn an_unset_endpoint_key_stops_the_server_before_it_creates_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("served");
    let config = write_serve_config(dir.path(), "embedded-sim", "");
    let unset = "TMAS_SERVE_TEST_KEY_NEVER_SET";
    let failed = tmas(&[
        "serve",
        "-c",
        path_arg(&config),
        "--addr",
        "127.0.0.1:0",
        "--out",
        path_arg(&out),
        "--set",
        &format!("endpoints.sim.api_key_env=\"{unset}\""),
    ]);
    assert_eq!(failed.status.code(), Some(2), "{}", show(&failed));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains(unset) && stderr.contains("endpoints.sim"),
        "{}",
        show(&failed)
    );
    assert!(
        !out.join("run.sqlite").exists(),
        "no store is created: {}",
        show(&failed)
    );
}

#[test]
fn a_request_whose_client_goes_away_is_stored_failed_and_its_calls_still_stop_at_once() {
    // Calls that would take a minute: only cancellation ends them soon.
    let sim = Sim::start(0, 60_000);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("served");
    let config = write_serve_config(dir.path(), &sim.root, "");
    let server = Server::start_with(&config, &["--out", path_arg(&out)], &[]);
    let body = ask(
        "tmas/tmas-sim",
        "A question nobody waits for.",
        json!({"n": 2, "m": 1, "iterations": 1}),
    );
    let conn = post_then_leave(&server.addr, &body);
    // And a request to the plain model, whose one call is cut the same way.
    let plain = post_then_leave(
        &server.addr,
        &json!({"model": "tmas-sim", "messages": [{"role": "user", "content": "Hi?"}]}),
    );
    assert!(
        eventually(Duration::from_secs(30), || sim.stats()["in_flight"] == 3),
        "{}",
        sim.stats()
    );
    drop(conn);
    drop(plain);
    assert!(
        eventually(Duration::from_secs(1), || sim.stats()["in_flight"] == 0),
        "calls still in flight a second after the client left: {}",
        sim.stats()
    );
    assert!(
        eventually(Duration::from_secs(5), || server.health()["problems_open"]
            == 0),
        "{}",
        server.health()
    );
    let (status, stderr) = server.terminate();
    assert!(status.success(), "{status:?}\n{stderr}");
    let conn = read_store(&out);
    for id in ["req-0-c0", "req-1-c0"] {
        let (status, error): (String, String) = conn
            .query_row(
                "SELECT status, error FROM problems WHERE problem_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(status, "failed", "{id}");
        assert!(error.contains("cancelled"), "{id}: {error}");
    }
    let calls: i64 = conn
        .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        calls, 0,
        "the calls cut short are not stored as answered or failed"
    );
    let report = ok(tmas(&["report", path_arg(&out)]), "tmas report");
    assert!(report.contains("2 failed"), "{report}");
}
