//! Runs that never report success that did not happen: the `tmas` binary against a
//! `tmas sim-server` process and small wiremock servers over loopback.
//!
//! - Start-up checks: a rejected key, a URL without `/v1`, an HTML page, a model the
//!   server does not serve, a refused connection, a missing key variable and a busy metrics
//!   address each fail with one line naming the endpoint and what to do, exit 2, and leave
//!   no run directory behind. A server whose first answers are 500s, or 429s with
//!   `Retry-After`, is waited out as the client would retry it: the run starts.
//! - Permanent errors: an endpoint answering 401 to every call stops the run (exit 4) with
//!   the server's error and the resume command; the resume pointed at a working endpoint
//!   (`--set endpoints.sim.base_url=…`) ends where a fault-free run does.
//! - Recovery: the endpoint down past the outage budget gives a degraded run (exit 3, the
//!   lost calls by role, endpoint and kind); once it is back, `--resume` re-sends exactly the
//!   failed calls and ends where a fault-free run with the same seed does.

use std::path::Path;
use std::process::Output;

use crate::support::cli::*;
use tmas_client::failure::FailureKind;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// `tmas run -c CONFIG --out DIR ARGS…` with `env` added, off the async runtime.
async fn run_with(config: &Path, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(&["run", "-c"]);
    cmd.arg(config)
        .arg("--out")
        .arg(dir)
        .args(["--progress-every", "0"])
        .args(args)
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().expect("tmas runs"))
        .await
        .expect("runner thread")
}

/// Asserts a start-up failure: exit 2, every `needles` on stderr, no run directory.
fn assert_startup_failure(out: &Output, dir: &Path, needles: &[&str]) {
    assert_eq!(code(out), Some(2), "{}", show(out));
    let stderr = text(&out.stderr);
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}:\n{}",
            show(out)
        );
    }
    assert!(
        !dir.exists(),
        "a failed start-up check created {}",
        dir.display()
    );
}

fn models_json(ids: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "object": "list",
        "data": ids.iter().map(|id| serde_json::json!({"id": id, "object": "model"})).collect::<Vec<_>>()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_start_up_failure_is_one_line_with_exit_2_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = MockServer::start().await;
    let base = server.uri();
    let config = write_config(tmp.path(), &base, 2, 1);
    let set = |key: &str, value: &str| format!("{key}={value}");

    // 401 from /models: the key was rejected; the variable is named, its value never.
    Mock::given(method("GET"))
        .and(path("/keyed/v1/models"))
        .respond_with(ResponseTemplate::new(401).set_body_string("{\"error\":\"bad key\"}"))
        .mount(&server)
        .await;
    let dir = tmp.path().join("bad-key");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/keyed/v1")),
            "--set",
            "endpoints.sim.api_key_env=TMAS_TEST_KEY",
        ],
        &[("TMAS_TEST_KEY", "sk-not-this-one")],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &["endpoint `sim`", "TMAS_TEST_KEY", "rejected", "HTTP 401"],
    );
    assert!(
        !text(&out.stderr).contains("sk-not-this-one"),
        "{}",
        show(&out)
    );

    // 404 on /models of a URL without /v1: the suffix is suggested.
    let dir = tmp.path().join("no-v1");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/bare")),
        ],
        &[],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &[
            "no OpenAI-compatible API",
            &format!("did you mean base_url = \"{base}/bare/v1\""),
        ],
    );

    // An HTML page (a proxy's login page): content type and the first bytes are shown.
    Mock::given(method("GET"))
        .and(path("/html/v1/models"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw("<html><body>Please sign in</body></html>", "text/html"),
        )
        .mount(&server)
        .await;
    let dir = tmp.path().join("html");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/html/v1")),
        ],
        &[],
    )
    .await;
    assert_startup_failure(&out, &dir, &["text/html", "Please sign in"]);

    // The configured model is not served (and the server refuses other names, as vLLM
    // does): the served ones are listed.
    Mock::given(method("GET"))
        .and(path("/other/v1/models"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(models_json(&["qwen3-8b", "llama-70b"])),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/other/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(404).set_body_string(
            "{\"object\":\"error\",\"message\":\"The model `tmas-sim` does not exist.\"}",
        ))
        .mount(&server)
        .await;
    let dir = tmp.path().join("model");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/other/v1")),
        ],
        &[],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &["model `tmas-sim` is not served", "qwen3-8b, llama-70b"],
    );

    // A server that answers any model name (llama.cpp) passes although its list differs.
    Mock::given(method("GET"))
        .and(path("/any/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(models_json(&["model.gguf"])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/any/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_string("{\"error\":\"no\"}"))
        .mount(&server)
        .await;
    // (Its chat route rejects us, so the run still stops, but on the key, not the model.)
    let dir = tmp.path().join("any-model");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/any/v1")),
        ],
        &[],
    )
    .await;
    assert_startup_failure(&out, &dir, &["wants an API key", "api_key_env"]);
    assert!(!text(&out.stderr).contains("not served"), "{}", show(&out));

    // The same server answering the chat: the run starts, and the start-up check says
    // once that the configured model was not on the list (a typo would look the same).
    Mock::given(method("GET"))
        .and(path("/listed/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(models_json(&["model.gguf"])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/listed/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "\\boxed{1}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3}
        })))
        .mount(&server)
        .await;
    let dir = tmp.path().join("listed-other");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set("endpoints.sim.base_url", &format!("{base}/listed/v1")),
        ],
        &[],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr
            .matches("is not among the models GET /models lists (model.gguf)")
            .count(),
        1,
        "{}",
        show(&out)
    );
    assert!(dir.join("run.json").exists(), "{}", show(&out));

    // Nothing listens: the check waits (visibly) for preflight_wait_secs, then fails.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tmp.path().join("refused");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            &set(
                "endpoints.sim.base_url",
                &format!("http://127.0.0.1:{closed}/v1"),
            ),
            "--set",
            "resilience.preflight_wait_secs=2",
        ],
        &[],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &[
            "waiting for endpoint sim (connection refused), 0 s",
            "preflight_wait_secs = 2",
        ],
    );

    // A missing key variable and a busy metrics address, before any network check.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let dir = tmp.path().join("local");
    let out = run_with(
        &config,
        &dir,
        &[
            "--set",
            "endpoints.sim.api_key_env=TMAS_TEST_UNSET_KEY",
            "--metrics-addr",
            &busy_addr,
        ],
        &[],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &[
            "TMAS_TEST_UNSET_KEY",
            "is not set",
            &busy_addr,
            "cannot be bound",
        ],
    );
}

