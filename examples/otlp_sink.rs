//! A throwaway OTLP/gRPC receiver for `tmas bench client` with tracing exported
//! (docs/benchmarks.md): accepts spans on 127.0.0.1:PORT (first argument, default 4317),
//! counts them, prints the count every 5 s. Not for tests (they start one in-process).
//!
//! `cargo run --release --example otlp_sink -- 4317`

use std::time::Duration;

use fake_opentelemetry_collector::FakeCollectorServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), String> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse().map_err(|e| format!("port `{p}`: {e}"))?,
        None => 4317,
    };
    // The fake collector binds an ephemeral port; forward PORT to it.
    let mut server = FakeCollectorServer::start()
        .await
        .map_err(|e| e.to_string())?;
    let target = server.address();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    println!("otlp_sink: listening on 127.0.0.1:{port}");
    let mut total = 0usize;
    let mut tick = tokio::time::Instant::now();
    loop {
        total += server
            .exported_spans(64, Duration::from_millis(50))
            .await
            .len();
        if tick.elapsed() >= Duration::from_secs(5) {
            println!("otlp_sink: {total} spans received");
            tick = tokio::time::Instant::now();
        }
    }
}
