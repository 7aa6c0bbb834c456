//! `tmas bench serve`: requests per second through `tmas serve`, and what the server costs
//! per internal call beside the same calls made directly.
//!
//! A simulator runs as a separate process with a fixed latency. The server runs in this
//! process on 127.0.0.1 and `--clients` HTTP clients (also in this process) each send one
//! TMAS request after another for `--duration` seconds. A request of T iterations waits
//! for T × 4 calls one after another (solution, verification, summary, the two memory
//! agents side by side; 3 with M = 0), so the ideal is `clients ÷ (stages × latency)`
//! requests per second; the ratio to it shows what the server adds to a request's time.
//! Then the same number of calls in flight (the serving phase's, by Little's law) is kept
//! through the model client directly for the same time: the difference in this process's
//! CPU seconds per 1,000 calls is the server's cost per internal call (HTTP in and out,
//! the per-request config, the runtime's actors and the clients' own requests included).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};

use super::sim_process::SimProcess;
use crate::config::CliOverride;
use crate::resources;
use crate::role::Role;
use crate::serve::ServeOptions;

/// Knobs of the serve benchmark.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeBenchArgs {
    /// HTTP clients, each sending one request after another.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub clients: usize,
    /// Fixed simulator latency per call, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub latency_ms: u64,
    /// Measurement time of each phase in seconds (after a short warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// N: candidates per iteration of each request.
    #[arg(long = "candidates", value_name = "N", default_value_t = 2)]
    pub n: u32,
    /// M: verifications per candidate.
    #[arg(long = "verifications", value_name = "M", default_value_t = 2)]
    pub m: u32,
    /// T: iterations per request.
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
}

/// Figures of one serve-benchmark run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServeBenchResult {
    pub clients: usize,
    pub latency_ms: u64,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    pub calls_per_request: u64,
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub requests_per_s: f64,
    pub ideal_requests_per_s: f64,
    pub ratio: f64,
    /// Mean time of a request beyond its chain of call latencies.
    pub overhead_ms_per_request: f64,
    pub calls_per_s: f64,
    pub cpu_s_per_1k_calls_served: f64,
    /// The same calls in flight through the model client directly.
    pub direct_in_flight: usize,
    pub direct_calls_per_s: f64,
    pub cpu_s_per_1k_calls_direct: f64,
    /// The server's CPU per internal call beyond a direct call's, in microseconds.
    pub overhead_cpu_us_per_call: f64,
}

/// Calls in a row one request waits for: per iteration solution, verification, summary,
/// then the two memory agents side by side (no verification with M = 0).
fn stages(a: &ServeBenchArgs) -> u64 {
    u64::from(a.iterations) * if a.m > 0 { 4 } else { 3 }
}

