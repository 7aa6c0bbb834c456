//! `tmas bench client`: how close the model client gets to the throughput an
//! endpoint allows.
//!
//! A simulator runs as a separate process with a fixed latency and no concurrency limit of
//! its own. This process keeps exactly `in_flight` calls outstanding through the model
//! client for `duration`. The ideal is `in_flight ÷ latency` calls per second; the ratio of
//! the achieved rate to it shows what the client costs. The simulator reports the peak
//! number of requests it saw at once, which must never exceed the cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};
use tmas_client::{ClientConfig, ModelClient};

use super::sim_process::SimProcess;
use crate::resources;
use crate::role::Role;

/// Knobs of the client benchmark.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientBenchArgs {
    /// Calls kept in flight (also the client's global and per-endpoint cap).
    #[arg(long = "max-in-flight", value_name = "N", default_value_t = 800)]
    pub in_flight: usize,
    /// Fixed simulator latency per call, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub latency_ms: u64,
    /// Measurement time in seconds (after a short warm-up).
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
    /// Bytes of prompt text per call.
    #[arg(long, default_value_t = 2000)]
    pub prompt_bytes: usize,
    /// Use streaming (SSE) requests.
    #[arg(long)]
    pub stream: bool,
    /// Do not write the JSON result under `bench-results/`.
    #[arg(long)]
    pub no_write: bool,
    /// Send every call through the run store's executor, recording it in a new store in
    /// DIR (which must not hold one yet): measures the store's cost (docs/benchmarks.md).
    #[arg(long, value_name = "DIR")]
    pub store: Option<std::path::PathBuf>,
    /// With --store: do not wait for each call's commit (see StoreExecutor::with_commit_wait).
    #[arg(long, requires = "store")]
    pub store_no_wait: bool,
}

/// Figures of one client-benchmark run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClientBenchResult {
    pub in_flight: usize,
    pub latency_ms: u64,
    pub duration_s: f64,
    pub calls: u64,
    pub errors: u64,
    pub calls_per_s: f64,
    pub ideal_calls_per_s: f64,
    pub ratio: f64,
    pub cpu_s_per_1k_calls: f64,
    pub peak_rss_mib: f64,
    pub sim_peak_in_flight: u64,
    pub stream: bool,
    /// With `--store`: calls stored (warm-up included) and the database size.
    pub stored_calls: Option<u64>,
    pub store_bytes: Option<u64>,
}

/// Runs the benchmark and prints its figures.
pub async fn run(args: ClientBenchArgs) -> anyhow::Result<ClientBenchResult> {
    anyhow::ensure!(args.in_flight > 0, "--max-in-flight must be at least 1");
    anyhow::ensure!(args.latency_ms > 0, "--latency-ms must be at least 1");
    // With OTEL_EXPORTER_OTLP_ENDPOINT set, every attempt's span is exported, so the
    // benchmark also measures what span export costs.
    if crate::engine::observe::export_from_env()? {
        println!("tracing: spans exported over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)");
    }
    let sim = SimProcess::spawn(&[
        "--latency".into(),
        format!("fixed:{}ms", args.latency_ms),
        "--sim-seed".into(),
        "1".into(),
    ])
    .await?;
    let client = ModelClient::start(client_config(&sim.base_url, args.in_flight))
        .await
        .context("starting the model client")?;
    let request = bench_request(args.prompt_bytes, args.stream);
    let store = match &args.store {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let store = crate::store::RunStore::create(dir)?;
            let inner: Arc<dyn tmas_actors::strategy::CallExecutor> = Arc::new(client.clone());
            let executor = crate::store::executor::StoreExecutor::new(
                inner,
                store.clone(),
                Default::default(),
            )
            .with_commit_wait(!args.store_no_wait);
            Some((store, Arc::new(executor)))
        }
        None => None,
    };

    // One continuous stream of calls: the first seconds open connections and fill the
    // pipeline; only the interval after them is measured, so neither the ramp-up nor the
    // drain at the end counts.
    let measured = drive(
        &client,
        store.as_ref().map(|(_, e)| e.clone()),
        &request,
        args.in_flight,
        Duration::from_secs(2),
        Duration::from_secs(args.duration),
    )
    .await;
    let (calls, errors, elapsed, cpu) = (
        measured.calls,
        measured.errors,
        measured.seconds,
        measured.cpu_seconds,
    );

    let stats = sim.stats().await?;
    let sim_peak = stats
        .get("peak_in_flight")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let (mut stored_calls, mut store_bytes) = (None, None);
    if let Some((store, _)) = store {
        store
            .close()
            .await
            .map_err(|e| anyhow::anyhow!("run store: {e}"))?;
        let path = store.path().to_path_buf();
        stored_calls = Some(store.read_now(|r| r.call_count())?);
        store_bytes = Some(std::fs::metadata(&path).map_or(0, |m| m.len()));
    }
    client.shutdown().await;
    sim.stop().await;

    let calls_per_s = calls as f64 / elapsed;
    let ideal = args.in_flight as f64 / (args.latency_ms as f64 / 1000.0);
    let result = ClientBenchResult {
        in_flight: args.in_flight,
        latency_ms: args.latency_ms,
        duration_s: elapsed,
        calls,
        errors,
        calls_per_s,
        ideal_calls_per_s: ideal,
        ratio: calls_per_s / ideal,
        cpu_s_per_1k_calls: if calls > 0 {
            cpu / calls as f64 * 1000.0
        } else {
            f64::NAN
        },
        peak_rss_mib: resources::peak_rss_bytes()
            .map_or(f64::NAN, |b| b as f64 / (1024.0 * 1024.0)),
        sim_peak_in_flight: sim_peak,
        stream: args.stream,
        stored_calls,
        store_bytes,
    };
    print_result(&result);
    if !args.no_write {
        let path = super::write_result("client", &json!(result))?;
        println!("written to {}", path.display());
    }
    Ok(result)
}

