//! `tmas serve` over raw HTTP on 127.0.0.1 against a `tmas sim-server` process: answers,
//! usage sums, per-request parameters, validation errors, many requests at once,
//! streaming progress, cancellation when the client goes away, keys and limits, and a
//! down upstream.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cli::Sim;
use crate::support::serve::{Events, Server, eventually, post_then_leave, write_serve_config};

fn ask(model: &str, ext: Value) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Find the sum of the first 10 odd numbers."}
        ],
        "tmas": ext,
    })
}

/// Calls of one TMAS problem with N, M, T (every reply usable).
fn tmas_calls(n: u64, m: u64, t: u64) -> u64 {
    t * (n * (m + 2) + 2)
}

/// The sum of a Prometheus counter over its label sets.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn by_role(stats: &Value) -> BTreeMap<String, u64> {
    stats["by_role"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_answer_carries_the_methods_selection_and_usage_summed_over_every_internal_call() {
    let sim = Sim::start(0, 2);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_serve_config(dir.path(), &sim.root, ""), &[]);
    assert!(server.banner.contains("loopback only"), "{}", server.banner);

    let models = server.get("/v1/models").json();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "tmas/tmas-sim",
            "majority-vote/tmas-sim",
            "self-refine/tmas-sim",
            "verify-refine/tmas-sim",
            "pacore/tmas-sim",
            "rse/tmas-sim",
            "tmas-sim"
        ]
    );

    let reply = server.post(&ask(
        "tmas/tmas-sim",
        json!({"n": 3, "m": 1, "iterations": 2}),
    ));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "tmas/tmas-sim");
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let content = choice["message"]["content"].as_str().unwrap();
    assert!(
        content.contains("\\boxed{"),
        "the whole solution: {content}"
    );
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        choice["tmas"]["iteration"], 1,
        "the last iteration's selection"
    );

    // Every internal call counted: by role as the simulator saw them, tokens as the
    // model client counted them.
    let usage = &body["usage"];
    let calls = tmas_calls(3, 1, 2);
    assert_eq!(usage["tmas"]["calls"], calls);
    assert_eq!(usage["tmas"]["iterations"], 2);
    assert_eq!(sim.requests(), calls);
    let said: BTreeMap<String, u64> = usage["tmas"]["calls_by_role"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(said, by_role(&sim.stats()));
    let (prompt, completion) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    );
    assert!(prompt > 0 && completion > 0, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), prompt + completion);
    let metrics = server.get("/metrics").body;
    assert_eq!(
        counter(&metrics, "tmas_tokens_input_total") as u64,
        prompt,
        "{metrics}"
    );
    assert_eq!(
        counter(&metrics, "tmas_tokens_output_total") as u64,
        completion
    );

    // `n` choices run side by side, each a run of the method; usage covers them all.
    let reply = server.post(&json!({
        "model": "majority-vote/tmas-sim",
        "n": 3,
        "messages": [{"role": "user", "content": "What is 6 times 7?"}],
        "tmas": {"k": 4},
    }));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["choices"].as_array().unwrap().len(), 3);
    assert_eq!(body["usage"]["tmas"]["calls"], 12);
    assert_eq!(
        body["usage"]["tmas"]["calls_by_role"],
        json!({"solution": 12})
    );

    // The plain model: the conversation goes to the endpoint as it is, one call.
    let before = sim.requests();
    let reply = server.post(&json!({
        "model": "tmas-sim",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
    }));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert_eq!(body["model"], "tmas-sim");
    assert!(
        !body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(sim.requests(), before + 1);
}