pub async fn run(args: ServeBenchArgs) -> anyhow::Result<ServeBenchResult> {
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    anyhow::ensure!(args.latency_ms > 0, "--latency-ms must be at least 1");
    anyhow::ensure!(
        args.n > 0 && args.iterations > 0,
        "--candidates and --iterations must be at least 1"
    );
    let sim = SimProcess::spawn(&[
        "--latency".into(),
        format!("fixed:{}ms", args.latency_ms),
        "--sim-seed".into(),
        "1".into(),
    ])
    .await?;
    let calls_per_request =
        u64::from(args.iterations) * (u64::from(args.n) * (u64::from(args.m) + 2) + 2);
    // Room for every client's widest stage at once: the cap never binds.
    let cap = args.clients * (args.n as usize) * (args.m.max(1) as usize) + 16;
    let config = write_config(&sim.base_url, cap, args.clients)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let started = crate::serve::start(
        ServeOptions {
            config: config.clone(),
            overrides: Vec::<CliOverride>::new(),
            addr: "127.0.0.1:0".parse().context("loopback address")?,
            env: Vec::new(),
            out: None,
        },
        async move {
            let _ = stop_rx.await;
        },
    )
    .await?;
    let url = format!("http://{}/v1/chat/completions", started.addr);
    let served = drive_requests(&url, &args, Duration::from_secs(2)).await?;
    let _ = stop_tx.send(());
    started.served.await??;
    let _ = std::fs::remove_file(&config);

    // The same calls in flight, directly.
    let calls_per_s = served.calls as f64 / served.seconds;
    let direct_in_flight =
        ((calls_per_s * args.latency_ms as f64 / 1000.0).round() as usize).max(1);
    let direct = drive_direct(&sim.base_url, direct_in_flight, &args).await?;
    sim.stop().await;

    let requests_per_s = served.requests as f64 / served.seconds;
    let chain = stages(&args) as f64 * args.latency_ms as f64;
    let ideal = args.clients as f64 / (chain / 1000.0);
    let per_1k = |cpu: f64, calls: u64| {
        if calls > 0 {
            cpu / calls as f64 * 1000.0
        } else {
            f64::NAN
        }
    };
    let served_cpu = per_1k(served.cpu_seconds, served.calls);
    let direct_cpu = per_1k(direct.cpu_seconds, direct.calls);
    let result = ServeBenchResult {
        clients: args.clients,
        latency_ms: args.latency_ms,
        n: args.n,
        m: args.m,
        iterations: args.iterations,
        calls_per_request,
        duration_s: served.seconds,
        requests: served.requests,
        errors: served.errors,
        requests_per_s,
        ideal_requests_per_s: ideal,
        ratio: requests_per_s / ideal,
        overhead_ms_per_request: served.mean_latency_ms - chain,
        calls_per_s,
        cpu_s_per_1k_calls_served: served_cpu,
        direct_in_flight,
        direct_calls_per_s: direct.calls as f64 / direct.seconds,
        cpu_s_per_1k_calls_direct: direct_cpu,
        overhead_cpu_us_per_call: (served_cpu - direct_cpu) * 1000.0,
    };
    print_result(&result);
    if !args.no_write {
        let path = super::write_result("serve", &json!(result))?;
        println!("written to {}", path.display());
    }
    Ok(result)
}

fn print_result(r: &ServeBenchResult) {
    println!(
        "tmas bench serve: {} clients, {} ms latency, N={} M={} T={} ({} calls a request), {:.1} s",
        r.clients, r.latency_ms, r.n, r.m, r.iterations, r.calls_per_request, r.duration_s
    );
    println!("  requests           {} ({} errors)", r.requests, r.errors);
    println!("  requests/s         {:.1}", r.requests_per_s);
    println!(
        "  ideal requests/s   {:.1}  (clients / (calls in a row x latency))",
        r.ideal_requests_per_s
    );
    println!("  ratio              {:.3}", r.ratio);
    println!(
        "  overhead           {:.2} ms a request beyond its calls' latencies",
        r.overhead_ms_per_request
    );
    println!("  internal calls/s   {:.1}", r.calls_per_s);
    println!(
        "  CPU-s / 1k calls   {:.3} served, {:.3} direct ({} in flight, {:.1} calls/s)",
        r.cpu_s_per_1k_calls_served,
        r.cpu_s_per_1k_calls_direct,
        r.direct_in_flight,
        r.direct_calls_per_s
    );
    println!(
        "  server's overhead  {:.0} us CPU per internal call",
        r.overhead_cpu_us_per_call
    );
}

