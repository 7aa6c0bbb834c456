//! Fault injection and overload over loopback HTTP, switched at runtime via
//! `POST /sim/faults`.

use std::time::Duration;

use crate::support::sim::*;
use serde_json::{Value, json};
use tmas::sim::{SimOptions, SimServer};

async fn set_faults(client: &reqwest::Client, server: &SimServer, faults: Value) {
    let resp = client
        .post(format!("{}/sim/faults", root(server)))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_answers_429_with_retry_after() {
    let opts = SimOptions {
        max_concurrency: 2,
        retry_after_secs: 3,
        latency: "fixed:3600s".parse().unwrap(),
        ..SimOptions::default()
    };
    let server = start(opts).await;
    let client = reqwest::Client::new();
    let mut held = Vec::new();
    for i in 0..2 {
        let (c, url) = (client.clone(), server.base_url());
        held.push(tokio::spawn(async move {
            c.post(format!("{url}/chat/completions"))
                .header("x-tmas-role", "solution")
                .json(&body(&format!("q{i}"), false, None))
                .send()
                .await
        }));
    }
    wait_for(&server, "two requests in flight", |s| s.in_flight == 2).await;
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("q3", false, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "3");
    let s = server.stats();
    assert_eq!(
        (
            s.faults["overload"],
            s.responses_by_status["429"],
            s.peak_in_flight
        ),
        (1, 1, 2)
    );
    server.shutdown().await;
    for h in held {
        assert!(
            h.await.unwrap().is_err(),
            "held requests end with the server"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_status_can_be_503() {
    let opts = SimOptions {
        max_concurrency: 1,
        overload_status: 503,
        latency: "fixed:3600s".parse().unwrap(),
        ..SimOptions::default()
    };
    let server = start(opts).await;
    let client = reqwest::Client::new();
    let (c, url) = (client.clone(), server.base_url());
    let held = tokio::spawn(async move {
        c.post(format!("{url}/chat/completions"))
            .json(&body("x", false, None))
            .send()
            .await
    });
    wait_for(&server, "one request in flight", |s| s.in_flight == 1).await;
    let resp = post(&client, &server, "judge", "p", 0, &body("y", false, None))
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    server.shutdown().await;
    let _ = held.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_then_back_to_normal() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let sol = body("Solve it.", false, None);

    set_faults(&client, &server, json!({"error_500": 1.0})).await;
    let resp = post(&client, &server, "solution", "p", 0, &sol)
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "server_error");

    set_faults(&client, &server, json!({"drop_connection": 1.0})).await;
    let err = post(&client, &server, "solution", "p", 0, &sol)
        .await
        .unwrap_err();
    assert!(
        !err.is_timeout() && !err.is_status(),
        "expected a connection error, got {err:?}"
    );
    let streamed = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("Solve it.", true, None),
    )
    .await;
    assert!(streamed.is_err(), "stream requests are dropped too");

    set_faults(&client, &server, json!({"malformed_json": 1.0})).await;
    let resp = post(&client, &server, "solution", "p", 0, &sol)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(serde_json::from_str::<Value>(&resp.text().await.unwrap()).is_err());
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("Solve it.", true, None),
    )
    .await
    .unwrap();
    let text = resp.text().await.unwrap();
    let first = text.lines().next().unwrap().strip_prefix("data: ").unwrap();
    assert!(serde_json::from_str::<Value>(first).is_err());

    set_faults(&client, &server, json!({"truncated": 1.0})).await;
    let v: Value = post(&client, &server, "solution", "p", 0, &sol)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert!(last_boxed(v["choices"][0]["message"]["content"].as_str().unwrap()).is_none());

    set_faults(&client, &server, json!({"unparseable_score": 1.0})).await;
    let candidate = ask(&client, &server, "solution", "p", 0, "Solve it.").await;
    assert!(
        last_boxed(&candidate).is_some(),
        "other roles are unaffected"
    );
    let verdict = ask(&client, &server, "verification", "p", 0, &candidate).await;
    assert!(last_boxed(&verdict).is_none(), "{verdict}");

    set_faults(&client, &server, json!({"interrupted_stream": 1.0})).await;
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("Solve it.", true, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("\"role\":\"assistant\""), "{text}");
    assert!(
        text.trim_end().ends_with("data: [DONE]"),
        "ends with [DONE]: {text}"
    );
    assert!(
        !text.contains("\"finish_reason\":\""),
        "no chunk carries a finish_reason: {text}"
    );
    // Non-stream: the connection is aborted mid-response (before or after the client has
    // read the headers, depending on how much the server flushed).
    match post(&client, &server, "solution", "p", 0, &sol).await {
        Err(e) => assert!(!e.is_timeout(), "{e:?}"),
        Ok(resp) => {
            assert_eq!(resp.status(), 200);
            assert!(resp.bytes().await.is_err(), "the body is cut off");
        }
    }

    set_faults(&client, &server, json!({"down": true})).await;
    assert_eq!(
        client
            .get(format!("{}/health", root(&server)))
            .send()
            .await
            .unwrap()
            .status(),
        503
    );
    assert_eq!(
        client
            .get(format!("{}/models", server.base_url()))
            .send()
            .await
            .unwrap()
            .status(),
        503
    );
    assert_eq!(
        post(&client, &server, "solution", "p", 0, &sol)
            .await
            .unwrap()
            .status(),
        503
    );

    set_faults(
        &client,
        &server,
        json!({"error_500": 1.0, "roles": ["judge"]}),
    )
    .await;
    assert_eq!(
        post(&client, &server, "solution", "p", 0, &sol)
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        post(&client, &server, "judge", "p", 0, &sol)
            .await
            .unwrap()
            .status(),
        500
    );

    let bad = client
        .post(format!("{}/sim/faults", root(&server)))
        .json(&json!({"hang": 2.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("faults.hang"));

    set_faults(&client, &server, json!({})).await;
    assert_eq!(
        post(&client, &server, "solution", "p", 0, &sol)
            .await
            .unwrap()
            .status(),
        200
    );
    let s = server.stats();
    for kind in [
        "error_500",
        "drop_connection",
        "malformed_json",
        "truncated",
        "unparseable_score",
    ] {
        assert!(s.faults[kind] >= 1, "{kind}: {s:?}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hangs_stall_until_the_client_gives_up() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::new();
    set_faults(&client, &server, json!({"hang": 1.0, "hang_secs": 3600})).await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = post(
        &quick,
        &server,
        "solution",
        "p",
        0,
        &body("Solve it.", false, None),
    )
    .await
    .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");

    // Streams hang after the first content chunk: headers and some data arrive first.
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("Solve it.", true, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let mut resp = resp;
    let first = resp.chunk().await.unwrap().expect("a first chunk");
    assert!(first.starts_with(b"data: "));
    let more = tokio::time::timeout(Duration::from_secs(2), async {
        let mut got = Vec::new();
        while let Ok(Some(c)) = resp.chunk().await {
            got.extend_from_slice(&c);
            if got.windows(6).any(|w| w == b"[DONE]") {
                break;
            }
        }
        got
    })
    .await;
    assert!(more.is_err(), "the stream should stall");
    assert_eq!(server.stats().faults["hang"], 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_requests_answer_the_configured_status_then_all_is_served() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::new();
    set_faults(
        &client,
        &server,
        json!({"first_requests": {"count": 3, "status": 429, "retry_after_secs": 1}}),
    )
    .await;
    let models = || client.get(format!("{}/models", server.base_url())).send();
    let resp = models().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    // The start-up check's request is not spared.
    let resp = client
        .post(format!("{}/chat/completions", server.base_url()))
        .header(tmas::sim::PREFLIGHT_HEADER, "1")
        .json(&body("Reply with OK.", false, Some(1)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("q", false, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(
        models().await.unwrap().status(),
        200,
        "the fourth is served"
    );
    let resp = post(
        &client,
        &server,
        "solution",
        "p",
        0,
        &body("q", false, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(server.stats().faults["first_requests"], 3);
    // New settings count again; without `retry_after_secs` no header is sent.
    set_faults(&client, &server, json!({"first_requests": {"count": 1}})).await;
    let resp = models().await.unwrap();
    assert_eq!(resp.status(), 500, "the default status");
    assert!(resp.headers().get("retry-after").is_none());
    assert_eq!(models().await.unwrap().status(), 200);
    server.shutdown().await;
}
