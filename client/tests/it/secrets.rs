//! An API key is sent as `Authorization: Bearer …` and never appears in logs (all
//! levels, including the HTTP stack's), in `Debug` output of the config or client, or in
//! errors — even when the server echoes it back. (The key is passed in directly: reading
//! it from the variable the config names is the config loader's job, tested there, and a
//! test must not set variables of a process whose other tests run at the same time.)

use crate::support::logs::{Capture, run_with_subscriber};
use crate::support::mock_server::{MockServer, Reply, config, endpoint, request};
use tmas_client::{ApiKey, ModelClient};

const SECRET: &str = "sk-tmas-test-7f3a9c1e5b";

#[test]
fn the_api_key_never_leaks() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(capture.clone())
        .with_ansi(false)
        .finish();
    let mut texts = run_with_subscriber(subscriber, calls_with_a_key());
    texts.push(capture.text());
    assert!(
        texts[4].contains("call failed after retries"),
        "logs were captured"
    );
    for text in &texts {
        assert!(!text.contains(SECRET), "secret leaked in: {text}");
    }
}

/// A success, a retried 500 and a 401 (both echoing the credentials), with the key set;
/// returns the `Debug`/`Display` texts of everything the caller can see.
async fn calls_with_a_key() -> Vec<String> {
    let key = ApiKey::new(SECRET.to_owned());
    let server = MockServer::start(Reply::ok("fine"));
    let mut cfg = config(vec![endpoint("e1", &server.base_url(), 4)], 4);
    cfg.endpoints[0].api_key = Some(key);
    let client = ModelClient::start(cfg.clone()).await.unwrap();

    // A success, a retried 500 that echoes the credentials, then a 401 that does too.
    client.chat("g", request("hello", true)).await.unwrap();
    server.set_default(Reply::EchoAuth { code: 500 });
    let err500 = client.chat("g", request("hello", false)).await.unwrap_err();
    server.set_default(Reply::EchoAuth { code: 401 });
    let err401 = client.chat("g", request("hello", false)).await.unwrap_err();

    // The key was really sent.
    let sent = server.requests();
    assert_eq!(
        sent[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {SECRET}").as_str())
    );

    let texts = vec![
        format!("{cfg:?}"),
        format!("{client:?}"),
        format!("{err500:?} {err500}"),
        format!("{err401:?} {err401}"),
    ];
    assert!(
        texts[2].contains("[redacted]"),
        "the echoed key is replaced: {}",
        texts[2]
    );
    assert!(texts[3].contains("401"));
    client.shutdown().await;
    texts
}
