//! Helpers shared by the simulator's integration tests (tests/sim_*.rs).

use std::net::SocketAddr;

use serde_json::{Value, json};
use tmas::sim::{SimOptions, SimServer};

pub async fn start(opts: SimOptions) -> SimServer {
    start_with(opts, None).await
}

pub async fn start_with(opts: SimOptions, dataset: Option<Vec<(String, String)>>) -> SimServer {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    SimServer::start(opts, addr, dataset)
        .await
        .expect("simulator starts")
}

/// Root URL (without `/v1`).
pub fn root(server: &SimServer) -> String {
    format!("http://{}", server.local_addr())
}

pub fn body(user: &str, stream: bool, max_tokens: Option<u64>) -> Value {
    let mut b = json!({
        "model": "tmas-sim",
        "messages": [{"role": "system", "content": "You are a careful mathematician."},
                     {"role": "user", "content": user}],
        "stream": stream,
        "temperature": 1.0,
    });
    if let Some(m) = max_tokens {
        b["max_tokens"] = json!(m);
    }
    b
}

/// Sends a chat request with the x-tmas-* headers.
pub async fn post(
    client: &reqwest::Client,
    server: &SimServer,
    role: &str,
    problem: &str,
    iteration: u32,
    body: &Value,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{}/chat/completions", server.base_url()))
        .header("x-tmas-role", role)
        .header("x-tmas-problem", problem)
        .header("x-tmas-iteration", iteration.to_string())
        .json(body)
        .send()
        .await
}

/// A non-stream request's `choices[0].message.content`.
pub async fn ask(
    client: &reqwest::Client,
    server: &SimServer,
    role: &str,
    problem: &str,
    iteration: u32,
    user: &str,
) -> String {
    let resp = post(
        client,
        server,
        role,
        problem,
        iteration,
        &body(user, false, None),
    )
    .await
    .expect("request sent");
    assert_eq!(resp.status(), 200, "status");
    let v: Value = resp.json().await.expect("JSON body");
    v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_owned()
}

/// The JSON object inside a bank reply (fences and text around it are allowed).
pub fn json_in(reply: &str) -> Value {
    let a = reply.find('{').expect("an object");
    let b = reply.rfind('}').expect("an object");
    serde_json::from_str(&reply[a..=b]).expect("valid JSON")
}

/// The final answer of a text, by the rule the orchestrator reads replies with.
pub use tmas::method::answer::last_boxed;

/// Reads an SSE body into (content, reasoning, finish_reason, usage, saw_done).
pub async fn read_sse(
    resp: reqwest::Response,
) -> (String, String, Option<String>, Option<Value>, bool) {
    let text = resp.text().await.expect("SSE body");
    let (mut content, mut reasoning, mut finish, mut usage, mut done) =
        (String::new(), String::new(), None, None, false);
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let v: Value = serde_json::from_str(data).expect("chunk is JSON");
        assert_eq!(v["object"], "chat.completion.chunk");
        let d = &v["choices"][0]["delta"];
        content += d["content"].as_str().unwrap_or("");
        reasoning += d["reasoning_content"]
            .as_str()
            .or(d["reasoning"].as_str())
            .unwrap_or("");
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_owned());
        }
        if !v["usage"].is_null() {
            usage = Some(v["usage"].clone());
        }
    }
    (content, reasoning, finish, usage, done)
}

/// Polls `cond` on the simulator's stats until true (generous deadline, no fixed sleeps).
pub async fn wait_for(server: &SimServer, what: &str, cond: impl Fn(&tmas::sim::SimStats) -> bool) {
    for _ in 0..6000 {
        if cond(&server.stats()) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}: {:?}", server.stats());
}
