//! A scriptable OpenAI-compatible mock server for the client tests, plus config helpers.
//!
//! The server runs on its own Tokio runtime in its own thread, so [`MockServer::kill`]
//! is abrupt (the runtime is dropped: every connection is reset, like a crashed process)
//! and [`MockServer::restart`] binds the same loopback port again. It counts requests in
//! flight and records the peak, records each request's headers and JSON body, and
//! answers according to a script of [`Reply`]s (then a default reply). Chat and
//! embeddings requests (`/v1/embeddings`) take their replies from the same script; there
//! [`Reply::Ok`] means a valid embeddings reply: input `i` of `text` gets the vector
//! `[bytes of text, i]`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};
use tmas_client::{ClientConfig, EndpointSpec, ResiliencePolicy, TokenEstimate};

/// Which field carries reasoning text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningField {
    /// SGLang.
    ReasoningContent,
    /// Current vLLM.
    Reasoning,
}

impl ReasoningField {
    fn key(self) -> &'static str {
        match self {
            Self::ReasoningContent => "reasoning_content",
            Self::Reasoning => "reasoning",
        }
    }
}

/// How the server answers one chat request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A completion (JSON or SSE, as the request asks), after `delay`.
    Ok {
        content: String,
        reasoning: Option<(ReasoningField, String)>,
        finish_reason: String,
        delay: Duration,
    },
    /// An HTTP error, optionally with `Retry-After` (seconds).
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Never answer.
    Hang,
    /// Begin a 200 answer after `after`, then break the connection before the body ends:
    /// a server killed in the middle of a generation.
    Cut { after: Duration },
    /// Send SSE headers and one chunk, then go silent.
    StreamStall,
    /// Wait, then answer as `then` (an error or a bad body after a generation's time).
    After { delay: Duration, then: Box<Reply> },
    /// What llama.cpp's server sends when the next request interrupts a stream: the role
    /// chunk, then `[DONE]`, no `finish_reason`.
    Interrupted,
    /// Any status with a raw body (malformed JSON, empty, …).
    Raw { status: u16, body: String },
    /// An error whose body echoes the request's `Authorization` header.
    EchoAuth { code: u16 },
}

impl Reply {
    /// A server killed `ms` milliseconds into the generation ([`Reply::Cut`]).
    pub fn cut_after(ms: u64) -> Self {
        Reply::Cut {
            after: Duration::from_millis(ms),
        }
    }

    pub fn ok(content: &str) -> Self {
        Reply::Ok {
            content: content.into(),
            reasoning: None,
            finish_reason: "stop".into(),
            delay: Duration::ZERO,
        }
    }
    pub fn delayed(content: &str, delay: Duration) -> Self {
        Reply::Ok {
            content: content.into(),
            reasoning: None,
            finish_reason: "stop".into(),
            delay,
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub at: Instant,
    pub headers: HashMap<String, String>,
    pub body: serde_json::Value,
    /// Bytes of the body as received.
    pub body_len: usize,
}

/// Counter shared between servers (e.g. to watch a global cap across endpoints).
#[derive(Debug, Default)]
pub struct InFlight {
    pub now: AtomicUsize,
    pub peak: AtomicUsize,
}

impl InFlight {
    fn enter(self: &Arc<Self>) -> InFlightGuard {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        InFlightGuard(self.clone())
    }
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
pub struct MockState {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    pub in_flight: Arc<InFlight>,
    pub shared: Option<Arc<InFlight>>,
    pub requests: Mutex<Vec<Recorded>>,
    pub chat_count: AtomicUsize,
    pub embeddings_count: AtomicUsize,
    /// `/health` answers: 0 = 200, 1 = 503 (not ready), 2 = 404 (no such route).
    pub health_mode: AtomicU8,
    pub health_hits: AtomicUsize,
    pub models_hits: AtomicUsize,
}

impl MockState {
    fn next_reply(&self) -> Reply {
        let scripted = self.script.lock().ok().and_then(|mut s| s.pop_front());
        scripted.unwrap_or_else(|| {
            self.default
                .lock()
                .map(|d| d.clone())
                .unwrap_or(Reply::Hang)
        })
    }
}

/// A running (or killed) mock endpoint.
pub struct MockServer {
    pub addr: SocketAddr,
    pub state: Arc<MockState>,
    stop: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl MockServer {
    pub fn start(default: Reply) -> Self {
        Self::start_with(default, None)
    }

    /// Start with an in-flight counter shared with other servers.
    pub fn start_with(default: Reply, shared: Option<Arc<InFlight>>) -> Self {
        let state = Arc::new(MockState {
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(default),
            in_flight: Arc::new(InFlight::default()),
            shared,
            requests: Mutex::new(Vec::new()),
            chat_count: AtomicUsize::new(0),
            embeddings_count: AtomicUsize::new(0),
            health_mode: AtomicU8::new(0),
            health_hits: AtomicUsize::new(0),
            models_hits: AtomicUsize::new(0),
        });
        let listener = StdListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let mut server = MockServer {
            addr,
            state,
            stop: None,
        };
        server.serve(listener);
        server
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        self.state.script.lock().unwrap().push_back(reply);
    }

    pub fn set_default(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = reply;
    }

    pub fn chat_count(&self) -> usize {
        self.state.chat_count.load(Ordering::SeqCst)
    }

    pub fn embeddings_count(&self) -> usize {
        self.state.embeddings_count.load(Ordering::SeqCst)
    }

    pub fn peak_in_flight(&self) -> usize {
        self.state.in_flight.peak()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    fn serve(&mut self, listener: StdListener) {
        listener.set_nonblocking(true).expect("nonblocking");
        let state = self.state.clone();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("mock runtime");
            rt.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                // Like uvicorn: no Nagle delay between small SSE chunks.
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                let app = Router::new()
                    .route("/v1/chat/completions", post(chat))
                    .route("/v1/embeddings", post(embeddings))
                    .route("/health", get(health))
                    .route("/v1/models", get(models))
                    .with_state(state);
                let _ = axum::serve(listener, app).await;
            });
            // Block this thread until told to die, then drop the runtime: every task
            // (listener and connections) is cancelled and every socket closed.
            let _ = rx.recv();
            rt.shutdown_background();
        });
        self.stop = Some((tx, thread));
    }

    /// Abruptly stop: connections are reset, the port is closed.
    pub fn kill(&mut self) {
        if let Some((tx, thread)) = self.stop.take() {
            let _ = tx.send(());
            let _ = thread.join();
        }
    }

    /// Listen again on the same port (retrying while the old socket is released).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(30);
        let listener = loop {
            match StdListener::bind(self.addr) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding {}: {e}; retrying", self.addr);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("cannot rebind {}: {e}", self.addr),
            }
        };
        self.serve(listener);
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn health(State(state): State<Arc<MockState>>) -> StatusCode {
    state.health_hits.fetch_add(1, Ordering::SeqCst);
    match state.health_mode.load(Ordering::SeqCst) {
        0 => StatusCode::OK,
        1 => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::NOT_FOUND,
    }
}

async fn models(State(state): State<Arc<MockState>>) -> impl IntoResponse {
    state.models_hits.fetch_add(1, Ordering::SeqCst);
    axum::Json(serde_json::json!({"object": "list", "data": [{"id": "mock"}]}))
}

fn completion_json(
    content: &str,
    reasoning: &Option<(ReasoningField, String)>,
    finish: &str,
) -> serde_json::Value {
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if let Some((field, text)) = reasoning {
        message[field.key()] = serde_json::Value::String(text.clone());
    }
    serde_json::json!({
        "id": "cmpl-mock", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}
    })
}

