//! Retries, timeouts, malformed bodies, `finish_reason`, `max_tokens` fitting and the
//! `x-tmas-*` headers, against the loopback mock server.

use std::time::Duration;

use crate::support::mock_server::{MockServer, Reply, config, endpoint, request};
use tmas_client::TokenCounter;
use tmas_client::failure::FailureKind;
use tmas_client::wire::ChatMessage;
use tmas_client::{ClientError, ModelClient, TokenEstimate};

async fn client_for(server: &MockServer) -> ModelClient {
    ModelClient::start(config(vec![endpoint("e1", &server.base_url(), 8)], 8))
        .await
        .expect("client starts")
}

#[tokio::test]
async fn status_429_with_retry_after_is_waited_out_and_retried() {
    let server = MockServer::start(Reply::ok("fine"));
    server.push(Reply::Status {
        code: 429,
        retry_after: Some(1),
        body: "slow down".into(),
    });
    let client = client_for(&server).await;

    let resp = client
        .chat("g", request("hello", false))
        .await
        .expect("retried to success");
    assert_eq!(&*resp.content, "fine");
    assert_eq!(resp.attempts, 2);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // Backoff alone (10..100 ms) would retry far sooner than the server's 1 s.
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "Retry-After ignored: retried after {gap:?}"
    );
    let snap = client.snapshot();
    assert_eq!(
        (snap.endpoints[0].retries, snap.endpoints[0].errors),
        (1, 1)
    );
    assert!(snap.endpoints[0].healthy, "a 429 must not open the breaker");
    client.shutdown().await;
}

#[tokio::test]
async fn a_hung_request_times_out_and_is_retried() {
    let server = MockServer::start(Reply::ok("after the hang"));
    server.push(Reply::Hang);
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.endpoints[0].request_timeout = Duration::from_millis(500);
    let client = ModelClient::start(cfg).await.unwrap();

    let resp = client
        .chat("g", request("hello", false))
        .await
        .expect("retry succeeds");
    assert_eq!(&*resp.content, "after the hang");
    assert_eq!(resp.attempts, 2);
    assert_eq!(server.chat_count(), 2);

    // With every attempt hanging the call ends with a Timeout naming the endpoint.
    server.set_default(Reply::Hang);
    let err = client.chat("g", request("again", false)).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("e1"), "{err}");
    client.shutdown().await;
}

