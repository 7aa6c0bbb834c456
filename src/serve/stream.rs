//! `stream: true`: the reply as server-sent events in OpenAI's chunk format, sent as the
//! method runs. Progress (iterations started, solutions and verifications done, each
//! iteration's best score) arrives as `reasoning_content` deltas, so a client that shows
//! reasoning shows it and others ignore it; the answer follows as `content`, then a usage
//! chunk when `stream_options.include_usage` asks for one, then `data: [DONE]`.
//!
//! The stream owns the request's [`CancelOnDrop`]: a client that disconnects drops the
//! stream, which cancels the request's problems.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::calls::{CancelOnDrop, IterationSummary, Progress};
use super::openai::{self, ApiError, Usage};
use super::pass_through::PassThroughChoice;
use super::runtime::{ProblemResult, Ticket};
use crate::config::{Config, MethodName};
use crate::role::Role;
use tmas_actors::strategy::CallFailure;
use tmas_client::ModelClient;
use tmas_client::wire::{ChatRequest, StreamDelta};

/// A reply's identity, shared by its chunks.
pub struct Meta {
    pub id: String,
    pub model: String,
    pub created: u64,
    /// The request's config (its method's N and M size the progress lines).
    pub config: Config,
}

/// Most bytes of answer text in one content chunk.
const CONTENT_CHUNK: usize = 2048;

/// The streamed reply of a method request.
pub fn respond(
    meta: Meta,
    tickets: Vec<Ticket>,
    progress: mpsc::UnboundedReceiver<(u32, Progress)>,
    guard: CancelOnDrop,
    include_usage: bool,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(produce(meta, tickets, progress, include_usage, tx));
    // The guard lives as long as the body: dropped with it when the client goes away.
    let events = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let event = rx.recv().await?;
        Some((Ok::<_, Infallible>(event), (rx, guard)))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
        .into_response()
}

fn chunk(meta: &Meta, choices: Value) -> Event {
    Event::default().data(
        json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": choices,
        })
        .to_string(),
    )
}

fn delta(meta: &Meta, index: u32, delta: Value, finish: Option<&str>) -> Event {
    chunk(
        meta,
        json!([{"index": index, "delta": delta, "finish_reason": finish}]),
    )
}

/// Sends the reply's events until it is complete or the client has gone.
async fn produce(
    meta: Meta,
    tickets: Vec<Ticket>,
    mut progress: mpsc::UnboundedReceiver<(u32, Progress)>,
    include_usage: bool,
    tx: mpsc::Sender<Event>,
) {
    let choices = tickets.len() as u32;
    let send = |event: Event| {
        let tx = tx.clone();
        async move { tx.send(event).await.is_ok() }
    };
    for index in 0..choices {
        if !send(delta(
            &meta,
            index,
            json!({"role": "assistant", "content": ""}),
            None,
        ))
        .await
        {
            return;
        }
    }
    let mut pending: FuturesUnordered<_> = tickets
        .into_iter()
        .enumerate()
        .map(|(i, t)| async move { (i as u32, t.result.await) })
        .collect();
    let mut lines = Lines::new(&meta.config);
    let mut usage = Usage::default();
    let mut progress_open = true;
    while !pending.is_empty() {
        tokio::select! {
            // Progress first: a choice's progress is sent before its result.
            biased;
            p = progress.recv(), if progress_open => match p {
                Some((index, p)) => {
                    if let Some(text) = lines.line(index, &p)
                        && !send(delta(&meta, index, json!({"reasoning_content": text}), None)).await
                    {
                        return;
                    }
                }
                None => progress_open = false,
            },
            Some((index, result)) = pending.next() => {
                let result: Result<ProblemResult, _> = result;
                let event = match result {
                    Ok(Ok(outcome)) => {
                        usage.add(&outcome);
                        match openai::select(&outcome) {
                            Some(selected) => {
                                for piece in pieces(&selected.text, CONTENT_CHUNK) {
                                    if !send(delta(&meta, index, json!({"content": piece}), None)).await {
                                        return;
                                    }
                                }
                                delta(&meta, index, json!({}), Some(openai::finish_reason(&selected)))
                            }
                            None => error_event(&ApiError::upstream(&outcome)),
                        }
                    }
                    Ok(Err(e)) => error_event(&ApiError::internal(format!("the method failed: {e}"))),
                    Err(_) => error_event(&ApiError::internal("the runtime stopped before answering".into())),
                };
                if !send(event).await {
                    return;
                }
            }
        }
    }
    if include_usage {
        let usage_chunk = Event::default().data(
            json!({
                "id": meta.id,
                "object": "chat.completion.chunk",
                "created": meta.created,
                "model": meta.model,
                "choices": [],
                "usage": usage,
            })
            .to_string(),
        );
        if !send(usage_chunk).await {
            return;
        }
    }
    let _ = send(Event::default().data("[DONE]")).await;
}

