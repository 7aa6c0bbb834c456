//! `POST /v1/chat/completions`: admission, parsing, the deterministic draw, the task
//! model, faults, latency and the response (JSON or SSE).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::faults::{self, Fault};
use super::openai::{self, ChatBody, Completion, Usage, tokens};
use super::options::{FaultRates, SimOptions};
use super::rng::{SimRng, hash_bytes, hash_str, mix};
use super::server_model::{Running, ServerModel};
use super::stats::{Counters, InFlight, RecordedRequest};
use super::task::{self, Problem};
use super::text::truncate_at_char;
use crate::role::Role;

/// Shared by all requests of one simulator.
pub struct SimState {
    pub opts: SimOptions,
    /// Replaced at runtime by `POST /sim/faults`.
    pub faults: RwLock<Arc<FaultRates>>,
    pub counters: Arc<Counters>,
    /// Reference answers by problem id (from the dataset, if any).
    pub answers: HashMap<String, String>,
    /// How often each identical request has been seen: the n-th identical request gets
    /// draw n, so N identical candidate prompts give N different candidates and a retry
    /// after a fault is not doomed to the same fault. Cleared by `/sim/reset`.
    pub occurrences: Mutex<HashMap<u64, u32>>,
    /// The server model, when `opts.server_model` is set.
    pub server_model: Option<Arc<ServerModel>>,
    /// Model-API requests since the fault settings took effect (the `first_requests`
    /// fault); zeroed with them and by `/sim/reset`.
    pub api_requests: AtomicU64,
    /// Chat-completion requests that have arrived (the start-up check's aside): under
    /// `FaultRates::interrupt_on_arrival` a running stream ends when this moves.
    arrivals: AtomicU64,
}

impl SimState {
    pub fn new(opts: SimOptions, dataset: Option<Vec<(String, String)>>) -> Self {
        let server_model = opts
            .server_model
            .clone()
            .map(|o| Arc::new(ServerModel::new(o, openai::BYTES_PER_TOKEN)));
        Self {
            faults: RwLock::new(Arc::new(opts.faults.clone())),
            opts,
            counters: Arc::new(Counters::default()),
            answers: dataset.unwrap_or_default().into_iter().collect(),
            occurrences: Mutex::new(HashMap::new()),
            server_model,
            api_requests: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
        }
    }

    /// Replaces the fault settings; the `first_requests` fault counts again from 0.
    pub fn set_faults(&self, faults: FaultRates) {
        let mut current = self.faults.write().unwrap_or_else(|e| e.into_inner());
        *current = Arc::new(faults);
        self.api_requests.store(0, Ordering::Relaxed);
    }

    /// The counters, with the server model's when it is on.
    pub fn snapshot(&self) -> super::stats::SimStats {
        let mut s = self.counters.snapshot();
        s.server_model = self.server_model.as_ref().map(|m| m.stats());
        s
    }