#[test]
fn each_requests_method_keys_are_its_own_and_bad_ones_are_refused_naming_the_field() {
    let sim = Sim::start(0, 2);
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(
        dir.path(),
        &sim.root,
        "[serve]\nmax_calls_per_request = 100\nmax_body_bytes = 4096\n",
    );
    let server = Server::start(&config, &[]);

    // Two requests at once with different keys, then one with none: each gets its own.
    let wide = ask("tmas/tmas-sim", json!({"n": 4, "m": 1, "iterations": 1}));
    let deep = ask(
        "tmas",
        json!({"n": 1, "m": 2, "iterations": 3, "epsilon": 0.0}),
    );
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| server.post(&wide));
        let b = s.spawn(|| server.post(&deep));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.json()["usage"]["tmas"]["calls"], tmas_calls(4, 1, 1));
    assert_eq!(b.json()["usage"]["tmas"]["calls"], tmas_calls(1, 2, 3));
    assert_eq!(b.json()["usage"]["tmas"]["iterations"], 3);
    let plain = server.post(&ask("tmas/tmas-sim", Value::Null)).json();
    assert_eq!(
        plain["usage"]["tmas"]["calls"],
        tmas_calls(2, 2, 2),
        "the config's"
    );
    // The extension's `method` picks the method; the reply names it.
    let pacore = server.post(&ask("tmas/tmas-sim", json!({"method": "pacore", "n": 2})));
    assert_eq!(pacore.json()["model"], "pacore/tmas-sim");
    assert_eq!(pacore.json()["usage"]["tmas"]["calls"], 4);

    let refused = |body: &str, status: u16, param: &str, needle: &str| {
        let reply = server.post_with(&[], body);
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        let error = &reply.json()["error"];
        let expected = if param.is_empty() {
            Value::Null
        } else {
            json!(param)
        };
        assert_eq!(error["param"], expected, "{body}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
        assert!(error["type"].is_string());
    };
    let body = |v: Value| v.to_string();
    refused(
        &body(ask("tmas", json!({"n": 0}))),
        400,
        "tmas.n",
        "tmas.n: must be at least 1, got 0",
    );
    refused(
        &body(ask("tmas", json!({"epsilon": 2}))),
        400,
        "tmas.epsilon",
        "must be within [0, 1], got 2",
    );
    refused(
        &body(ask("tmas", json!({"method": "best-of-n"}))),
        400,
        "tmas.method",
        "best-of-n",
    );
    refused(
        &body(ask("tmas", json!({"colour": 1}))),
        400,
        "tmas.colour",
        "colour",
    );
    refused(
        &body(ask("majority-vote/tmas-sim", json!({"iterations": 2}))),
        400,
        "tmas.iterations",
        "set iterations = 1",
    );
    refused(
        &body(ask("tmas", json!({"n": 8, "m": 8, "iterations": 3}))),
        400,
        "tmas",
        "over serve.max_calls_per_request (100)",
    );
    refused(
        &body(json!({"model": "tmas", "n": 99, "messages": [{"role": "user", "content": "x"}]})),
        400,
        "n",
        "n: must be within 1..=8",
    );
    refused(
        &body(ask("gpt-4o", Value::Null)),
        404,
        "model",
        "GET /v1/models lists",
    );
    refused(
        &body(json!({"model": "tmas", "messages": [{"role": "system", "content": "x"}]})),
        400,
        "messages",
        "no user message",
    );
    refused(
        r#"{"model": "tmas", "messages": 3}"#,
        400,
        "messages",
        "invalid type",
    );
    refused("{not json", 400, "", "invalid request body: not JSON");
    refused(r#"{"messages": []}"#, 400, "", "missing field `model`");
    let big = json!({"model": "tmas", "messages": [{"role": "user", "content": "x".repeat(5000)}]});
    let reply = server.post(&big);
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serve.max_body_bytes")
    );
    // Nothing refused reached the model.
    let made = tmas_calls(4, 1, 1) + tmas_calls(1, 2, 3) + tmas_calls(2, 2, 2) + 4;
    assert_eq!(sim.requests(), made);
}

