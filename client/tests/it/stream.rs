//! Response parsing: `reasoning_content` (SGLang) and `reasoning` (vLLM), streamed and
//! not; a stalled stream is caught by the idle timeout and retried.

use std::time::Duration;

use crate::support::mock_server::{MockServer, ReasoningField, Reply, config, endpoint, request};
use tmas_client::wire::Usage;
use tmas_client::{ClientError, ModelClient};

fn reply(field: ReasoningField) -> Reply {
    Reply::Ok {
        content: "The answer is \\boxed{42}.".into(),
        reasoning: Some((field, "Let me think: 6 × 7 = 42.".into())),
        finish_reason: "stop".into(),
        delay: Duration::ZERO,
    }
}

#[tokio::test]
async fn both_reasoning_fields_parse_streamed_and_not() {
    for field in [ReasoningField::ReasoningContent, ReasoningField::Reasoning] {
        let server = MockServer::start(reply(field));
        let client = ModelClient::start(config(vec![endpoint("e1", &server.base_url(), 4)], 4))
            .await
            .unwrap();
        for stream in [true, false] {
            let resp = client
                .chat("g", request("what is 6*7?", stream))
                .await
                .expect("parses");
            let ctx = format!("{field:?} stream={stream}");
            assert_eq!(&*resp.content, "The answer is \\boxed{42}.", "{ctx}");
            assert_eq!(
                resp.reasoning.as_deref(),
                Some("Let me think: 6 × 7 = 42."),
                "{ctx}"
            );
            assert_eq!(resp.finish_reason.as_deref(), Some("stop"), "{ctx}");
            assert_eq!(
                resp.usage,
                Usage {
                    prompt_tokens: 11,
                    completion_tokens: 22,
                    estimated: false,
                },
                "{ctx}"
            );
            assert_eq!(&*resp.endpoint, "e1");
        }
        let sent = server.requests();
        assert_eq!(sent[0].body["stream"], true);
        assert_eq!(sent[0].body["stream_options"]["include_usage"], true);
        assert_eq!(sent[1].body["stream"], false);
        client.shutdown().await;
    }
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout_and_is_retried() {
    let server = MockServer::start(reply(ReasoningField::Reasoning));
    server.push(Reply::StreamStall);
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 4)], 4);
    // The whole-request timeout is long; only the idle timeout can end the stall quickly.
    cfg.endpoints[0].request_timeout = Duration::from_secs(3_600);
    cfg.endpoints[0].stream_idle_timeout = Duration::from_millis(400);
    let client = ModelClient::start(cfg).await.unwrap();

    let resp = client
        .chat("g", request("q", true))
        .await
        .expect("second attempt streams fully");
    assert_eq!(resp.attempts, 2);
    assert_eq!(resp.reasoning.as_deref(), Some("Let me think: 6 × 7 = 42."));

    server.set_default(Reply::StreamStall);
    let err = client.chat("g", request("q", true)).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Timeout { after, .. } if *after == Duration::from_millis(400)),
        "{err:?}"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn a_garbled_stream_is_malformed() {
    let server = MockServer::start(Reply::Raw {
        status: 200,
        body: "data: {broken\n\n".into(),
    });
    let client = ModelClient::start(config(vec![endpoint("e1", &server.base_url(), 4)], 4))
        .await
        .unwrap();
    let err = client.chat("g", request("q", true)).await.unwrap_err();
    let ClientError::Malformed {
        endpoint,
        status,
        snippet,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((&**endpoint, *status), ("e1", 200));
    assert!(snippet.contains("broken"), "{snippet}");
    client.shutdown().await;
}