fn sse_events(
    content: &str,
    reasoning: &Option<(ReasoningField, String)>,
    finish: &str,
) -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let v = serde_json::json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    };
    let mut out = vec![chunk(
        serde_json::json!({"role": "assistant"}),
        serde_json::Value::Null,
    )];
    if let Some((field, text)) = reasoning {
        let mid = text.len() / 2;
        let mid = (0..=mid)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        for piece in [&text[..mid], &text[mid..]] {
            out.push(chunk(
                serde_json::json!({ field.key(): piece }),
                serde_json::Value::Null,
            ));
        }
    }
    for word in content.split_inclusive(' ') {
        out.push(chunk(
            serde_json::json!({"content": word}),
            serde_json::Value::Null,
        ));
    }
    out.push(chunk(
        serde_json::json!({}),
        serde_json::Value::String(finish.into()),
    ));
    let usage = serde_json::json!({"object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}});
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".into());
    out
}

fn sse_response(events: Vec<String>, stall_after_first: bool) -> Response {
    let stream = futures::stream::unfold(
        (events.into_iter(), 0usize),
        move |(mut it, n)| async move {
            if stall_after_first && n == 1 {
                futures::future::pending::<()>().await;
            }
            let next = it.next()?;
            tokio::time::sleep(Duration::from_millis(2)).await;
            Some((Ok::<_, Infallible>(Bytes::from(next)), (it, n + 1)))
        },
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("sse response")
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let _guard = state.in_flight.enter();
    let _shared = state.shared.as_ref().map(|s| s.enter());
    state.chat_count.fetch_add(1, Ordering::SeqCst);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let stream = json["stream"].as_bool().unwrap_or(false);
    let header_map: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or("<binary>").to_string(),
            )
        })
        .collect();
    let auth = header_map.get("authorization").cloned().unwrap_or_default();
    state.requests.lock().unwrap().push(Recorded {
        at: Instant::now(),
        headers: header_map,
        body: json,
        body_len: body.len(),
    });
    let mut reply = state.next_reply();
    while let Reply::After { delay, then } = reply {
        tokio::time::sleep(delay).await;
        reply = *then;
    }
    match reply {
        Reply::Ok {
            content,
            reasoning,
            finish_reason,
            delay,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if stream {
                sse_response(sse_events(&content, &reasoning, &finish_reason), false)
            } else {
                axum::Json(completion_json(&content, &reasoning, &finish_reason)).into_response()
            }
        }
        Reply::Status {
            code,
            retry_after,
            body,
        } => {
            let mut resp = (StatusCode::from_u16(code).expect("status code"), body).into_response();
            if let Some(s) = retry_after {
                resp.headers_mut()
                    .insert("retry-after", s.to_string().parse().expect("header"));
            }
            resp
        }
        Reply::Hang => {
            futures::future::pending::<()>().await;
            unreachable!()
        }
        Reply::After { .. } => unreachable!("unwrapped above"),
        Reply::Cut { after } => {
            tokio::time::sleep(after).await;
            let broken = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("server killed"))
            });
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(axum::body::Body::from_stream(broken))
                .expect("response")
        }
        Reply::StreamStall => sse_response(sse_events("never finished", &None, "stop"), true),
        Reply::Interrupted => {
            let role = serde_json::json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]});
            sse_response(
                vec![format!("data: {role}\n\n"), "data: [DONE]\n\n".into()],
                false,
            )
        }
        Reply::Raw { status, body } => {
            (StatusCode::from_u16(status).expect("status code"), body).into_response()
        }
        Reply::EchoAuth { code } => (
            StatusCode::from_u16(code).expect("status code"),
            format!("rejected credentials: {auth}"),
        )
            .into_response(),
    }
}