/// A server config against the simulator at `base_url`, written to a temporary file.
fn write_config(base_url: &str, cap: usize, clients: usize) -> anyhow::Result<PathBuf> {
    let text = format!(
        r#"
[run]
max_concurrent_problems = {clients}
max_in_flight = {cap}

[endpoints.sim]
base_url = "{base_url}"
model = "tmas-sim"
max_in_flight = {cap}
request_timeout_secs = 60
context_window = 131072

[serve]
max_calls_per_request = 100000
"#
    );
    let path = std::env::temp_dir().join(format!("tmas-bench-serve-{}.toml", std::process::id()));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// What one phase measured after its warm-up.
struct Measured {
    requests: u64,
    calls: u64,
    errors: u64,
    seconds: f64,
    cpu_seconds: f64,
    mean_latency_ms: f64,
}

/// `args.clients` clients sending requests for `warmup + duration`; counts the requests
/// finished during `duration` only.
async fn drive_requests(
    url: &str,
    args: &ServeBenchArgs,
    warmup: Duration,
) -> anyhow::Result<Measured> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        .build()
        .context("building the HTTP client")?;
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let counts = Arc::new([
        AtomicU64::new(0), // requests
        AtomicU64::new(0), // internal calls
        AtomicU64::new(0), // errors
        AtomicU64::new(0), // latency sum, µs
    ]);
    let mut tasks = Vec::with_capacity(args.clients);
    for client in 0..args.clients {
        let body = json!({
            "model": "tmas/tmas-sim",
            "messages": [{"role": "user", "content": format!("Problem {client}: find the sum of the first n odd numbers.")}],
            "tmas": {"n": args.n, "m": args.m, "iterations": args.iterations},
        });
        let (http, url) = (http.clone(), url.to_owned());
        let (stop, measuring, counts) = (stop.clone(), measuring.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let reply = http.post(&url).json(&body).send().await;
                let calls = match reply {
                    Ok(r) if r.status().is_success() => r
                        .json::<serde_json::Value>()
                        .await
                        .ok()
                        .and_then(|v| v["usage"]["tmas"]["calls"].as_u64()),
                    _ => None,
                };
                if !measuring.load(Ordering::Relaxed) {
                    continue;
                }
                match calls {
                    Some(calls) => {
                        counts[0].fetch_add(1, Ordering::Relaxed);
                        counts[1].fetch_add(calls, Ordering::Relaxed);
                        counts[3].fetch_add(sent.elapsed().as_micros() as u64, Ordering::Relaxed);
                    }
                    None => {
                        counts[2].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let (started, cpu0) = (Instant::now(), resources::cpu_seconds());
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = resources::cpu_seconds() - cpu0;
    measuring.store(false, Ordering::Relaxed);
    let load = |i: usize| counts[i].load(Ordering::Relaxed);
    let (requests, calls, errors, latency_us) = (load(0), load(1), load(2), load(3));
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    Ok(Measured {
        requests,
        calls,
        errors,
        seconds,
        cpu_seconds,
        mean_latency_ms: if requests > 0 {
            latency_us as f64 / requests as f64 / 1000.0
        } else {
            f64::NAN
        },
    })
}

/// `in_flight` calls kept outstanding through the model client directly.
async fn drive_direct(
    base_url: &str,
    in_flight: usize,
    args: &ServeBenchArgs,
) -> anyhow::Result<Measured> {
    let config = super::client::client_config(base_url, in_flight);
    let client = tmas_client::ModelClient::start(config)
        .await
        .context("starting the model client")?;
    let request = ChatRequest {
        messages: vec![ChatMessage::user(
            "Find the sum of the first n odd numbers.",
        )],
        sampling: Sampling {
            temperature: 1.0,
            top_p: 0.95,
            max_tokens: 1024,
            top_k: None,
        },
        tags: CallTags {
            role: Role::Solution.as_str().into(),
            problem: "bench".into(),
            iteration: 0,
            call: None,
            affinity: None,
        },
        stream: false,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::with_capacity(in_flight);
    for _ in 0..in_flight {
        let (client, request) = (client.clone(), request.clone());
        let (stop, measuring, ok, failed) =
            (stop.clone(), measuring.clone(), ok.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let outcome = client.chat("default", request.clone()).await;
                if measuring.load(Ordering::Relaxed) {
                    match outcome {
                        Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    measuring.store(true, Ordering::Relaxed);
    let (started, cpu0) = (Instant::now(), resources::cpu_seconds());
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = resources::cpu_seconds() - cpu0;
    measuring.store(false, Ordering::Relaxed);
    let calls = ok.load(Ordering::Relaxed);
    let errors = failed.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    client.shutdown().await;
    Ok(Measured {
        requests: calls,
        calls,
        errors,
        seconds,
        cpu_seconds,
        mean_latency_ms: f64::NAN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_chain_is_four_calls_an_iteration_or_three_without_verification() {
        let mut a = ServeBenchArgs {
            clients: 1,
            latency_ms: 1,
            duration: 1,
            n: 2,
            m: 2,
            iterations: 3,
            no_write: true,
        };
        assert_eq!(stages(&a), 12);
        a.m = 0;
        assert_eq!(stages(&a), 9);
    }
}
