//! In-flight caps hold at the server under a burst of 5,000 calls, per endpoint and
//! globally across endpoints; a cap on connections opened at once does not cap the calls.

use std::sync::Arc;
use std::time::Duration;

use crate::support::mock_server::{InFlight, MockServer, Reply, config, endpoint, request};
use tmas_client::wire::{ChatRequest, ChatResponse};
use tmas_client::{ClientError, ModelClient};

const CALLS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_5000_calls_never_exceeds_the_caps() {
    let across = Arc::new(InFlight::default());
    let reply = Reply::delayed("ok", Duration::from_millis(2));
    let a = MockServer::start_with(reply.clone(), Some(across.clone()));
    let b = MockServer::start_with(reply, Some(across.clone()));
    // Per-endpoint caps 8 + 40 would allow 48; the global cap of 32 must bind. Routing
    // balances load, so `a` (cap 8) is offered more than it may take: its cap must bind.
    let client = ModelClient::start(config(
        vec![
            endpoint("a", &a.base_url(), 8),
            endpoint("b", &b.base_url(), 40),
        ],
        32,
    ))
    .await
    .unwrap();

    // Each call on a task of its own, as the runtime runs them.
    let calls: Vec<_> = (0..CALLS)
        .map(|i| spawned(&client, request(&format!("burst {i}"), i % 2 == 0)))
        .collect();
    let results = futures::future::join_all(calls).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} calls failed, first: {:?}",
        failed.len(),
        failed.first()
    );

    assert_eq!(a.chat_count() + b.chat_count(), CALLS);
    assert!(
        a.peak_in_flight() <= 8,
        "endpoint a peak {}",
        a.peak_in_flight()
    );
    assert!(
        b.peak_in_flight() <= 40,
        "endpoint b peak {}",
        b.peak_in_flight()
    );
    assert!(across.peak() <= 32, "global peak {}", across.peak());
    assert!(
        across.peak() > 1,
        "calls should overlap (peak {})",
        across.peak()
    );

    let snap = client.snapshot();
    assert_eq!(snap.global_in_flight, 0);
    assert_eq!(
        snap.endpoints.iter().map(|e| e.calls).sum::<u64>(),
        CALLS as u64
    );
    assert!(
        snap.endpoints
            .iter()
            .all(|e| e.in_flight == 0 && e.queued == 0 && e.errors == 0)
    );
    client.shutdown().await;
}

/// With one connection opened at a time (`max_connecting = 1`), a burst still ends with
/// every call answered and the calls running side by side: the limit holds only the
/// handshake, never the connection, so the pool grows to one connection per call in
/// flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_opened_one_at_a_time_still_serve_calls_side_by_side() {
    let server = MockServer::start(Reply::delayed("ok", Duration::from_millis(50)));
    let mut spec = endpoint("a", &server.base_url(), 32);
    spec.max_connecting = 1;
    let client = ModelClient::start(config(vec![spec], 32)).await.unwrap();
    let calls: Vec<_> = (0..64)
        .map(|i| spawned(&client, request(&format!("call {i}"), false)))
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(calls))
        .await
        .expect("calls finish");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(server.chat_count(), 64);
    assert!(
        server.peak_in_flight() > 8,
        "calls should run side by side over their own connections (peak {})",
        server.peak_in_flight()
    );
    client.shutdown().await;
}

/// A chat call of group `g` on a task of its own; a panic in it fails the test.
async fn spawned(client: &ModelClient, request: ChatRequest) -> Result<ChatResponse, ClientError> {
    let client = client.clone();
    tokio::spawn(async move { client.chat("g", request).await })
        .await
        .expect("the call's task does not panic")
}
