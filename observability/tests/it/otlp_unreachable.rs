//! A collector address with nothing listening: spans are dropped, nothing blocks.

use std::time::{Duration, Instant};

use tmas_observability::otlp::{ObservabilityConfig, OtlpSettings, install};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_neither_blocks_nor_fails() {
    tmas_observability::init_logging(Some("warn"));
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
        let guard = install(&settings).expect("building the exporter does not connect");
        for i in 0..5_000 {
            let _s = tracing::info_span!("work", i).entered();
        }
        let t0 = Instant::now();
        guard.shutdown().await;
        // Bounded by FLUSH_TIMEOUT (5 s) plus thread start; generous for a loaded machine.
        assert!(t0.elapsed() < Duration::from_secs(60));
    }
}
