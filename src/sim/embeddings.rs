//! `POST /v1/embeddings` (OpenAI format): one vector per input from the simulated
//! embeddings model ([`super::task::embedding`]), with `usage`, after the configured base
//! latency. Counted under role `embedding` whatever `x-tmas-role` says. Faults are drawn
//! as for chat completions (same keying, so a re-sent call gets the same vectors):
//! `error_500`, `drop_connection`, `hang`, `malformed_json` (a cut-off body) and
//! `interrupted_stream` (the body aborted half-way) apply; `truncated` and
//! `unparseable_score` concern generated text and do nothing here. The `down` and
//! `first_requests` faults and the concurrency limit apply as to chat. The server model (`[server_model]`) does not
//! serve embeddings: they take the base latency only.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;

use super::faults::Fault;
use super::handler::{
    PREFLIGHT_HEADER, SimState, error_response, first_requests_error, json_response, request_draws,
};
use super::openai::tokens;
use super::task::embedding::embed;
use crate::role::Role;

/// The request fields the simulator reads (`model` and `encoding_format` are ignored:
/// vectors are always floats from the one simulated model).
#[derive(Deserialize)]
struct EmbeddingsBody<'a> {
    #[serde(borrow)]
    input: Input<'a>,
}

/// `input`: one string or a list of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum Input<'a> {
    One(#[serde(borrow)] Cow<'a, str>),
    Many(#[serde(borrow)] Vec<Cow<'a, str>>),
}

/// The reply body for `inputs`.
fn reply_json(model: &str, inputs: &[Cow<'_, str>]) -> Vec<u8> {
    let data: Vec<serde_json::Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            serde_json::json!({"object": "embedding", "index": i, "embedding": embed(text)})
        })
        .collect();
    let prompt_tokens: u64 = inputs.iter().map(|t| tokens(t.len())).sum();
    let body = serde_json::json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

pub async fn embeddings(
    State(st): State<Arc<SimState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let opts = &st.opts;
    let role = Some(Role::Embedding);
    let preflight = headers.contains_key(PREFLIGHT_HEADER);
    if !preflight {
        st.counters.request(role);
    }
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
    let parsed: EmbeddingsBody<'_> = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("request body is not an embeddings request: {e}");
            return error_response(&st.counters, StatusCode::BAD_REQUEST, &msg, None);
        }
    };
    let inputs = match parsed.input {
        Input::One(text) => vec![text],
        Input::Many(list) => list,
    };
    if inputs.is_empty() {
        return error_response(
            &st.counters,
            StatusCode::BAD_REQUEST,
            "`input` must not be empty",
            None,
        );
    }
    // The start-up check: answered outside the counters and without a fault draw, as
    // its chat completion is.
    if preflight {
        return json_response(StatusCode::OK, reply_json(&opts.model, &inputs));
    }
    let Some(mut slot) = st
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
    let (mut rng, fault) = request_draws(&st, &headers, role, &body, &rates);
    let fault = match fault {
        Fault::Truncated | Fault::UnparseableScore => Fault::None,
        f => f,
    };
    if let Some(kind) = fault.kind() {
        st.counters.fault(kind);
    }
    let latency = opts.latency.draw(&mut rng);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match fault {
        Fault::Error500 => {
            return error_response(
                &st.counters,
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulated internal error",
                None,
            );
        }
        Fault::DropConnection => {
            let mut r = Response::new(Body::empty());
            r.extensions_mut().insert(super::handler::DropConnection);
            return r;
        }
        Fault::MalformedJson => {
            st.counters.status(200);
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                &b"{\"object\": \"list\", \"data\": [{\"embedding\": [0.1, 0."[..],
            )
                .into_response();
        }
        Fault::InterruptedStream => {
            st.counters.status(200);
            let full = reply_json(&opts.model, &inputs);
            let half = Bytes::from(full[..full.len() / 2].to_vec());
            let parts: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(half),
                Err(std::io::Error::other("simulated interruption")),
            ];
            let mut r = Response::new(Body::from_stream(futures::stream::iter(parts)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return r;
        }
        Fault::Hang => {
            tokio::time::sleep(std::time::Duration::from_secs_f64(rates.hang_secs)).await
        }
        Fault::None | Fault::Truncated | Fault::UnparseableScore => {}
    }
    st.counters.status(200);
    let reply = reply_json(&opts.model, &inputs);
    slot.complete_ok();
    json_response(StatusCode::OK, reply)
}