/// An error inside a stream (the status is already sent): `data: {"error": {...}}`.
fn error_event(e: &ApiError) -> Event {
    Event::default().data(e.body().to_string())
}

/// `text` in pieces of at most `size` bytes, cut at character boundaries.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(size);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end.max(rest.chars().next().map_or(0, char::len_utf8)));
        out.push(piece);
        rest = tail;
    }
    out
}

/// Progress as lines a person reads, one choice's counts kept apart from another's.
struct Lines {
    /// Solutions one iteration makes, and verifications.
    solutions: u32,
    verifications: u32,
    /// Per (choice, iteration, role): calls done.
    done: HashMap<(u32, u32, Role), u32>,
}

impl Lines {
    fn new(config: &Config) -> Self {
        let m = &config.method;
        let solutions = if m.name == MethodName::MajorityVote {
            m.k
        } else {
            m.n
        };
        let verifications = match m.name {
            MethodName::Tmas | MethodName::VerifyRefine => m.n * m.m,
            _ => 0,
        };
        Self {
            solutions,
            verifications,
            done: HashMap::new(),
        }
    }

    fn line(&mut self, choice: u32, p: &Progress) -> Option<String> {
        match p {
            Progress::IterationStarted { iteration } => {
                Some(format!("Iteration {} started.\n", iteration + 1))
            }
            Progress::CallDone {
                role,
                iteration,
                answered,
            } => {
                let n = self.done.entry((choice, *iteration, *role)).or_default();
                *n += 1;
                let t = iteration + 1;
                match role {
                    Role::Solution => Some(format!(
                        "Iteration {t}: solution {} of {} {}.\n",
                        n,
                        self.solutions,
                        if *answered { "drafted" } else { "failed" }
                    )),
                    // A line per candidate's worth of verifications, not per call.
                    Role::Verification
                        if self.solutions > 0
                            && (n.is_multiple_of(self.solutions) || *n == self.verifications) =>
                    {
                        Some(format!(
                            "Iteration {t}: {n} of {} verifications done.\n",
                            self.verifications
                        ))
                    }
                    _ if !answered => Some(format!("Iteration {t}: a {role} call failed.\n")),
                    _ => None,
                }
            }
            Progress::IterationDone(s) => Some(iteration_line(s)),
        }
    }
}

fn iteration_line(s: &IterationSummary) -> String {
    let mut line = format!(
        "Iteration {} done: {} of {} candidates answered",
        s.iteration + 1,
        s.solved,
        s.candidates
    );
    if s.fully_verified > 0 {
        line.push_str(&format!(", {} fully verified", s.fully_verified));
    }
    match s.best {
        Some((b, Some(score))) => {
            line.push_str(&format!(", best: candidate {} (score {score:.2})", b + 1))
        }
        Some((b, None)) => line.push_str(&format!(", selected: candidate {}", b + 1)),
        None => {}
    }
    line.push_str(".\n");
    line
}