/// What the model client retries (429 with `Retry-After`, 5xx) the start-up check waits
/// out, against a `tmas sim-server` whose first answers are errors: the run starts and
/// completes. A status the client treats as permanent stops the start; one it retries
/// stops it only once `resilience.preflight_wait_secs` is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_waits_out_what_the_client_retries_and_stops_on_what_it_never_would() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "first-500",
            &["--fault-first-requests", "3", "--fault-first-status", "500"],
            "waiting for endpoint sim (HTTP 500), 0 s",
        ),
        (
            "first-429",
            &[
                "--fault-first-requests",
                "2",
                "--fault-first-status",
                "429",
                "--fault-first-retry-after-secs",
                "1",
            ],
            "waiting for endpoint sim (HTTP 429, retry after 1 s), 0 s",
        ),
    ];
    for (name, flags, waiting) in cases {
        let sim = Sim::start_with(0, 5, flags);
        std::fs::create_dir(tmp.path().join(name)).unwrap();
        let config = write_config(&tmp.path().join(name), &sim.root, 1, 1);
        let dir = tmp.path().join(name).join("run");
        let out = run_with(&config, &dir, &[], &[]).await;
        assert_eq!(code(&out), Some(0), "{name}: {}", show(&out));
        assert!(
            text(&out.stderr).contains(waiting),
            "{name}: {}",
            show(&out)
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(summary["status"], "completed", "{name}: {summary}");
        let injected = sim.stats()["faults"]["first_requests"].as_u64();
        let wanted = flags[1].parse::<u64>().ok();
        assert_eq!(injected, wanted, "{name}: every injected error was met");
    }

    // Permanent: a rejected key stops the start at once, whatever the wait allows.
    let sim = Sim::start_with(
        0,
        5,
        &[
            "--fault-first-requests",
            "1000",
            "--fault-first-status",
            "401",
        ],
    );
    let config = write_config(tmp.path(), &sim.root, 1, 1);
    let dir = tmp.path().join("first-401");
    let out = run_with(&config, &dir, &[], &[]).await;
    assert_startup_failure(
        &out,
        &dir,
        &["HTTP 401", "wants an API key", "nothing was created"],
    );
    assert!(!text(&out.stderr).contains("waiting for"), "{}", show(&out));

    // Retried, but for longer than the wait: the start stops with the last answer.
    let sim = Sim::start_with(
        0,
        5,
        &[
            "--fault-first-requests",
            "1000",
            "--fault-first-status",
            "503",
        ],
    );
    let config = write_config(tmp.path(), &sim.root, 1, 1);
    let dir = tmp.path().join("first-503");
    let out = run_with(
        &config,
        &dir,
        &["--set", "resilience.preflight_wait_secs=2"],
        &[],
    )
    .await;
    assert_startup_failure(
        &out,
        &dir,
        &[
            "waiting for endpoint sim (HTTP 503), 0 s",
            "still answered HTTP 503",
            "simulated error",
            "preflight_wait_secs = 2",
            "nothing was created",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_stop_the_run_with_exit_4_and_the_resume_continues_after_the_fix() {
    let sim = Sim::start(0, 5);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 3, 2);
    let base = {
        let (sim_ref, config, dir) = (&sim, config.clone(), tmp.path().join("fault-free"));
        tokio::task::block_in_place(|| baseline(sim_ref, &config, &dir))
    };

    // Every chat call answered 401 (the preflight is skipped, as by a user who knows
    // better; the run itself must still stop).
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401).set_body_string("{\"error\":\"invalid api key sk-xyz\"}"),
        )
        .mount(&server)
        .await;
    let dir = tmp.path().join("rejected");
    let out = run_with(
        &config,
        &dir,
        &[
            "--no-preflight",
            "--set",
            &format!("endpoints.sim.base_url={}/v1", server.uri()),
        ],
        &[],
    )
    .await;
    assert_eq!(code(&out), Some(4), "{}", show(&out));
    let stderr = text(&out.stderr);
    for needle in [
        "endpoint `sim` answered 5 calls in a row",
        "HTTP 401",
        "invalid api key",
        &format!("tmas run --resume {}", dir.display()),
    ] {
        assert!(
            stderr.contains(needle),
            "missing {needle:?}:\n{}",
            show(&out)
        );
    }
    let received = server.received_requests().await.unwrap_or_default().len();
    assert!(
        received < 20,
        "the run kept sending after the stop: {received} requests"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "stopped", "{summary}");
    assert!(
        summary["stopped_by"]
            .as_str()
            .unwrap_or("")
            .contains("HTTP 401")
    );

    // Fixed: the same run resumed against the working endpoint ends where a fault-free
    // run does (the calls that got 401 are sent again).
    let dir_s = dir.display().to_string();
    let resume = [
        "run",
        "--resume",
        dir_s.as_str(),
        "--progress-every",
        "0",
        "--set",
        &format!("endpoints.sim.base_url={}/v1", sim.root),
    ]
    .map(String::from);
    let out = tokio::task::spawn_blocking(move || tmas(&resume.each_ref().map(String::as_str)))
        .await
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(text(&out.stdout).contains("calls: all"), "{}", show(&out));
    let d = dir.clone();
    let resumed = tokio::task::spawn_blocking(move || export(&d))
        .await
        .unwrap();
    assert_eq!(
        resumed, base.export,
        "resumed results differ from a fault-free run"
    );
}

