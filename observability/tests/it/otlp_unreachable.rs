//! A collector address with nothing listening: spans are dropped, nothing blocks.
//!
//! The exporter's layer goes into a subscriber of this test's own: the process-wide one
//! belongs to `otlp_export`, which runs in the same process.

use std::time::{Duration, Instant};

use tmas_observability::otlp::{ObservabilityConfig, OtlpSettings, build};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_neither_blocks_nor_fails() {
    // Bind then drop: the port is (almost certainly) closed afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for protocol in ["grpc"] {
        let config = ObservabilityConfig {
            otlp_endpoint: Some(format!("http://127.0.0.1:{port}")),
            otlp_protocol: Some(protocol.into()),
            ..Default::default()
        };
        let settings = OtlpSettings::resolve(&config, &|_| None).unwrap().unwrap();
        let (layer, guard) = build(&settings).expect("building the exporter does not connect");
        // Spans of this thread only: the test body runs on the test's thread.
        tracing::subscriber::with_default(Registry::default().with(layer), || {
            for i in 0..5_000 {
                let _s = tracing::info_span!("work", i).entered();
            }
        });
        let t0 = Instant::now();
        guard.shutdown().await;
        // Bounded by FLUSH_TIMEOUT (5 s) plus thread start; generous for a loaded machine.
        assert!(t0.elapsed() < Duration::from_secs(60));
    }
}
