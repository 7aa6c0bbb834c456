//! The simulator over loopback HTTP: response shapes, streaming, determinism, stats,
//! request recording and the auxiliary routes.

use crate::support::sim::*;
use serde_json::Value;
use tmas::sim::{ReasoningField, SimOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_stream_shape_and_usage() {
    let opts = SimOptions {
        reasoning_bytes: 300,
        reasoning_field: ReasoningField::Reasoning,
        ..SimOptions::default()
    };
    let server = start(opts).await;
    let client = reqwest::Client::new();
    let resp = post(
        &client,
        &server,
        "solution",
        "p1",
        0,
        &body("Solve it.", false, None),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "tmas-sim");
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["role"], "assistant");
    let content = msg["content"].as_str().unwrap();
    assert!(content.starts_with("Strategy: "), "{content}");
    assert!(last_boxed(content).is_some());
    assert_eq!(msg["reasoning"].as_str().unwrap().len(), 300);
    assert!(msg.get("reasoning_content").is_none());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let u = &v["usage"];
    let (p, c, t) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
        u["total_tokens"].as_u64().unwrap(),
    );
    assert!(p > 0 && c > 0 && p + c == t, "{u}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_shape_with_and_without_latency() {
    for latency in ["none", "fixed:5ms"] {
        let opts = SimOptions {
            latency: latency.parse().unwrap(),
            per_output_token_us: if latency == "none" { 0 } else { 10 },
            reasoning_bytes: 1000,
            solution_bytes: 5000,
            stream_chunk_bytes: 700,
            ..SimOptions::default()
        };
        let server = start(opts).await;
        let client = reqwest::Client::new();
        let plain = ask(&client, &server, "solution", "p1", 0, "Solve it.").await;
        // Count only the streamed requests below.
        server.reset();
        let mut b = body("Solve it.", true, None);
        let resp = post(&client, &server, "solution", "p1", 0, &b)
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let (content, reasoning, finish, usage, done) = read_sse(resp).await;
        // The stream flag changes the body, hence the draw; compare shapes, not texts.
        assert_eq!(content.len(), 5000, "{latency}");
        assert_eq!(plain.len(), 5000);
        assert_eq!(reasoning.len(), 1000);
        assert_eq!(finish.as_deref(), Some("stop"));
        assert!(usage.unwrap()["completion_tokens"].as_u64().unwrap() >= 1500);
        assert!(done);
        // max_tokens truncates and reports `length`.
        b["max_tokens"] = 300.into();
        let (content, reasoning, finish, _, done) = read_sse(
            post(&client, &server, "solution", "p1", 0, &b)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(finish.as_deref(), Some("length"));
        assert_eq!(content.len() + reasoning.len(), 1200);
        assert!(done);
        wait_for(&server, "streams to finish", |s| s.in_flight == 0).await;
        let s = server.stats();
        assert_eq!(s.ok_by_role["solution"], 2, "{s:?}");
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_replies_and_different_seed_differs() {
    async fn run(seed: u64) -> Vec<String> {
        let server = start(SimOptions {
            seed,
            ..SimOptions::default()
        })
        .await;
        let client = reqwest::Client::new();
        let mut out = Vec::new();
        for problem in ["a", "b", "c"] {
            // Identical requests get successive draws (like N candidates of one prompt).
            for _ in 0..4 {
                out.push(ask(&client, &server, "solution", problem, 1, "Solve it.").await);
            }
            out.push(
                ask(
                    &client,
                    &server,
                    "verification",
                    problem,
                    1,
                    &out[out.len() - 1].clone(),
                )
                .await,
            );
        }
        server.shutdown().await;
        out
    }
    let a = run(7).await;
    assert_eq!(a, run(7).await);
    assert_ne!(a, run(8).await);
    let distinct: std::collections::HashSet<_> = a[..4].iter().collect();
    assert!(
        distinct.len() > 1,
        "identical prompts should give different candidates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_metrics_models_health_and_recording() {
    let server = start(SimOptions {
        record_requests: 2,
        ..SimOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let root = root(&server);
    assert_eq!(
        client
            .get(format!("{root}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let models: Value = client
        .get(format!("{}/models", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tmas-sim");

    for i in 0..3 {
        let resp = client
            .post(format!("{}/chat/completions", server.base_url()))
            .header("x-tmas-role", "judge")
            .header("x-tmas-problem", format!("p{i}"))
            .header(
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            )
            .header("authorization", "Bearer secret")
            .json(&body(&format!("question {i}"), false, Some(50)))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    let bad = client
        .post(format!("{}/chat/completions", server.base_url()))
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let err: Value = bad.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a chat-completion request")
    );

    let s: Value = client
        .get(format!("{root}/sim/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["requests_total"], 4);
    assert_eq!(s["by_role"]["judge"], 3);
    assert_eq!(s["ok_by_role"]["judge"], 3);
    assert_eq!(s["responses_by_status"]["200"], 3);
    assert_eq!(s["responses_by_status"]["400"], 1);
    assert_eq!(s["in_flight"], 0);
    assert!(s["peak_in_flight"].as_u64().unwrap() >= 1);
    assert!(s["busy_seconds"].as_f64().unwrap() > 0.0);
    let recent = s["recent_requests"].as_array().unwrap();
    assert_eq!(recent.len(), 2);
    let last = &recent[1];
    assert_eq!(last["headers"]["x-tmas-problem"], "p2");
    assert!(
        last["headers"]["traceparent"]
            .as_str()
            .unwrap()
            .starts_with("00-0af7")
    );
    assert!(
        last["headers"].get("authorization").is_none(),
        "never keep credentials"
    );
    assert_eq!(last["messages"][1][1], "question 2");
    assert_eq!(last["max_tokens"], 50);

    let metrics = client
        .get(format!("{root}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("tmas_sim_requests_total 4"), "{metrics}");
    assert!(metrics.contains("tmas_sim_responses_total{status=\"400\"} 1"));

    assert_eq!(
        client
            .post(format!("{root}/sim/reset"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let s = server.stats();
    assert_eq!((s.requests_total, s.recent_requests.len()), (0, 0));
    assert_eq!(
        client
            .get(format!("{root}/nothing"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    server.shutdown().await;
}

/// POST /v1/embeddings with the x-tmas-* headers.
async fn embed(
    client: &reqwest::Client,
    server: &tmas::sim::SimServer,
    call: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(format!("{}/embeddings", server.base_url()))
        .header("x-tmas-role", "embedding")
        .header("x-tmas-problem", "p1")
        .header("x-tmas-iteration", "1")
        .header("x-tmas-call", call)
        .json(body)
        .send()
        .await
        .expect("request sent")
}

fn cosine(a: &Value, b: &Value) -> f64 {
    let v = |x: &Value| -> Vec<f64> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_f64().unwrap())
            .collect()
    };
    let (a, b) = (v(a), v(b));
    let dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let norm = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>().sqrt();
    dot / (norm(&a) * norm(&b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_are_deterministic_unit_vectors_near_for_near_duplicates() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::new();
    let inputs = serde_json::json!({"model": "tmas-sim", "input": [
        "the sum of the roots is 7",
        "The sum of the roots is 7!",
        "the product of two primes is never a square",
    ], "encoding_format": "float"});
    let resp = embed(&client, &server, "p1/it1/embedding/a0", &inputs).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "list");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["index"], i);
        assert_eq!(d["embedding"].as_array().unwrap().len(), 256);
        assert!((cosine(&d["embedding"], &d["embedding"]) - 1.0).abs() < 1e-6);
    }
    let near = cosine(&data[0]["embedding"], &data[1]["embedding"]);
    let far = cosine(&data[0]["embedding"], &data[2]["embedding"]);
    assert!(near > 0.99 && far < 0.5, "near {near}, far {far}");
    let u = &v["usage"];
    assert!(u["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(u["prompt_tokens"], u["total_tokens"]);
    // The same text gives the same vector in any request; one string is one input.
    let one = embed(
        &client,
        &server,
        "p1/it1/embedding/a1",
        &serde_json::json!({"input": "the sum of the roots is 7"}),
    )
    .await;
    let one: Value = one.json().await.unwrap();
    assert_eq!(one["data"][0]["embedding"], data[0]["embedding"]);
    // Bad requests are refused with the reason.
    for (body, needle) in [
        (serde_json::json!({"input": []}), "must not be empty"),
        (
            serde_json::json!({"messages": []}),
            "not an embeddings request",
        ),
    ] {
        let resp = embed(&client, &server, "p1/it1/embedding/a2", &body).await;
        assert_eq!(resp.status(), 400);
        let text = resp.text().await.unwrap();
        assert!(text.contains(needle), "{text}");
    }
    let s = server.stats();
    assert_eq!(s.by_role["embedding"], 4);
    assert_eq!(s.ok_by_role["embedding"], 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_get_the_chat_faults_that_apply_to_them() {
    let server = start(SimOptions::default()).await;
    let client = reqwest::Client::new();
    let body = serde_json::json!({"input": ["a fact"]});
    let faults = |json: Value| serde_json::from_value::<tmas::sim::FaultRates>(json).unwrap();
    server
        .set_faults(faults(
            serde_json::json!({"error_500": 1.0, "roles": ["embedding"]}),
        ))
        .unwrap();
    let resp = embed(&client, &server, "c/a0", &body).await;
    assert_eq!(resp.status(), 500);
    server
        .set_faults(faults(serde_json::json!({"malformed_json": 1.0})))
        .unwrap();
    let resp = embed(&client, &server, "c/a0", &body).await;
    assert_eq!(resp.status(), 200);
    assert!(serde_json::from_slice::<Value>(&resp.bytes().await.unwrap()).is_err());
    // A fault meant for generated text changes nothing here.
    server
        .set_faults(faults(serde_json::json!({"truncated": 1.0})))
        .unwrap();
    let resp = embed(&client, &server, "c/a0", &body).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 256);
    server
        .set_faults(faults(serde_json::json!({"down": true})))
        .unwrap();
    assert_eq!(embed(&client, &server, "c/a0", &body).await.status(), 503);
    let s = server.stats();
    assert_eq!(s.faults["error_500"], 1);
    assert_eq!(s.faults["malformed_json"], 1);
    assert_eq!(s.faults.get("truncated").copied().unwrap_or(0), 0);
    server.shutdown().await;
}