/// The served model itself, streamed through: each choice's call streams from the
/// endpoint, and its pieces go out as `content` and `reasoning_content` deltas as they
/// arrive; then each choice's finish chunk, the usage chunk when asked, `[DONE]`. A
/// client that goes away drops the stream, and with it the calls.
pub fn pass_through(
    id: String,
    model: String,
    client: ModelClient,
    calls: Vec<ChatRequest>,
    records: Vec<Option<PassThroughChoice>>,
    include_usage: bool,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(relay(id, model, client, calls, records, include_usage, tx));
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        Some((Ok::<_, Infallible>(event), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
        .into_response()
}

/// Why a passed-through choice whose stream broke ends with an error.
const BROKEN: &str = "the upstream stream broke after part of the answer was sent; the retry's \
                      answer is not appended to it";

/// What one passed-through choice has sent so far.
#[derive(Default, Clone, Copy)]
struct Relayed {
    /// Some of its text went out.
    sent: bool,
    /// Its call's stream broke after text went out and a retry started over: the rest is
    /// not appended (it would repeat what was sent), the choice ends with an error.
    broken: bool,
}

/// Sends the passed-through reply's events until it is complete or the client has gone;
/// each choice's call is recorded as it ends (`records`, with `--out`).
async fn relay(
    id: String,
    model: String,
    client: ModelClient,
    calls: Vec<ChatRequest>,
    mut records: Vec<Option<PassThroughChoice>>,
    include_usage: bool,
    tx: mpsc::Sender<Event>,
) {
    let created = openai::now();
    let chunk = |choices: Value, usage: Option<&Value>| {
        let mut body = json!({"id": id, "object": "chat.completion.chunk", "created": created,
                              "model": model, "choices": choices});
        if let Some(usage) = usage {
            body["usage"] = usage.clone();
        }
        Event::default().data(body.to_string())
    };
    let delta = |index: usize, delta: Value, finish: Option<&str>| {
        chunk(
            json!([{"index": index, "delta": delta, "finish_reason": finish}]),
            None,
        )
    };
    let send = |event: Event| {
        let tx = tx.clone();
        async move { tx.send(event).await.is_ok() }
    };
    let mut receivers = Vec::with_capacity(calls.len());
    let mut pending = FuturesUnordered::new();
    for (index, request) in calls.into_iter().enumerate() {
        if !send(delta(
            index,
            json!({"role": "assistant", "content": ""}),
            None,
        ))
        .await
        {
            return;
        }
        let (sink, pieces) = mpsc::unbounded_channel();
        receivers.push(pieces);
        let client = client.clone();
        pending.push(async move {
            let group = Config::client_group(Role::Solution);
            (index, client.chat_streaming(group, request, &sink).await)
        });
    }
    let mut relayed = vec![Relayed::default(); receivers.len()];
    let (mut prompt, mut completion) = (0u64, 0u64);
    // A piece as a delta event, or nothing (an attempt began, or the choice is broken).
    let piece = |state: &mut Relayed, index: usize, piece: StreamDelta| match piece {
        StreamDelta::Attempt => {
            state.broken |= state.sent;
            None
        }
        _ if state.broken => None,
        StreamDelta::Content(text) => {
            state.sent = true;
            Some(delta(index, json!({"content": text}), None))
        }
        StreamDelta::Reasoning(text) => {
            state.sent = true;
            Some(delta(index, json!({"reasoning_content": text}), None))
        }
    };
    while !pending.is_empty() {
        tokio::select! {
            // Pieces first: a choice's text goes out before its finish chunk.
            biased;
            (index, p) = next_piece(&mut receivers) => {
                if let Some(event) = piece(&mut relayed[index], index, p)
                    && !send(event).await
                {
                    return;
                }
            }
            Some((index, result)) = pending.next() => {
                // Pieces the call sent in the poll that finished it.
                while let Ok(p) = receivers[index].try_recv() {
                    if let Some(event) = piece(&mut relayed[index], index, p)
                        && !send(event).await
                    {
                        return;
                    }
                }
                let state = relayed[index];
                let result = result.map_err(CallFailure::from);
                if let Some(record) = records.get_mut(index).and_then(Option::take) {
                    record.ended(result.clone(), state.broken.then(|| BROKEN.to_string()));
                }
                let events = match result {
                    Ok(_) if state.broken => vec![error_event(&ApiError {
                        status: axum::http::StatusCode::BAD_GATEWAY,
                        message: BROKEN.into(),
                        kind: "upstream_error",
                        param: None,
                        code: Some("upstream_error"),
                    })],
                    Ok(response) => {
                        prompt += response.usage.prompt_tokens;
                        completion += response.usage.completion_tokens;
                        let mut events = Vec::new();
                        if !state.sent {
                            // The endpoint answered whole (it does not stream).
                            if let Some(r) = response.reasoning.as_deref() {
                                events.push(delta(index, json!({"reasoning_content": r}), None));
                            }
                            events.push(delta(index, json!({"content": &*response.content}), None));
                        }
                        let finish = response.finish_reason.as_deref().unwrap_or("stop");
                        events.push(delta(index, json!({}), Some(finish)));
                        events
                    }
                    Err(e) => vec![error_event(&openai::upstream_call_failure(e))],
                };
                for event in events {
                    if !send(event).await {
                        return;
                    }
                }
            }
        }
    }
    if include_usage {
        let usage = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        });
        if !send(chunk(json!([]), Some(&usage))).await {
            return;
        }
    }
    let _ = send(Event::default().data("[DONE]")).await;
}

