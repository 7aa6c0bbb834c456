//! An API key taken from the environment is sent as `Authorization: Bearer …` and never
//! appears in logs (all levels, including the HTTP stack's), in `Debug` output of the
//! config or client, or in errors — even when the server echoes it back.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use support::{MockServer, Reply, config, endpoint, request};
use tmas_actors::client::{ApiKey, ModelClient};
use tmas_actors::strategy::CallExecutor;

const VAR: &str = "TMAS_CLIENT_TEST_API_KEY";
const SECRET: &str = "sk-tmas-test-7f3a9c1e5b";

/// Collects everything the subscriber writes.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_leaks() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(capture.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("only test in this binary");

    // SAFETY: this binary has a single test and sets the variable before any other thread reads it.
    unsafe { std::env::set_var(VAR, SECRET) };
    let key = ApiKey::new(std::env::var(VAR).expect("just set"));

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
    let failure = client
        .execute("g".into(), request("hello", false))
        .await
        .unwrap_err();

    // The key was really sent.
    let sent = server.requests();
    assert_eq!(
        sent[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {SECRET}").as_str())
    );

    let mut texts = vec![
        format!("{cfg:?}"),
        format!("{client:?}"),
        format!("{err500:?} {err500}"),
        format!("{err401:?} {err401}"),
        format!("{failure:?}"),
    ];
    assert!(
        texts[2].contains("[redacted]"),
        "the echoed key is replaced: {}",
        texts[2]
    );
    assert!(texts[3].contains("401"));
    client.shutdown().await;
    texts.push(String::from_utf8_lossy(&capture.0.lock().unwrap()).into_owned());
    assert!(
        texts[5].contains("call failed after retries"),
        "logs were captured"
    );
    for text in &texts {
        assert!(!text.contains(SECRET), "secret leaked in: {text}");
    }
}