#[tokio::test]
async fn an_attempt_past_its_timeout_goes_on_beside_a_hedge_and_the_first_answer_wins() {
    // A generation longer than the timeout: the first attempt is not abandoned, so the call
    // ends when it answers (~900 ms), not after a timeout plus a second full generation
    // (300 + 900 ms with the hedge also this long).
    let long = Reply::Ok {
        content: "long".into(),
        reasoning: None,
        finish_reason: "stop".into(),
        delay: Duration::from_millis(900),
    };
    let server = MockServer::start(Reply::Hang);
    server.push(long);
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.endpoints[0].request_timeout = Duration::from_millis(300);
    cfg.policy.timeout_growth = 4.0;
    let client = ModelClient::start(cfg).await.unwrap();
    let started = std::time::Instant::now();
    let resp = client.chat("g", request("long one", false)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(&*resp.content, "long");
    assert_eq!(resp.attempts, 2, "a hedge was sent at the timeout");
    assert_eq!(server.chat_count(), 2);
    assert!(took < Duration::from_millis(1150), "{took:?}");
    let e = &client.snapshot().endpoints[0];
    assert!(e.healthy);
    assert_eq!(e.breaker_trips, 0);
    client.shutdown().await;
}

/// One endpoint answering `script` in turn (then hanging), timeout 100 ms, two timeout
/// attempts, growth 2; the answer to one call and the attempts the server saw.
async fn answer_to_one_call(script: Vec<Reply>) -> (tmas_client::wire::ChatResponse, usize) {
    let server = MockServer::start(Reply::Hang);
    for reply in script {
        server.push(reply);
    }
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.endpoints[0].request_timeout = Duration::from_millis(100);
    cfg.policy.max_timeout_attempts = 2;
    cfg.policy.timeout_growth = 2.0;
    let client = ModelClient::start(cfg).await.unwrap();
    let resp = client
        .chat("g", request("a long generation", false))
        .await
        .expect("the long generation answers");
    assert!(client.snapshot().endpoints[0].healthy);
    client.shutdown().await;
    (resp, server.chat_count())
}

#[tokio::test]
async fn a_hedged_attempt_cut_by_a_crash_gives_its_timeout_back_so_a_long_generation_finishes() {
    // The longest generation a call waits for is the first attempt's, hedged at 100 ms
    // and given up at 300 ms. Here that attempt is cut at 150 ms (its server crashed) and
    // the hedge's generation takes 450 ms. Had the crash spent the hedge's timeout, the
    // hedge would be given up at its own timeout (200 ms) and the call lost; given back,
    // the hedge is itself hedged at its timeout and goes on to answer.
    let long = Reply::delayed("long", Duration::from_millis(450));
    let (resp, sent) = answer_to_one_call(vec![Reply::cut_after(150), long]).await;
    assert_eq!(&*resp.content, "long");
    assert_eq!(resp.attempts, 3, "the cut one, the long one, and its hedge");
    assert_eq!(sent, 3);
}

#[tokio::test]
async fn after_a_crash_a_long_generation_is_retried_on_the_rung_it_had_reached() {
    // The first attempt passes its timeout and is hedged (the next attempts are allowed
    // 200 ms before a hedge, 600 ms in all); then both are cut by crashes. The retry is a
    // 450 ms generation: started back on the first rung (100 ms, 300 ms in all) it would
    // be hedged, then given up with its hedge when the budget ran out at 300 ms; on the
    // rung reached it answers.
    let long = Reply::delayed("long", Duration::from_millis(450));
    let (resp, sent) =
        answer_to_one_call(vec![Reply::cut_after(150), Reply::cut_after(100), long]).await;
    assert_eq!(&*resp.content, "long");
    assert_eq!(resp.attempts, 4, "two cut, the long one and its hedge");
    assert_eq!(sent, 4);
}

#[tokio::test]
async fn a_malformed_body_is_retried_then_reported_with_endpoint_status_and_snippet() {
    let server = MockServer::start(Reply::Raw {
        status: 200,
        body: "{\"choices\": [oops this is not json".into(),
    });
    let client = client_for(&server).await;

    let err = client.chat("g", request("hello", false)).await.unwrap_err();
    match &err {
        ClientError::Malformed {
            endpoint,
            status,
            snippet,
        } => {
            assert_eq!(&**endpoint, "e1");
            assert_eq!(*status, 200);
            assert!(snippet.contains("oops this is not json"), "{snippet}");
            assert!(
                snippet.chars().count() <= 201,
                "snippet too long: {}",
                snippet.len()
            );
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("e1") && text.contains("200") && text.contains("oops"),
        "{text}"
    );
    // max_malformed_attempts = 3 in the test policy.
    assert_eq!(server.chat_count(), 3);

    // An empty 200 body is malformed too, and a good reply after it succeeds.
    server.push(Reply::Raw {
        status: 200,
        body: String::new(),
    });
    server.set_default(Reply::ok("good"));
    let resp = client
        .chat("g", request("hello", false))
        .await
        .expect("second try is good");
    assert_eq!((resp.attempts, &*resp.content), (2, "good"));
    client.shutdown().await;
}

#[tokio::test]
async fn finish_reason_length_is_reported() {
    let server = MockServer::start(Reply::Ok {
        content: "cut off mid".into(),
        reasoning: None,
        finish_reason: "length".into(),
        delay: Duration::ZERO,
    });
    let client = client_for(&server).await;
    for stream in [false, true] {
        let resp = client.chat("g", request("hello", stream)).await.unwrap();
        assert_eq!(
            resp.finish_reason.as_deref(),
            Some("length"),
            "stream={stream}"
        );
        assert_eq!(resp.usage.completion_tokens, 22);
    }
    client.shutdown().await;
}

#[tokio::test]
async fn max_tokens_sent_fits_the_context_window() {
    let server = MockServer::start(Reply::ok("ok"));
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.endpoints[0].context_window = 2_000;
    let margin = cfg.policy.context_margin;
    let client = ModelClient::start(cfg).await.unwrap();
    let counter = TokenCounter::from_estimate(&TokenEstimate::Bytes {
        bytes_per_token: 3.0,
    })
    .unwrap();

    // Long prompt: the window, not the role, limits max_tokens.
    let prompt = "x".repeat(3_000);
    let prompt_tokens = counter.count(&[ChatMessage::user(prompt.as_str())]);
    let expected = 2_000 - prompt_tokens - margin;
    assert!(
        expected < 1_000,
        "test setup: the window must be the binding limit"
    );
    let resp = client.chat("g", request(&prompt, false)).await.unwrap();
    assert_eq!(resp.max_tokens_sent, expected);
    // Short prompt: the role's max (1000) is the limit.
    let resp2 = client.chat("g", request("short", false)).await.unwrap();
    assert_eq!(resp2.max_tokens_sent, 1_000);

    let reqs = server.requests();
    assert_eq!(reqs[0].body["max_tokens"], expected);
    assert_eq!(reqs[1].body["max_tokens"], 1_000);
    assert_eq!(reqs[0].body["model"], "model-e1");

    // A prompt alone larger than the window fails at once, naming endpoint and sizes.
    let err = client
        .chat("g", request(&"y".repeat(9_000), false))
        .await
        .unwrap_err();
    let ClientError::PromptTooLong {
        endpoint,
        prompt_tokens,
        context_window,
    } = &err
    else {
        panic!("expected PromptTooLong, got {err:?}")
    };
    assert_eq!((&**endpoint, *context_window), ("e1", 2_000));
    assert!(*prompt_tokens >= 3_000);
    let text = err.to_string();
    assert!(text.contains("e1") && text.contains("2000"), "{text}");
    assert_eq!(
        server.chat_count(),
        2,
        "the oversized prompt must not reach the server"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn tags_travel_as_headers_and_client_errors_are_not_retried() {
    let server = MockServer::start(Reply::ok("ok"));
    let client = client_for(&server).await;
    client.chat("g", request("hello", false)).await.unwrap();
    let reqs = server.requests();
    let h = &reqs[0].headers;
    assert_eq!(h.get("x-tmas-role").map(String::as_str), Some("solution"));
    assert_eq!(h.get("x-tmas-problem").map(String::as_str), Some("p-7"));
    assert_eq!(h.get("x-tmas-iteration").map(String::as_str), Some("3"));

    server.set_default(Reply::Status {
        code: 400,
        retry_after: None,
        body: "bad request: field x".into(),
    });
    let err = client.chat("g", request("hello", false)).await.unwrap_err();
    let ClientError::Status {
        status: 400,
        body_snippet,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(body_snippet.contains("field x"));
    assert_eq!(server.chat_count(), 2, "a 400 is not retried");

    // A 502 is retried up to max_attempts (4 in the test policy) and then reported.
    server.set_default(Reply::Status {
        code: 502,
        retry_after: None,
        body: "bad gateway".into(),
    });
    let before = server.chat_count();
    let err = client.chat("g", request("hello", false)).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 502, .. }),
        "{err:?}"
    );
    assert_eq!(server.chat_count() - before, 4);

    let unknown = client
        .chat("nope", request("hello", false))
        .await
        .unwrap_err();
    assert!(matches!(unknown, ClientError::UnknownGroup { .. }));
    client.shutdown().await;
    let after = client.chat("g", request("hello", false)).await.unwrap_err();
    assert!(matches!(after, ClientError::Shutdown));
}

#[tokio::test]
async fn overload_is_back_pressure_beyond_max_attempts_and_lowers_the_limit() {
    let server = MockServer::start(Reply::ok("served"));
    // Three times max_attempts (4) overload answers: still not a failure.
    for _ in 0..12 {
        server.push(Reply::Status {
            code: 503,
            retry_after: Some(0),
            body: "queue full".into(),
        });
    }
    let client = client_for(&server).await;
    let resp = client
        .chat("g", request("hello", false))
        .await
        .expect("overload is waited out, not counted against max_attempts");
    assert_eq!(resp.attempts, 13);
    let e = &client.snapshot().endpoints[0];
    assert!(e.healthy, "overload never opens the breaker");
    assert_eq!((e.breaker_trips, e.overloads), (0, 12));
    assert!(
        e.concurrency_limit < e.max_in_flight,
        "the AIMD limit came down: {} of {}",
        e.concurrency_limit,
        e.max_in_flight
    );
    assert!(e.concurrency_limit >= 1);
    client.shutdown().await;
}

#[tokio::test]
async fn overload_retries_end_with_the_outage_budget() {
    let server = MockServer::start(Reply::Status {
        code: 429,
        retry_after: None,
        body: "rate limited".into(),
    });
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.policy.outage_budget = Duration::from_millis(600);
    let client = ModelClient::start(cfg).await.unwrap();
    let started = std::time::Instant::now();
    let err = client.chat("g", request("hello", false)).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 429, .. }),
        "{err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(
        server.chat_count() > 4,
        "bounded in time, not by max_attempts: {} attempts",
        server.chat_count()
    );
    assert!(client.snapshot().endpoints[0].healthy);
    client.shutdown().await;
}