fn print_result(r: &ClientBenchResult) {
    println!(
        "tmas bench client: {} in flight, {} ms latency, {:.1} s, stream={}",
        r.in_flight, r.latency_ms, r.duration_s, r.stream
    );
    println!("  calls            {} ({} errors)", r.calls, r.errors);
    println!("  calls/s          {:.1}", r.calls_per_s);
    println!(
        "  ideal calls/s    {:.1}  (in-flight / latency)",
        r.ideal_calls_per_s
    );
    println!("  ratio            {:.3}  (target >= 0.97)", r.ratio);
    println!(
        "  CPU-s / 1k calls {:.3}  (target <= 0.3)",
        r.cpu_s_per_1k_calls
    );
    println!("  peak RSS         {:.1} MiB", r.peak_rss_mib);
    super::print_sim_peak(r.sim_peak_in_flight, r.in_flight);
    if let (Some(calls), Some(bytes)) = (r.stored_calls, r.store_bytes) {
        let per_1k = if calls > 0 {
            bytes as f64 / calls as f64 * 1000.0 / (1024.0 * 1024.0)
        } else {
            f64::NAN
        };
        println!(
            "  run store        {calls} calls, {:.1} MiB ({per_1k:.2} MiB / 1k calls)",
            bytes as f64 / (1024.0 * 1024.0)
        );
    }
}

pub(crate) fn client_config(base_url: &str, in_flight: usize) -> ClientConfig {
    super::one_endpoint_client(
        "sim",
        base_url,
        "tmas-sim",
        "default",
        in_flight,
        Duration::from_secs(60),
    )
}

fn bench_request(prompt_bytes: usize, stream: bool) -> ChatRequest {
    let prompt: String = "Compute the sum of the first n odd numbers. "
        .chars()
        .cycle()
        .take(prompt_bytes)
        .collect();
    ChatRequest {
        messages: vec![ChatMessage::user(prompt)],
        sampling: Sampling {
            temperature: 1.0,
            top_p: 0.95,
            max_tokens: 1024,
            top_k: None,
        },
        tags: CallTags {
            role: Role::Judge.as_str().into(),
            problem: "bench".into(),
            iteration: 0,
            call: None,
            affinity: None,
        },
        stream,
    }
}

/// What [`drive`] measured after its warm-up.
struct Measured {
    calls: u64,
    errors: u64,
    seconds: f64,
    cpu_seconds: f64,
}

/// Keeps `in_flight` calls outstanding for `warmup + duration` and measures the calls
/// completed, wall time and this process's CPU time during `duration` only.
async fn drive(
    client: &ModelClient,
    store: Option<Arc<crate::store::executor::StoreExecutor>>,
    request: &ChatRequest,
    in_flight: usize,
    warmup: Duration,
    duration: Duration,
) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(in_flight);
    for task in 0..in_flight {
        let (client, request, store) = (client.clone(), request.clone(), store.clone());
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let outcome = match &store {
                    // A distinct call key per call, as in a run.
                    Some(executor) => {
                        use tmas_actors::strategy::CallExecutor;
                        let key = tmas_actors::strategy::CallKey {
                            problem: "bench".into(),
                            iteration: task as u32,
                            role: Role::Judge.as_str().into(),
                            candidate: Some(n),
                            index: None,
                            attempt: 0,
                        };
                        n += 1;
                        executor
                            .execute_call(&key, "default".into(), request.clone())
                            .await
                            .map(|_| ())
                            .map_err(|_| ())
                    }
                    None => client
                        .chat("default", request.clone())
                        .await
                        .map(|_| ())
                        .map_err(|_| ()),
                };
                match outcome {
                    Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(()) => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    let (ok0, failed0) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let (started, cpu0) = (Instant::now(), resources::cpu_seconds());
    tokio::time::sleep(duration).await;
    let measured = Measured {
        calls: ok.load(Ordering::Relaxed) - ok0,
        errors: failed.load(Ordering::Relaxed) - failed0,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: resources::cpu_seconds() - cpu0,
    };
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    measured
}