#[test]
fn fifty_requests_at_once_share_one_runtime_and_all_get_their_answer() {
    let sim = Sim::start(0, 20);
    let dir = tempfile::tempdir().unwrap();
    // Fewer problems at once than requests: admission queues the rest.
    let server = Server::start(&write_serve_config(dir.path(), &sim.root, ""), &[]);
    let replies: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let server = &server;
                s.spawn(move || {
                    let body = json!({
                        "model": "tmas/tmas-sim",
                        "messages": [{"role": "user", "content": format!("Problem {i}: 2+{i}?")}],
                        "tmas": {"n": 1, "m": 1, "iterations": 1},
                    });
                    server.post(&body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &replies {
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["usage"]["tmas"]["calls"], tmas_calls(1, 1, 1));
    }
    let ids: std::collections::BTreeSet<String> = replies
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 50, "each request its own id");
    assert_eq!(sim.requests(), 50 * tmas_calls(1, 1, 1));
    let health = server.health();
    assert_eq!(health["problems_open"], 0, "{health}");
    assert_eq!(health["problems_started"], 50, "{health}");
}

#[test]
fn a_stream_shows_progress_as_it_happens_then_the_answer_usage_and_done() {
    let sim = Sim::start(0, 100);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_serve_config(dir.path(), &sim.root, ""), &[]);
    let mut body = ask("tmas/tmas-sim", json!({"n": 2, "m": 1, "iterations": 2}));
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let mut events = Events::open(&server.addr, &body);
    assert_eq!(events.status, 200);
    let all = events.rest();
    let last = all.last().expect("events");
    assert_eq!(last.data, "[DONE]");
    let chunks: Vec<(Value, Instant)> = all[..all.len() - 1]
        .iter()
        .map(|e| (e.json(), e.at))
        .collect();
    for (c, _) in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["model"], "tmas/tmas-sim");
    }
    let text_of = |field: &str| -> Vec<(String, Instant)> {
        chunks
            .iter()
            .filter_map(|(c, at)| {
                let t = c["choices"][0]["delta"][field].as_str()?;
                (!t.is_empty()).then(|| (t.to_owned(), *at))
            })
            .collect()
    };
    let reasoning = text_of("reasoning_content");
    let content = text_of("content");
    let said: String = reasoning.iter().map(|(t, _)| t.as_str()).collect();
    assert!(said.starts_with("Iteration 1 started.\n"), "{said}");
    for line in [
        "Iteration 1: solution 2 of 2 drafted.",
        "Iteration 1: 2 of 2 verifications done.",
        "Iteration 1 done: 2 of 2 candidates answered",
        "Iteration 2 started.",
        "Iteration 2 done:",
        "best: candidate",
    ] {
        assert!(said.contains(line), "{line:?} missing from:\n{said}");
    }
    // Progress came while the method ran: the first line at least two call latencies
    // (100 ms each, one after the other) before the answer.
    let answer_at = content.first().expect("content").1;
    assert!(
        answer_at.duration_since(reasoning[0].1) >= Duration::from_millis(200),
        "progress was held back until the end"
    );
    assert!(reasoning.iter().all(|(_, at)| *at <= answer_at));
    let answer: String = content.iter().map(|(t, _)| t.as_str()).collect();
    assert!(answer.contains("\\boxed{"), "{answer}");
    let finish: Vec<&Value> = chunks
        .iter()
        .filter_map(|(c, _)| c["choices"].get(0))
        .filter(|c| !c["finish_reason"].is_null())
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["finish_reason"], "stop");
    let usage = &chunks.last().unwrap().0;
    assert_eq!(
        usage["choices"],
        json!([]),
        "the usage chunk comes last: {usage}"
    );
    assert_eq!(usage["usage"]["tmas"]["calls"], tmas_calls(2, 1, 2));
    assert_eq!(sim.requests(), tmas_calls(2, 1, 2));
    let u = &usage["usage"];
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );

    // Without include_usage: no usage chunk.
    body["stream_options"] = json!({"include_usage": false});
    let rest = Events::open(&server.addr, &body).rest();
    assert!(rest.iter().all(|e| !e.data.contains("\"usage\"")));
    assert_eq!(rest.last().unwrap().data, "[DONE]");
}

/// Waits until the simulator holds `n` requests in flight.
fn wait_in_flight(sim: &Sim, n: u64) {
    assert!(
        eventually(Duration::from_secs(30), || sim.stats()["in_flight"]
            .as_u64()
            .unwrap_or(0)
            >= n),
        "the simulator never held {n} requests: {}",
        sim.stats()
    );
}

#[test]
fn a_client_that_goes_away_stops_its_requests_calls_within_a_second_and_no_others() {
    // Calls that would take a minute: only cancellation ends them soon.
    let sim = Sim::start(0, 60_000);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_serve_config(dir.path(), &sim.root, ""), &[]);
    let long = ask("tmas/tmas-sim", json!({"n": 6, "m": 1, "iterations": 3}));

    // Non-streaming: the connection closes while the answer is computed.
    let conn = post_then_leave(&server.addr, &long);
    wait_in_flight(&sim, 6);
    let left = Instant::now();
    drop(conn);
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
    eprintln!(
        "non-streaming: calls stopped {:?} after the client left",
        left.elapsed()
    );
    // Only the first iteration's solutions were ever sent.
    assert_eq!(sim.requests(), 6);

    // Streaming: one request leaves mid-stream, another one's calls carry on.
    let mut stay = ask("tmas/tmas-sim", json!({"n": 2, "m": 1, "iterations": 1}));
    stay["stream"] = json!(true);
    let mut leave = long.clone();
    leave["stream"] = json!(true);
    let mut staying = Events::open(&server.addr, &stay);
    let mut leaving = Events::open(&server.addr, &leave);
    assert!(leaving.next().is_some(), "the stream started");
    wait_in_flight(&sim, 8);
    leaving.drop_connection();
    assert!(
        eventually(Duration::from_secs(1), || sim.stats()["in_flight"] == 2),
        "the leaving request's calls still in flight a second later: {}",
        sim.stats()
    );
    // The staying request's two calls are still running.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sim.stats()["in_flight"], 2, "{}", sim.stats());
    assert_eq!(server.health()["problems_open"], 1, "{}", server.health());
    assert!(staying.next().is_some());
    staying.drop_connection();
}