async fn embeddings(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _guard = state.in_flight.enter();
    state.embeddings_count.fetch_add(1, Ordering::SeqCst);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let inputs: Vec<String> = json["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let header_map: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or("<binary>").to_string(),
            )
        })
        .collect();
    state.requests.lock().unwrap().push(Recorded {
        at: Instant::now(),
        headers: header_map,
        body: json,
        body_len: body.len(),
    });
    let mut reply = state.next_reply();
    while let Reply::After { delay, then } = reply {
        tokio::time::sleep(delay).await;
        reply = *then;
    }
    match reply {
        Reply::Ok { delay, .. } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let data: Vec<serde_json::Value> = inputs
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    serde_json::json!({"object": "embedding", "index": i,
                        "embedding": [text.len() as f32, i as f32]})
                })
                .collect();
            axum::Json(
                serde_json::json!({"object": "list", "data": data, "model": "mock",
                "usage": {"prompt_tokens": 5, "total_tokens": 5}}),
            )
            .into_response()
        }
        Reply::Status {
            code,
            retry_after,
            body,
        } => {
            let mut resp = (StatusCode::from_u16(code).expect("status code"), body).into_response();
            if let Some(s) = retry_after {
                resp.headers_mut()
                    .insert("retry-after", s.to_string().parse().expect("header"));
            }
            resp
        }
        Reply::Hang => {
            futures::future::pending::<()>().await;
            unreachable!()
        }
        Reply::Raw { status, body } => {
            (StatusCode::from_u16(status).expect("status code"), body).into_response()
        }
        other => panic!("{other:?} is a chat reply; an embeddings request cannot answer it"),
    }
}

// ---- client-side helpers -------------------------------------------------------------

/// An endpoint spec with short, test-friendly timeouts.
pub fn endpoint(name: &str, base_url: &str, max_in_flight: usize) -> EndpointSpec {
    EndpointSpec {
        name: name.into(),
        base_url: base_url.to_string(),
        model: format!("model-{name}"),
        api_key: None,
        max_in_flight,
        requests_per_minute: None,
        tokens_per_minute: None,
        request_timeout: Duration::from_secs(20),
        max_connecting: tmas_client::DEFAULT_MAX_CONNECTING,
        stream_idle_timeout: Duration::from_secs(10),
        context_window: 32_768,
        token_estimate: TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        },
    }
}

/// Short backoffs and probes; generous budgets so a slow machine does not fail tests.
pub fn fast_policy() -> ResiliencePolicy {
    ResiliencePolicy {
        max_attempts: 4,
        max_timeout_attempts: 3,
        timeout_growth: 1.0,
        max_malformed_attempts: 3,
        suspect_after_crashes: 16,
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(100),
        breaker_failures: 3,
        breaker_window: 50,
        breaker_min_calls: 20,
        breaker_failure_ratio: 0.5,
        min_in_flight: 1,
        limit: tmas_client::LimitAlgorithm::Aimd,
        probe_interval: Duration::from_millis(50),
        probe_successes: 2,
        outage_budget: Duration::from_secs(60),
        context_margin: 100,
        permanent_error_limit: 5,
    }
}

/// One group `g` over the given endpoints.
pub fn config(endpoints: Vec<EndpointSpec>, global_max_in_flight: usize) -> ClientConfig {
    let names = endpoints.iter().map(|e| e.name.clone()).collect();
    ClientConfig {
        endpoints,
        groups: vec![("g".into(), names)],
        routing: Vec::new(),
        global_max_in_flight,
        global_requests_per_minute: None,
        global_tokens_per_minute: None,
        policy: fast_policy(),
    }
}

pub fn request(text: &str, stream: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user(text)],
        sampling: Sampling {
            temperature: 1.0,
            top_p: 0.95,
            max_tokens: 1000,
            top_k: None,
        },
        tags: CallTags {
            role: "solution".into(),
            problem: "p-7".into(),
            iteration: 3,
            call: None,
            affinity: None,
        },
        stream,
    }
}