    pub fn fault_rates(&self) -> Arc<FaultRates> {
        self.faults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn occurrence(&self, key: u64) -> u32 {
        let mut m = self.occurrences.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_TRACKED_REQUESTS {
            // Bounds memory in long benchmarks; identical requests seen before this point
            // start again from draw 0 (documented in docs/simulator.md).
            m.clear();
        }
        let n = m.entry(key).or_insert(0);
        *n += 1;
        *n - 1
    }
}

/// Distinct requests whose occurrences are tracked before the table is cleared (~20 MB).
const MAX_TRACKED_REQUESTS: usize = 1 << 20;

/// Response extension asking the connection layer to close without answering.
#[derive(Debug, Clone, Copy)]
pub struct DropConnection;

fn header_str<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The call's iteration (`x-tmas-iteration`), 0 when absent or not a number.
fn header_iteration(h: &HeaderMap) -> u64 {
    header_str(h, "x-tmas-iteration")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

pub(super) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// An error response, counted by status.
pub fn error_response(
    counters: &Counters,
    status: StatusCode,
    message: &str,
    retry_after: Option<u64>,
) -> Response {
    counters.status(status.as_u16());
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let mut r = json_response(status, openai::error_json(message, kind, status.as_u16()));
    if let Some(v) = retry_after.and_then(|secs| HeaderValue::from_str(&secs.to_string()).ok()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The `first_requests` fault's answer to this model-API request, while it lasts (see
/// [`super::options::FirstRequests`]).
pub(super) fn first_requests_error(st: &SimState, rates: &FaultRates) -> Option<Response> {
    let first = &rates.first_requests;
    let n = faults::first_requests(first, &st.api_requests)?;
    st.counters.fault("first_requests");
    let status = StatusCode::from_u16(first.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = format!(
        "simulated error: request {n} of the first {} answered {}",
        first.count,
        status.as_u16()
    );
    Some(error_response(
        &st.counters,
        status,
        &message,
        first.retry_after_secs,
    ))
}

/// Separates the fault draws of a call-identified request from its reply draws.
const FAULT_SALT: u64 = 0x5EED_FA17_0000_0001;

/// Header `tmas run`'s start-up check sets on its one-token request.
pub const PREFLIGHT_HEADER: &str = "x-tmas-preflight";

/// The start-up check's request: answered (unless the simulator is down, or the
/// `first_requests` fault lasts) without a fault draw and outside the request counters, so
/// a test's "requests at the simulator = calls in the store" stays exact and a fault rate
/// cannot fail a run before it starts.
fn preflight(st: &SimState) -> Response {
    let rates = st.fault_rates();
    if rates.down {
        return error_response(
            &st.counters,
            StatusCode::SERVICE_UNAVAILABLE,
            "simulated outage",
            Some(st.opts.retry_after_secs),
        );
    }
    if let Some(error) = first_requests_error(st, &rates) {
        return error;
    }
    let body = openai::completion_json(&Completion {
        id: "chatcmpl-preflight",
        model: &st.opts.model,
        created: 0,
        content: "O",
        reasoning: "",
        reasoning_field: st.opts.reasoning_field,
        finish_reason: "length",
        usage: Usage {
            prompt_tokens: 1,
            completion_tokens: 1,
            total_tokens: 2,
        },
        stream_usage: st.opts.stream_usage,
    });
    json_response(StatusCode::OK, body)
}

pub async fn chat(State(st): State<Arc<SimState>>, headers: HeaderMap, body: Bytes) -> Response {
    if headers.contains_key(PREFLIGHT_HEADER) {
        return preflight(&st);
    }
    let arrival = st.arrivals.fetch_add(1, Ordering::Relaxed) + 1;
    let opts = &st.opts;
    let role = header_str(&headers, "x-tmas-role").and_then(task::role_of_header);
    st.counters.request(role);
    let rates = st.fault_rates();
    if rates.down {
        return error_response(
            &st.counters,
            StatusCode::SERVICE_UNAVAILABLE,
            "simulated outage",
            Some(opts.retry_after_secs),
        );
    }
    if let Some(error) = first_requests_error(&st, &rates) {
        return error;
    }
    let Some(slot) = st
        .counters
        .enter(opts.max_concurrency, opts.max_queue, role)
        .await
    else {
        st.counters.fault("overload");
        let status =
            StatusCode::from_u16(opts.overload_status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
        let msg = format!(
            "simulator at its concurrency limit ({})",
            opts.max_concurrency
        );
        return error_response(&st.counters, status, &msg, Some(opts.retry_after_secs));
    };
    let parsed: ChatBody<'_> = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("request body is not a chat-completion request: {e}");
            return error_response(&st.counters, StatusCode::BAD_REQUEST, &msg, None);
        }
    };
    if parsed.messages.is_empty() {
        return error_response(
            &st.counters,
            StatusCode::BAD_REQUEST,
            "`messages` must not be empty",
            None,
        );
    }
    let texts: Vec<_> = parsed.messages.iter().map(|m| m.text()).collect();
    // One message (every TMAS call) is borrowed, not copied: prompts reach 350 KB.
    let prompt: std::borrow::Cow<'_, str> = match texts.as_slice() {
        [only] => std::borrow::Cow::Borrowed(only.as_ref()),
        _ => std::borrow::Cow::Owned(texts.join("\n")),
    };
    if opts.record_requests > 0 {
        st.counters
            .record(opts.record_requests, record(&headers, &parsed, &texts));
    }

    let problem_id = header_str(&headers, "x-tmas-problem").unwrap_or("default");
    let (mut rng, fault) = request_draws(&st, &headers, role, &body, &rates);
    if let Some(kind) = fault.kind() {
        st.counters.fault(kind);
    }
    let problem = Problem::derive(
        problem_id,
        st.answers.get(problem_id).map(String::as_str),
        &opts.task,
    );
    let reply = task::generate(
        role,
        &problem,
        &prompt,
        opts,
        &mut rng,
        fault == Fault::UnparseableScore,
    );
    let (mut content, mut reasoning) = (reply.content, reply.reasoning);

    let mut finish = "stop";
    if fault == Fault::Truncated {
        let cut = content
            .find("\\boxed")
            .unwrap_or(content.len())
            .min(content.len() / 2);
        truncate_at_char(&mut content, cut);
        finish = "length";
    }
    if let Some(max) = parsed.max_completion_tokens.or(parsed.max_tokens) {
        let budget = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .saturating_mul(openai::BYTES_PER_TOKEN);
        if reasoning.len() + content.len() > budget {
            truncate_at_char(&mut reasoning, budget);
            truncate_at_char(&mut content, budget - reasoning.len());
            finish = "length";
        }
    }
    let completion_tokens = tokens(reasoning.len() + content.len());
    let usage = Usage {
        prompt_tokens: tokens(prompt.len()),
        completion_tokens,
        total_tokens: tokens(prompt.len()) + completion_tokens,
    };
    let (base, per_token, running) = match &st.server_model {
        None => (
            opts.latency.draw(&mut rng),
            Duration::from_micros(opts.per_output_token_us),
            None,
        ),
        Some(model) => {
            let Some(waiting) = model.enqueue() else {
                st.counters.fault("overload");
                let msg = format!(
                    "server queue full ({} running, {} waiting)",
                    model.opts.max_running, model.opts.queue_capacity
                );
                return error_response(
                    &st.counters,
                    StatusCode::SERVICE_UNAVAILABLE,
                    &msg,
                    Some(opts.retry_after_secs),
                );
            };
            let Some(running) = model.run(waiting).await else {
                return error_response(
                    &st.counters,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server shutting down",
                    None,
                );
            };
            let (base, per_token) = model_timing(
                model,
                &running,
                opts.seed,
                problem_id,
                role,
                &prompt,
                completion_tokens,
                rng.next_u64(),
                shares_context(role, &headers),
            );
            (base, per_token, Some(running))
        }
    };
    let latency =
        base + per_token.saturating_mul(u32::try_from(completion_tokens).unwrap_or(u32::MAX));
    let hang = Duration::from_secs_f64(rates.hang_secs);
    let id = format!("chatcmpl-sim-{:016x}", rng.next_u64());
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let c = Completion {
        id: &id,
        model: &opts.model,
        created,
        content: &content,
        reasoning: &reasoning,
        reasoning_field: opts.reasoning_field,
        finish_reason: finish,
        usage,
        stream_usage: opts.stream_usage,
    };

    match fault {
        Fault::Error500 => {
            drop(slot);
            return error_response(
                &st.counters,
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulated internal error",
                None,
            );
        }
        Fault::DropConnection => {
            sleep(latency).await;
            drop(slot);
            let mut r = Response::new(Body::empty());
            r.extensions_mut().insert(DropConnection);
            return r;
        }
        Fault::MalformedJson => {
            sleep(latency).await;
            st.counters.status(200);
            let garbage: &'static [u8] = if parsed.stream {
                b"data: {\"id\": \"sim-malformed\", \"choices\": [{\"delta\": {\"content\": \"oops\n\ndata: [DONE]\n\n"
            } else {
                b"{\"id\": \"sim-malformed\", \"choices\": [{\"message\": {\"content\": \"trunc"
            };
            let ct = if parsed.stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            return (StatusCode::OK, [(header::CONTENT_TYPE, ct)], garbage).into_response();
        }
        Fault::InterruptedStream => {
            sleep(latency).await;
            drop(slot);
            st.counters.status(200);
            return interrupted_response(&c, parsed.stream, opts.stream_chunk_bytes);
        }
        _ => {}
    }

    st.counters.status(200);
    if parsed.stream {
        let (frames, first_content) = openai::sse_frames(&c, opts.stream_chunk_bytes);
        let timing = StreamTiming {
            base,
            per_token,
            chunk_bytes: opts.stream_chunk_bytes,
            hang: (fault == Fault::Hang).then_some(hang),
        };
        let cut = rates.interrupt_on_arrival.then(|| ArrivalCut {
            st: st.clone(),
            seen: arrival,
        });
        stream_response(frames, first_content, timing, cut, (slot, running))
    } else {
        let mut slot = slot;
        sleep(latency).await;
        if fault == Fault::Hang {
            sleep(hang).await;
        }
        slot.complete_ok();
        drop(running);
        json_response(StatusCode::OK, openai::completion_json(&c))
    }
}

/// The reply and fault draws of one request, from the seed, role, problem, iteration and
/// body. With an `x-tmas-call` identity the reply depends on the call, not on how often
/// this server saw the same request: a call re-sent after an orchestrator crash (or to a
/// restarted simulator) gets the reply the first send got. Faults are still drawn per
/// occurrence, so a retry after a simulated error can succeed. Without the header the
/// occurrence count separates identical requests (the M verifications of a candidate).
pub(super) fn request_draws(
    st: &SimState,
    headers: &HeaderMap,
    role: Option<Role>,
    body: &[u8],
    rates: &FaultRates,
) -> (SimRng, Fault) {
    let opts = &st.opts;
    let problem_id = header_str(headers, "x-tmas-problem").unwrap_or("default");
    let iteration = header_iteration(headers);
    let key = mix(
        mix(
            mix(mix(opts.seed, seed_number(role)), hash_str(1, problem_id)),
            iteration,
        ),
        hash_bytes(2, body),
    );
    match header_str(headers, "x-tmas-call") {
        Some(call) => {
            let call_key = mix(key, hash_str(3, call));
            let occurrence = u64::from(st.occurrence(call_key));
            let mut seed = mix(call_key ^ FAULT_SALT, occurrence);
            if opts.fault_salt != 0 {
                seed = mix(seed, opts.fault_salt);
            }
            let mut fault_rng = SimRng::new(seed);
            let fault = faults::draw(rates, role, &mut fault_rng);
            (SimRng::new(call_key), fault)
        }
        None => {
            let mut rng = SimRng::new(mix(key, u64::from(st.occurrence(key))));
            let fault = faults::draw(rates, role, &mut rng);
            (rng, fault)
        }
    }
}

/// The number a request's role adds to its draws' seed: the role's place in the order the
/// simulator numbered roles in before it shared the crate's role type, where a request
/// naming no role came right after the judge. Kept so every reply and fault draw stays
/// what it was for the same seed.
fn seed_number(role: Option<Role>) -> u64 {
    match role {
        Some(r) if r <= Role::Judge => r.index() as u64,
        None => Role::Judge.index() as u64 + 1,
        Some(r) => r.index() as u64 + 1,
    }
}

/// The server model's timing of one request now running: (prefill wall time, decode
/// wall time per reply token), from its prefix-cache hit, its modelled output length and
/// the batch it runs in.
#[allow(clippy::too_many_arguments)]
fn model_timing(
    model: &ServerModel,
    running: &Running,
    seed: u64,
    problem: &str,
    role: Option<Role>,
    prompt: &str,
    completion_tokens: u64,
    call_draw: u64,
    shared_context: bool,
) -> (Duration, Duration) {
    let o = &model.opts;
    let hit = model.prefill(prompt.as_bytes(), shared_context);
    let output = o.output_tokens(
        seed,
        problem,
        task::role_label(role),
        call_draw,
        completion_tokens,
    );
    let prefill_secs = o.service_secs(hit.computed_tokens, 0, running.running_at_start);
    let decode_secs = o.service_secs(0, output, running.running_at_start);
    model.served(output, prefill_secs + decode_secs);
    let per_reply_token = decode_secs / completion_tokens.max(1) as f64;
    (o.wall(prefill_secs), o.wall(per_reply_token))
}

/// Whether a call quotes a context other calls share: a refine prompt (a solution call
/// after the first iteration, quoting the previous rollouts) or a verification.
fn shares_context(role: Option<Role>, headers: &HeaderMap) -> bool {
    matches!(role, Some(Role::Verification))
        || (matches!(role, Some(Role::Solution)) && header_iteration(headers) > 0)
}

/// A generation cut off half-way (see `FaultRates::interrupted_stream`).
fn interrupted_response(c: &Completion<'_>, stream: bool, chunk_bytes: usize) -> Response {
    if stream {
        let (frames, first_content) = openai::sse_frames(c, chunk_bytes);
        // Role chunk and reasoning, half the content chunks, no finish chunk, then [DONE].
        let content_frames = frames.len().saturating_sub(first_content + 2);
        let keep = first_content + content_frames / 2;
        let mut body: Vec<u8> = frames[..keep].iter().flat_map(|f| f.to_vec()).collect();
        body.extend_from_slice(b"data: [DONE]\n\n");
        return (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            body,
        )
            .into_response();
    }
    let full = openai::completion_json(c);
    let half = Bytes::from(full[..full.len() / 2].to_vec());
    // An error item after the first half makes the server abort the connection.
    let parts: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(half),
        Err(std::io::Error::other("simulated interruption")),
    ];
    let mut r = Response::new(Body::from_stream(futures::stream::iter(parts)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// When a stream's frames go out.
struct StreamTiming {
    /// Before the first frame.
    base: Duration,
    /// Per reply token, between content frames.
    per_token: Duration,
    chunk_bytes: usize,
    /// A stall after the first content frame.
    hang: Option<Duration>,
}

/// Ends a stream at its next frame once another request has arrived
/// (`FaultRates::interrupt_on_arrival`).
struct ArrivalCut {
    st: Arc<SimState>,
    /// `SimState::arrivals` counting this request.
    seen: u64,
}

impl ArrivalCut {
    fn due(&self) -> bool {
        self.st.arrivals.load(Ordering::Relaxed) != self.seen
    }
}

/// What the SSE body still has to send.
struct StreamLeft {
    /// (delay before it, frame); the last is `data: [DONE]`.
    queue: VecDeque<(Duration, Bytes)>,
    /// Frames sent so far.
    sent: usize,
    /// The request's slots, held until the last frame.
    held: Option<(InFlight, Option<Running>)>,
    cut: Option<ArrivalCut>,
}

/// The SSE body: the base latency before the first frame, then per-token time between
/// content frames; a hang stalls after the first content frame. Without any delay the
/// whole stream goes out as one buffer (the fast path for throughput). With `cut`, a
/// request arriving meanwhile ends it before its next frame after the role chunk (up to
/// the finish chunk) with `data: [DONE]`, as llama.cpp's server does.
fn stream_response(
    frames: Vec<Bytes>,
    first_content: usize,
    timing: StreamTiming,
    cut: Option<ArrivalCut>,
    (mut slot, running): (InFlight, Option<Running>),
) -> Response {
    let StreamTiming {
        base,
        per_token,
        chunk_bytes,
        hang,
    } = timing;
    let sse = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    if base.is_zero() && per_token.is_zero() && hang.is_none() {
        let mut all = Vec::with_capacity(frames.iter().map(Bytes::len).sum());
        for f in &frames {
            all.extend_from_slice(f);
        }
        slot.complete_ok();
        drop(running);
        return (StatusCode::OK, sse, all).into_response();
    }
    let chunk_time =
        per_token.saturating_mul(u32::try_from(openai::tokens(chunk_bytes)).unwrap_or(u32::MAX));
    let mut queue: VecDeque<(Duration, Bytes)> = VecDeque::with_capacity(frames.len());
    for (i, f) in frames.into_iter().enumerate() {
        let delay = match i {
            0 => base,
            i if i == first_content + 1 && hang.is_some() => hang.unwrap_or_default(),
            i if i > 0 => chunk_time,
            _ => Duration::ZERO,
        };
        queue.push_back((delay, f));
    }
    // The running slot (server model) is held until the last frame, like the InFlight.
    let left = StreamLeft {
        queue,
        sent: 0,
        held: Some((slot, running)),
        cut,
    };
    let stream = futures::stream::unfold(left, |mut left| async move {
        let (delay, mut frame) = left.queue.pop_front()?;
        sleep(delay).await;
        let cuttable = left.sent > 0 && !left.queue.is_empty();
        if cuttable && left.cut.as_ref().is_some_and(ArrivalCut::due) {
            if let Some(cut) = &left.cut {
                cut.st.counters.fault("interrupted_on_arrival");
            }
            left.queue.clear();
            left.held = None;
            frame = Bytes::from_static(b"data: [DONE]\n\n");
        } else if left.queue.is_empty() {
            if let Some((s, _)) = left.held.as_mut() {
                s.complete_ok();
            }
            left.held = None;
        }
        left.sent += 1;
        Some((Ok::<Bytes, std::convert::Infallible>(frame), left))
    });
    (StatusCode::OK, sse, Body::from_stream(stream)).into_response()
}

fn record(
    headers: &HeaderMap,
    body: &ChatBody<'_>,
    texts: &[std::borrow::Cow<'_, str>],
) -> RecordedRequest {
    let headers: BTreeMap<String, String> = headers
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            k.starts_with("x-tmas-") || k == "traceparent" || k == "tracestate"
        })
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    RecordedRequest {
        headers,
        messages: body
            .messages
            .iter()
            .zip(texts)
            .map(|(m, t)| (m.role.to_string(), t.to_string()))
            .collect(),
        stream: body.stream,
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    /// The numbers every role's draws were seeded with before the simulator shared the
    /// crate's role type: the same seed still gives the same replies and faults.
    #[test]
    fn each_role_keeps_the_seed_number_its_draws_had() {
        let numbered = [
            (Some(Role::Solution), 0),
            (Some(Role::Verification), 1),
            (Some(Role::Summary), 2),
            (Some(Role::Experience), 3),
            (Some(Role::Guideline), 4),
            (Some(Role::Judge), 5),
            (None, 6),
            (Some(Role::GuidelineJudge), 7),
            (Some(Role::Critique), 8),
            (Some(Role::Extraction), 9),
            (Some(Role::Embedding), 10),
        ];
        assert_eq!(numbered.len(), Role::COUNT + 1);
        for (role, n) in numbered {
            assert_eq!(seed_number(role), n, "{role:?}");
        }
    }

    /// A stream of `content` with a millisecond per frame, cut by arrivals when `cut`.
    fn stream(st: &Arc<SimState>, content: &str, cut: bool) -> Response {
        let c = Completion {
            id: "x",
            model: "m",
            created: 0,
            content,
            reasoning: "",
            reasoning_field: crate::sim::ReasoningField::None,
            finish_reason: "stop",
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
                total_tokens: 2,
            },
            stream_usage: false,
        };
        let (frames, first_content) = openai::sse_frames(&c, 4);
        let timing = StreamTiming {
            base: Duration::from_millis(1),
            per_token: Duration::from_millis(1),
            chunk_bytes: 4,
            hang: None,
        };
        let seen = st.arrivals.fetch_add(1, Ordering::Relaxed) + 1;
        let cut = cut.then(|| ArrivalCut {
            st: st.clone(),
            seen,
        });
        let slot = st
            .counters
            .try_enter(0, Some(Role::Solution))
            .expect("a slot");
        stream_response(frames, first_content, timing, cut, (slot, None))
    }

    #[tokio::test]
    async fn a_stream_ends_at_its_next_chunk_when_another_request_arrives() {
        let st = Arc::new(SimState::new(SimOptions::default(), None));
        let mut body = stream(&st, "one two three four", true)
            .into_body()
            .into_data_stream();
        let role = body.next().await.expect("the role chunk").unwrap();
        assert!(String::from_utf8_lossy(&role).contains("\"role\":\"assistant\""));
        let first = body.next().await.expect("a content chunk").unwrap();
        assert!(
            String::from_utf8_lossy(&first).contains("one "),
            "{first:?}"
        );
        // Another request arrives (and, not cut itself, finishes).
        let other = stream(&st, "other", false);
        let other = axum::body::to_bytes(other.into_body(), usize::MAX)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&other).contains("\"finish_reason\":\"stop\""));
        let rest: Vec<Bytes> = body.map(Result::unwrap).collect().await;
        assert_eq!(rest, vec![Bytes::from_static(b"data: [DONE]\n\n")]);
        let stats = st.counters.snapshot();
        assert_eq!(stats.faults["interrupted_on_arrival"], 1);
        assert_eq!(stats.in_flight, 0, "the cut stream gave its slot back");
        assert_eq!(
            stats.ok_by_role["solution"], 1,
            "only the other one completed"
        );

        // Without the fault, or with no request arriving, the stream is whole.
        for cut in [false, true] {
            let st = Arc::new(SimState::new(SimOptions::default(), None));
            let mut body = stream(&st, "one two three four", cut)
                .into_body()
                .into_data_stream();
            body.next().await.expect("the role chunk").unwrap();
            if !cut {
                st.arrivals.fetch_add(1, Ordering::Relaxed);
            }
            let text: Vec<u8> = body.map(Result::unwrap).collect::<Vec<_>>().await.concat();
            let text = String::from_utf8_lossy(&text);
            assert!(
                text.contains("\"content\":\"ur\""),
                "the last chunk: {text}"
            );
            assert!(text.contains("\"finish_reason\":\"stop\""), "{text}");
        }
    }
}