#[test]
fn a_down_upstream_gives_an_openai_style_error_not_a_hang() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(
        dir.path(),
        &format!("http://127.0.0.1:{port}"),
        "[resilience]\noutage_budget_secs = 2\nbackoff_min_ms = 10\nbackoff_max_ms = 50\n",
    );
    let server = Server::start(&config, &[]);
    let started = Instant::now();
    let reply = server.post(&ask(
        "tmas/tmas-sim",
        json!({"n": 1, "m": 1, "iterations": 1}),
    ));
    assert_eq!(reply.status, 502, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["type"], "upstream_error");
    assert_eq!(error["code"], "upstream_error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("upstream model failed"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    // The plain model, passed through, fails the same way.
    let reply =
        server.post(&json!({"model": "tmas-sim", "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert_eq!(reply.json()["error"]["type"], "upstream_error");
}

#[test]
fn api_keys_from_the_environment_are_required_and_never_printed() {
    let sim = Sim::start(0, 2);
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(
        dir.path(),
        &sim.root,
        "[serve]\napi_key_envs = [\"SERVE_TEST_KEY_A\", \"SERVE_TEST_KEY_B\"]\n",
    );
    // A named variable that is not set: refused at start, naming it (exit 2).
    let out = crate::support::cli::command(&[
        "serve",
        "-c",
        config.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
    ])
    .env("SERVE_TEST_KEY_A", "alpha-secret")
    .env_remove("SERVE_TEST_KEY_B")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SERVE_TEST_KEY_B"), "{err}");
    assert!(!err.contains("alpha-secret"), "{err}");

    let server = Server::start(
        &config,
        &[
            ("SERVE_TEST_KEY_A", "alpha-secret"),
            ("SERVE_TEST_KEY_B", "beta-secret"),
        ],
    );
    assert!(
        server.banner.contains("2 API key(s) accepted"),
        "{}",
        server.banner
    );
    let body = ask("tmas", json!({"n": 1, "m": 1, "iterations": 1})).to_string();
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", "alpha-secret")],
    ] {
        let reply = server.post_with(&headers, &body);
        assert_eq!(reply.status, 401, "{headers:?}: {}", reply.body);
        assert_eq!(reply.json()["error"]["type"], "authentication_error");
    }
    assert_eq!(server.get("/v1/models").status, 401);
    assert_eq!(server.get("/health").status, 200, "health needs no key");
    for key in ["alpha-secret", "beta-secret"] {
        let auth = format!("Bearer {key}");
        let reply = server.post_with(&[("authorization", &auth)], &body);
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(sim.requests(), 2 * tmas_calls(1, 1, 1));
    let banner = server.banner.clone();
    let printed = format!("{banner}{}", server.stop());
    assert!(!printed.contains("secret"), "{printed}");
}

#[test]
fn the_plain_model_streams_through_piece_by_piece_as_the_upstream_sends() {
    // 8 KiB solutions in 512-byte frames, ~50 ms apart (400 µs per token).
    let sim = Sim::start_with(
        0,
        2,
        &["--per-output-token-us", "400", "--solution-bytes", "8192"],
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_serve_config(dir.path(), &sim.root, ""), &[]);
    let body = json!({
        "model": "tmas-sim",
        "messages": [{"role": "user", "content": "Find the sum of the first 10 odd numbers."}],
        "n": 2,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let mut events = Events::open(&server.addr, &body);
    assert_eq!(events.status, 200);
    let all = events.rest();
    assert_eq!(all.last().unwrap().data, "[DONE]");
    let chunks: Vec<(Value, Instant)> = all[..all.len() - 1]
        .iter()
        .map(|e| (e.json(), e.at))
        .collect();
    for index in 0..2 {
        let of_choice: Vec<&(Value, Instant)> = chunks
            .iter()
            .filter(|(c, _)| c["choices"][0]["index"] == index)
            .collect();
        let content: Vec<(&str, Instant)> = of_choice
            .iter()
            .filter_map(|(c, at)| Some((c["choices"][0]["delta"]["content"].as_str()?, *at)))
            .filter(|(t, _)| !t.is_empty())
            .collect();
        assert!(
            content.len() >= 3,
            "choice {index}: the answer came in {} pieces",
            content.len()
        );
        let finish = of_choice
            .iter()
            .find(|(c, _)| !c["choices"][0]["finish_reason"].is_null())
            .expect("a finish chunk");
        assert_eq!(finish.0["choices"][0]["finish_reason"], "stop");
        // The first piece arrived while the upstream was still generating (at least two
        // of its frame gaps before the end), not with the rest at the end.
        assert!(
            finish.1.duration_since(content[0].1) >= Duration::from_millis(100),
            "choice {index}: every piece came at the end"
        );
        assert!(content.iter().all(|(_, at)| *at <= finish.1));
        let answer: String = content.iter().map(|(t, _)| *t).collect();
        assert!(answer.len() >= 8000, "choice {index}: {answer}");
    }
    let usage = &chunks.last().unwrap().0;
    assert_eq!(usage["choices"], json!([]), "usage comes last: {usage}");
    let u = &usage["usage"];
    assert!(u["completion_tokens"].as_u64().unwrap() > 0, "{u}");
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );
}
