//! Throughput of `tmas sim-server` at zero latency (ignored by default: it measures, it
//! does not assert). Run in release mode:
//!
//! ```text
//! cargo test --release -p tmas --test sim_throughput -- --ignored --nocapture
//! ```
//!
//! The load generator is a minimal keep-alive HTTP/1.1 client over raw TCP so that the
//! client's own cost (on the same 2 cores) stays small next to the server's.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::TcpStream;

use crate::support::cli::BIN;

fn request(addr: &str, stream: bool, i: usize) -> Vec<u8> {
    let body = format!(
        "{{\"model\":\"tmas-sim\",\"stream\":{stream},\"messages\":[{{\"role\":\"user\",\"content\":\"Solve problem {i}: find the number of tilings of a 2 by n board.\"}}]}}"
    );
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         x-tmas-role: solution\r\nx-tmas-problem: p{i}\r\nx-tmas-iteration: 0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends requests on one connection until `stop`; counts 200 responses.
async fn worker(
    addr: String,
    req: Vec<u8>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let stream = TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let (r, mut w) = stream.into_split();
    let mut r = AsyncBufReader::new(r);
    let mut line = String::new();
    let mut body = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        w.write_all(&req).await?;
        line.clear();
        r.read_line(&mut line).await?;
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        let mut len = 0usize;
        loop {
            line.clear();
            r.read_line(&mut line).await?;
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        body.resize(len, 0);
        r.read_exact(&mut body).await?;
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "measures throughput; run in release with --ignored --nocapture"]
async fn sim_server_throughput() {
    let mut child = Command::new(BIN)
        .args(["sim-server", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tmas binary starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("tmas-sim listening on http://")
        .unwrap()
        .to_owned();
    let connections = 64;
    for stream in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..connections)
            .map(|i| {
                tokio::spawn(worker(
                    addr.clone(),
                    request(&addr, stream, i),
                    stop.clone(),
                    done.clone(),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await; // warm-up
        let (start, before) = (Instant::now(), done.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let n = done.load(Ordering::Relaxed) - before;
        let secs = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        println!(
            "sim-server {}: {n} requests in {secs:.1} s over {connections} connections = {:.0} req/s",
            if stream { "stream" } else { "non-stream" },
            n as f64 / secs
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