#[tokio::test]
async fn a_call_that_always_times_out_is_reported_as_timeout_without_taking_the_endpoint_out() {
    let server = MockServer::start(Reply::ok("quick"));
    for _ in 0..3 {
        server.push(Reply::Hang);
    }
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.endpoints[0].request_timeout = Duration::from_millis(150);
    // Fewer timeout attempts than the old breaker's 3 consecutive failures would allow…
    cfg.policy.max_timeout_attempts = 3;
    cfg.policy.timeout_growth = 2.0;
    let client = ModelClient::start(cfg).await.unwrap();
    let started = std::time::Instant::now();
    let err = client.chat("g", request("slow", false)).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Timeout, "{err:?}");
    // 150 + 300 + 600 ms: each attempt was allowed twice as long as the one before.
    assert!(
        started.elapsed() >= Duration::from_millis(1050),
        "{:?}",
        started.elapsed()
    );
    let e = &client.snapshot().endpoints[0];
    assert!(e.healthy, "one slow call does not take the endpoint out");
    assert_eq!((e.breaker_trips, e.timeouts), (0, 3));
    // …and the endpoint keeps serving.
    let resp = client.chat("g", request("next", false)).await.unwrap();
    assert_eq!(&*resp.content, "quick");
    client.shutdown().await;
}

