//! The model client as the runtime's call executor: a call goes through on a task of its
//! own, an embeddings call carries its key as the call identity the server sees, and a
//! failed call comes back as a failure of the client's kind with its message.

use std::sync::Arc;

use tmas_actors::strategy::{CallExecutor, CallKey};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{CallTags, EmbeddingRequest};

use crate::support::mock_model;
use crate::support::toy::request;

fn key() -> CallKey {
    CallKey {
        problem: "p-3".into(),
        iteration: 2,
        role: "embedding".into(),
        candidate: None,
        index: None,
        attempt: 0,
    }
}

#[tokio::test]
async fn a_chat_call_and_an_embeddings_call_go_through_with_their_identity() {
    let server = mock_model::start().await;
    let client = mock_model::client(&server.base_url).await;

    let chat = client
        .execute("g".into(), request("hello", "solution", "p-1", 0))
        .await
        .expect("the chat call is answered");
    assert_eq!((&*chat.content, &*chat.endpoint), ("ok", "m"));

    let embeddings = EmbeddingRequest {
        inputs: vec![Arc::from("abc"), Arc::from("de")],
        tags: CallTags {
            role: "embedding".into(),
            problem: "p-3".into(),
            iteration: 2,
            call: None,
            affinity: None,
        },
    };
    let reply = client
        .execute_embeddings(&key(), "g".into(), embeddings)
        .await
        .expect("the embeddings call is answered");
    assert_eq!(reply.embeddings.expect("vectors").len(), 2);
    let calls = server.calls.lock().expect("calls lock").clone();
    assert_eq!(calls[1], "p-3/it2/embedding/a0", "{calls:?}");
    client.shutdown().await;
}

#[tokio::test]
async fn a_failed_call_is_a_failure_of_the_clients_kind() {
    let server = mock_model::start().await;
    let client = mock_model::client(&server.base_url).await;
    let failure = client
        .execute(
            "no-such-group".into(),
            request("hello", "solution", "p-1", 0),
        )
        .await
        .expect_err("no group of that name");
    assert_eq!(failure.kind, FailureKind::UnknownGroup, "{failure:?}");
    assert!(failure.message.contains("no-such-group"), "{failure:?}");
    client.shutdown().await;
}
