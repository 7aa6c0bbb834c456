//! Embeddings calls through the model client: the OpenAI body, the `x-tmas-*` headers,
//! vectors in input order, and a reply with the wrong vectors treated like a malformed
//! chat body (retried, then an error naming the endpoint and what was wrong).

use std::sync::Arc;
use std::time::Duration;

use crate::support::mock_server::{MockServer, Reply, config, endpoint};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{CallTags, EmbeddingRequest};
use tmas_client::{ClientError, ModelClient};

fn request(inputs: &[&str]) -> EmbeddingRequest {
    EmbeddingRequest {
        inputs: inputs.iter().map(|s| Arc::from(*s)).collect(),
        tags: CallTags {
            role: "embedding".into(),
            problem: "p-3".into(),
            iteration: 2,
            call: None,
            affinity: None,
        },
    }
}

async fn client_for(server: &MockServer) -> ModelClient {
    ModelClient::start(config(vec![endpoint("emb", &server.base_url(), 4)], 4))
        .await
        .expect("client starts")
}

#[tokio::test]
async fn vectors_come_back_in_input_order_with_usage_and_the_call_identity_is_sent() {
    let server = MockServer::start(Reply::ok(""));
    let client = client_for(&server).await;
    let mut req = request(&["abc", "de"]);
    req.tags.call = Some("p-3/it2/embedding/a0".into());
    let resp = client.embed("g", req).await.expect("answered");
    let vectors = resp.embeddings.expect("an embeddings reply");
    assert_eq!(&vectors[..], &[vec![3.0, 0.0], vec![2.0, 1.0]]);
    assert_eq!(
        (resp.usage.prompt_tokens, resp.usage.completion_tokens),
        (5, 0)
    );
    assert_eq!(
        (&*resp.endpoint, resp.attempts, &*resp.content),
        ("emb", 1, "")
    );
    let sent = &server.requests()[0];
    assert_eq!(
        sent.body,
        serde_json::json!({"model": "model-emb", "input": ["abc", "de"], "encoding_format": "float"})
    );
    assert_eq!(sent.headers["x-tmas-role"], "embedding");
    assert_eq!(sent.headers["x-tmas-call"], "p-3/it2/embedding/a0");
    assert_eq!((server.embeddings_count(), server.chat_count()), (1, 0));
    let snap = client.snapshot();
    assert_eq!(
        (snap.endpoints[0].calls, snap.endpoints[0].input_tokens),
        (1, 5)
    );
    client.shutdown().await;
}

#[tokio::test]
async fn a_reply_with_the_wrong_vectors_is_retried_like_a_malformed_body() {
    let server = MockServer::start(Reply::ok(""));
    // One vector for two inputs, then two vectors of different lengths.
    server.push(Reply::Raw {
        status: 200,
        body: r#"{"data":[{"index":0,"embedding":[1,2]}]}"#.into(),
    });
    server.push(Reply::Raw {
        status: 200,
        body: r#"{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]}"#.into(),
    });
    let client = client_for(&server).await;
    let resp = client
        .embed("g", request(&["a", "b"]))
        .await
        .expect("the third reply is good");
    assert_eq!(resp.attempts, 3);
    assert_eq!(resp.embeddings.expect("vectors").len(), 2);

    // Bad every time: the malformed budget (3) runs out and the error says what was wrong.
    server.set_default(Reply::Raw {
        status: 200,
        body: r#"{"data":[{"index":0,"embedding":[1,"x"]}]}"#.into(),
    });
    let before = server.embeddings_count();
    let err = client
        .embed("g", request(&["only"]))
        .await
        .expect_err("never a usable reply");
    assert!(matches!(err, ClientError::Malformed { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("endpoint `emb`") && text.contains("invalid embeddings JSON"),
        "{text}"
    );
    assert_eq!(server.embeddings_count() - before, 3);
    client.shutdown().await;
}

#[tokio::test]
async fn overload_is_waited_out_and_a_rejected_request_is_not_retried() {
    let server = MockServer::start(Reply::ok(""));
    server.push(Reply::Status {
        code: 503,
        retry_after: Some(1),
        body: "loading".into(),
    });
    let client = client_for(&server).await;
    let resp = client
        .embed("g", request(&["x"]))
        .await
        .expect("retried after the Retry-After");
    assert_eq!(resp.attempts, 2);
    let reqs = server.requests();
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(950));

    server.push(Reply::Status {
        code: 404,
        retry_after: None,
        body: "{\"message\":\"The model does not support embeddings\"}".into(),
    });
    let before = server.embeddings_count();
    let err = client.embed("g", request(&["x"])).await.expect_err("404");
    assert_eq!(err.kind(), FailureKind::Permanent);
    assert!(err.to_string().contains("HTTP 404"), "{err}");
    assert_eq!(server.embeddings_count() - before, 1, "never re-sent");
    client.shutdown().await;
}