/// The next piece of any choice's call (pending while none has one).
async fn next_piece(
    receivers: &mut [mpsc::UnboundedReceiver<StreamDelta>],
) -> (usize, StreamDelta) {
    std::future::poll_fn(|cx| {
        for (index, r) in receivers.iter_mut().enumerate() {
            if let std::task::Poll::Ready(Some(p)) = r.poll_recv(cx) {
                return std::task::Poll::Ready((index, p));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_at_character_boundaries_and_lose_nothing() {
        let text = "é".repeat(5) + "abc";
        let p = pieces(&text, 3);
        assert!(p.iter().all(|s| s.len() <= 3));
        assert_eq!(p.concat(), text);
        assert!(pieces("", 3).is_empty());
    }

    #[test]
    fn progress_lines_count_each_choices_calls_apart() {
        let mut config = Config::default();
        config.method.n = 2;
        config.method.m = 2;
        let mut lines = Lines::new(&config);
        let started = Progress::IterationStarted { iteration: 0 };
        assert_eq!(
            lines.line(0, &started).as_deref(),
            Some("Iteration 1 started.\n")
        );
        let solution = Progress::CallDone {
            role: Role::Solution,
            iteration: 0,
            answered: true,
        };
        assert_eq!(
            lines.line(0, &solution).as_deref(),
            Some("Iteration 1: solution 1 of 2 drafted.\n")
        );
        assert_eq!(
            lines.line(1, &solution).as_deref(),
            Some("Iteration 1: solution 1 of 2 drafted.\n"),
            "another choice counts its own"
        );
        let verification = Progress::CallDone {
            role: Role::Verification,
            iteration: 0,
            answered: true,
        };
        let said: Vec<Option<String>> = (0..4).map(|_| lines.line(0, &verification)).collect();
        assert_eq!(
            said,
            [
                None,
                Some("Iteration 1: 2 of 4 verifications done.\n".into()),
                None,
                Some("Iteration 1: 4 of 4 verifications done.\n".into()),
            ]
        );
        let done = Progress::IterationDone(IterationSummary {
            iteration: 0,
            solved: 2,
            candidates: 2,
            fully_verified: 1,
            best: Some((1, Some(1.0))),
        });
        assert_eq!(
            lines.line(0, &done).as_deref(),
            Some(
                "Iteration 1 done: 2 of 2 candidates answered, 1 fully verified, best: candidate 2 (score 1.00).\n"
            )
        );
    }
}
