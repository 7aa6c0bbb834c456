//! Request bodies built from shared prompt segments: the server receives the flat
//! prompt's JSON, whole, with an exact `Content-Length` (never chunked), streamed or not,
//! however many calls share the segments' escapes.

use std::sync::Arc;

use crate::support::mock_server::{MockServer, Reply, config, endpoint, request};
use tmas_client::ModelClient;
use tmas_client::wire::{ChatMessage, PromptTextBuilder};

#[tokio::test]
async fn a_body_of_shared_segments_arrives_whole_with_its_exact_length() {
    let server = MockServer::start(Reply::ok("fine"));
    let client = ModelClient::start(config(vec![endpoint("e1", &server.base_url(), 4)], 4))
        .await
        .unwrap();
    let rollout: Arc<str> = "Step \"1\": \\frac{a}{b}\n\t数 ".repeat(500).into();
    let mut b = PromptTextBuilder::new();
    b.push_str("Rollouts:\n");
    b.push_shared(&rollout);
    b.push_str("\n---\n");
    b.push_shared(&rollout);
    let prompt = b.finish();
    assert!(prompt.segments().len() >= 3);
    let flat = prompt.to_string();
    for stream in [false, true, false] {
        let mut req = request("unused", stream);
        req.messages = vec![
            ChatMessage::system("sys"),
            ChatMessage::user(prompt.clone()),
        ];
        client.chat("g", req).await.expect("answered");
    }
    let sent = server.requests();
    assert_eq!(sent.len(), 3);
    for r in &sent {
        assert_eq!(
            r.body["messages"][1]["content"].as_str(),
            Some(flat.as_str())
        );
        assert_eq!(r.body["messages"][0]["content"], "sys");
        assert!(
            !r.headers.contains_key("transfer-encoding"),
            "{:?}",
            r.headers
        );
        let length: usize = r.headers["content-length"].parse().expect("a length");
        assert_eq!(length, r.body_len);
        assert!(r.body_len > flat.len(), "{}", r.body_len);
    }
    client.shutdown().await;
}