/// The text of `GET http://ADDR/metrics` ("" while nothing answers).
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let request = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

/// (key, ok, completed_at_ms) of every stored call.
fn call_rows(run_dir: &Path) -> Vec<(String, bool, i64)> {
    let conn = read_store(run_dir);
    let mut stmt = conn
        .prepare("SELECT call_key, ok, completed_at_ms FROM calls ORDER BY call_key")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn an_outage_past_the_budget_degrades_the_run_and_resume_recovers_it_exactly() {
    let mut sim = Sim::start(0, 50);
    let port = sim.port;
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 4, 3);
    let base = baseline(&sim, &config, &tmp.path().join("fault-free"));

    // The endpoint goes away mid-run and stays away: every call from then on waits out
    // the (short) outage budget and is lost; the run finishes degraded.
    reset(&sim);
    let dir = tmp.path().join("outage");
    let dir_s = dir.display().to_string();
    let config_s = config.display().to_string();
    // Port 0: the child binds a free port and logs it (a port picked here could be taken
    // by another test before the child binds it).
    let mut child = spawn_tmas(&[
        "--log",
        "warn,tmas_observability::prometheus=info",
        "run",
        "--metrics-addr",
        "127.0.0.1:0",
        "-c",
        &config_s,
        "--out",
        &dir_s,
        "--progress-every",
        "0",
        "--set",
        "resilience.outage_budget_secs=1",
        "--set",
        "resilience.max_attempts=2",
    ]);
    let stderr = StderrLines::take_from(&mut child);
    let serving = stderr.wait_for("serving Prometheus metrics");
    let metrics_addr = serving
        .split_once("url=http://")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {serving:?}"))
        .to_owned();
    wait_for_stored(&dir, base.requests / 3, &mut child);
    sim.kill();
    // Lost calls show in the metrics while the run goes on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let lost_metric = loop {
        let text = scrape(&metrics_addr);
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with("tmas_calls_lost_total{"))
        {
            break line.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "no tmas_calls_lost_total while calls were lost:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        lost_metric.contains("role=") && lost_metric.contains("kind="),
        "{lost_metric}"
    );
    let mut out = child.wait_with_output().unwrap();
    out.stderr = stderr.finish().into_bytes();
    assert_eq!(code(&out), Some(3), "{}", show(&out));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("degraded") || stdout.contains("failed (no result)"),
        "{}",
        show(&out)
    );
    assert!(
        stdout.contains("calls lost by role, endpoint and error kind"),
        "{}",
        show(&out)
    );
    assert!(!stdout.contains("0 failed"), "{}", show(&out));
    assert!(text(&out.stderr).contains("--resume"), "{}", show(&out));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "degraded", "{summary}");
    let lost = summary["accounting"]["calls_lost"].as_u64().unwrap_or(0);
    assert!(lost > 0, "{summary}");
    let kinds: Vec<FailureKind> = summary["accounting"]["lost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_value(l["kind"].clone()).unwrap())
        .collect();
    assert!(
        kinds.iter().all(|k| matches!(
            k,
            FailureKind::Outage | FailureKind::Connect | FailureKind::Timeout
        )),
        "{kinds:?}"
    );
    // The table's calls-lost column adds up to the lost calls.
    let csv = std::fs::read_to_string(dir.join("pass_at_1.csv")).unwrap();
    let col = csv
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == "calls_lost")
        .expect("calls_lost column");
    let column: u64 = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(column, lost);
    let report = tmas(&["report", &dir_s]);
    assert!(
        text(&report.stdout).contains("calls lost by role, endpoint and error kind"),
        "{}",
        show(&report)
    );

    // --keep-failed replays the failures: still degraded, nothing sent (the endpoint is
    // still down, so its start-up check is skipped).
    let before = call_rows(&dir);
    let out = tmas(&[
        "run",
        "--resume",
        &dir_s,
        "--keep-failed",
        "--no-preflight",
        "--progress-every",
        "0",
    ]);
    assert_eq!(code(&out), Some(3), "{}", show(&out));
    assert_eq!(call_rows(&dir), before, "--keep-failed sent calls");

    // The endpoint is back: the resume sends the failed calls (and the calls that follow
    // from their answers), never one that had been answered, and ends exactly where the
    // fault-free run did.
    let _sim = Sim::start(port, 50);
    let out = tmas(&["run", "--resume", &dir_s, "--progress-every", "0"]);
    assert_eq!(code(&out), Some(0), "{}", show(&out));
    assert!(text(&out.stdout).contains("calls: all"), "{}", show(&out));
    let after: std::collections::HashMap<String, (bool, i64)> = call_rows(&dir)
        .into_iter()
        .map(|(k, ok, at)| (k, (ok, at)))
        .collect();
    for (key, ok, at) in &before {
        if *ok {
            assert_eq!(
                after.get(key),
                Some(&(true, *at)),
                "answered call {key} was sent again"
            );
        }
    }
    assert!(
        after.values().all(|(ok, _)| *ok),
        "failures left in the store"
    );
    assert_eq!(
        export(&dir),
        base.export,
        "recovered results differ from a fault-free run"
    );
    assert_eq!(export_csv(&dir), base.csv);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed", "{summary}");
}
