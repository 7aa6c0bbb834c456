//! A one-route OpenAI-compatible server on loopback: every chat completion is answered
//! `"ok"` and every embeddings request with one vector per input; it records the
//! `x-tmas-call` header of each request. Enough to drive the model client through the
//! runtime's call executor; the client's own behaviour is tested in `tmas-client`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use tmas_client::{ClientConfig, EndpointSpec, ModelClient, ResiliencePolicy, TokenEstimate};

/// The server, and the `x-tmas-call` header of each request it received (in order).
pub struct MockModel {
    pub base_url: String,
    pub calls: Arc<Mutex<Vec<String>>>,
}

/// Starts the server on an ephemeral loopback port.
pub async fn start() -> MockModel {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
        .with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    MockModel {
        base_url: format!("http://{addr}/v1"),
        calls,
    }
}

fn record(calls: &Mutex<Vec<String>>, headers: &HeaderMap) {
    let call = headers
        .get("x-tmas-call")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    calls.lock().expect("calls lock").push(call);
}

async fn chat(
    State(calls): State<Arc<Mutex<Vec<String>>>>,
    headers: HeaderMap,
    Json(_): Json<Value>,
) -> Json<Value> {
    record(&calls, &headers);
    Json(json!({
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}
    }))
}

async fn embeddings(
    State(calls): State<Arc<Mutex<Vec<String>>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&calls, &headers);
    let inputs = body["input"].as_array().map_or(0, Vec::len);
    let data: Vec<Value> = (0..inputs)
        .map(|i| json!({"index": i, "embedding": [1.0, 0.0]}))
        .collect();
    Json(json!({"data": data, "usage": {"prompt_tokens": 2, "total_tokens": 2}}))
}

/// A client with one group `g` over one endpoint at `base_url`.
pub async fn client(base_url: &str) -> ModelClient {
    let endpoint = EndpointSpec {
        name: "m".into(),
        base_url: base_url.to_string(),
        model: "model-m".into(),
        api_key: None,
        max_in_flight: 4,
        requests_per_minute: None,
        tokens_per_minute: None,
        request_timeout: Duration::from_secs(20),
        max_connecting: tmas_client::DEFAULT_MAX_CONNECTING,
        stream_idle_timeout: Duration::from_secs(10),
        context_window: 32_768,
        token_estimate: TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        },
    };
    ModelClient::start(ClientConfig {
        endpoints: vec![endpoint],
        groups: vec![("g".into(), vec!["m".into()])],
        routing: Vec::new(),
        global_max_in_flight: 4,
        global_requests_per_minute: None,
        global_tokens_per_minute: None,
        policy: ResiliencePolicy::default(),
    })
    .await
    .expect("client starts")
}