#[tokio::test]
async fn a_stream_cut_while_another_call_runs_lowers_the_limit_and_spends_no_attempt() {
    // One attempt per call: a cut charged to the call's attempts would lose it.
    let server = MockServer::start(Reply::ok("whole answer"));
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 8)], 8);
    cfg.policy.max_attempts = 1;
    // The first call streams for a while; the second is cut (llama.cpp ends a running
    // stream for the next request: here the newer one, which changes nothing for the
    // client) while the first still runs, then answered.
    server.push(Reply::delayed("long answer", Duration::from_millis(300)));
    server.push(Reply::Interrupted);
    let client = ModelClient::start(cfg).await.expect("client starts");
    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.chat("g", request("first", true)).await })
    };
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = client.chat("g", request("second", true)).await.unwrap();
    assert_eq!(&*second.content, "whole answer");
    assert_eq!(second.attempts, 2);
    assert_eq!(&*first.await.unwrap().unwrap().content, "long answer");
    let e = &client.snapshot().endpoints[0];
    assert_eq!((e.overloads, e.breaker_trips), (1, 0), "{e:?}");
    assert!(
        e.concurrency_limit <= 2,
        "the cut halved it at least: {e:?}"
    );
    assert!(e.healthy);

    // Alone on the endpoint, a stream ended that way is `interrupted` as before.
    server.push(Reply::Interrupted);
    let err = client.chat("g", request("alone", true)).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Interrupted, "{err:?}");
    assert_eq!(client.snapshot().endpoints[0].overloads, 1);
    client.shutdown().await;
}

#[tokio::test]
async fn an_interrupted_stream_is_retried_and_reported_as_interrupted_if_it_never_finishes() {
    let server = MockServer::start(Reply::ok("whole answer"));
    server.push(Reply::Interrupted);
    let client = client_for(&server).await;
    let resp = client.chat("g", request("go", true)).await.unwrap();
    assert_eq!(&*resp.content, "whole answer");
    assert_eq!(resp.attempts, 2);

    server.set_default(Reply::Interrupted);
    let err = client.chat("g", request("go", true)).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Interrupted, "{err:?}");
    assert!(err.to_string().contains("[DONE] received"), "{err}");
    client.shutdown().await;
}
