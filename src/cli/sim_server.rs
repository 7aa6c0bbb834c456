//! `tmas sim-server`: serves the simulated OpenAI-compatible endpoint on 127.0.0.1.
//!
//! Prints exactly one first line on stdout, `tmas-sim listening on http://127.0.0.1:PORT`,
//! so a parent process can read the port, then serves until SIGINT or SIGTERM. Knobs come
//! from defaults, then `--options FILE` (a TOML `SimOptions`), then the flags below.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::sim::{LatencyModel, ReasoningField, SimOptions, SimServer, load_answers};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port on 127.0.0.1 (0 = any free port; the chosen one is printed).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// TOML file holding simulator options (same keys as a config's `[simulator]` table).
    #[arg(long, value_name = "FILE")]
    pub options: Option<PathBuf>,
    /// JSONL dataset giving reference answers (`problem_id`, `answer`).
    #[arg(long, value_name = "FILE.jsonl")]
    pub dataset: Option<PathBuf>,
    /// Seed of every draw of the simulator.
    #[arg(long, value_name = "SEED")]
    pub sim_seed: Option<u64>,
    /// Base latency: `none`, `fixed:200ms` or `lognormal:200ms:1.0` (median, sigma).
    #[arg(long)]
    pub latency: Option<LatencyModel>,
    /// Extra latency per output token, in microseconds.
    #[arg(long, value_name = "US")]
    pub per_output_token_us: Option<u64>,
    /// Requests served at once (0 = no limit); above it: 429 (or --overload-status).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Requests that wait for a slot above --max-concurrency before the rest are refused
    /// (latency grows by the wait). 0 = refuse at once.
    #[arg(long)]
    pub max_queue: Option<usize>,
    /// Status for requests above the limit: 429 or 503.
    #[arg(long)]
    pub overload_status: Option<u16>,
    /// `Retry-After` seconds on overload.
    #[arg(long)]
    pub retry_after_secs: Option<u64>,
    /// Pad solutions to this many bytes (0 = natural size).
    #[arg(long)]
    pub solution_bytes: Option<usize>,
    /// Pad summaries to this many bytes (0 = natural size).
    #[arg(long)]
    pub summary_bytes: Option<usize>,
    /// Reasoning text per reply, in bytes.
    #[arg(long)]
    pub reasoning_bytes: Option<usize>,
    /// Where reasoning goes.
    #[arg(long, value_enum)]
    pub reasoning_field: Option<ReasoningField>,
    /// Keep the last N requests for `/sim/stats`.
    #[arg(long)]
    pub record_requests: Option<usize>,
    /// Rate of HTTP 500 replies.
    #[arg(long, value_name = "RATE")]
    pub fault_500: Option<f64>,
    /// Rate of connections closed without a response.
    #[arg(long, value_name = "RATE")]
    pub fault_drop: Option<f64>,
    /// Rate of hung requests (see --hang-secs).
    #[arg(long, value_name = "RATE")]
    pub fault_hang: Option<f64>,
    /// Rate of 200 replies with malformed JSON.
    #[arg(long, value_name = "RATE")]
    pub fault_malformed: Option<f64>,
    /// Rate of replies truncated with `finish_reason = length`.
    #[arg(long, value_name = "RATE")]
    pub fault_truncated: Option<f64>,
    /// Rate of verification replies without a boxed score.
    #[arg(long, value_name = "RATE")]
    pub fault_unparseable_score: Option<f64>,
    /// Rate of generations cut off mid-way (stream: no `finish_reason`, then `[DONE]`;
    /// non-stream: the connection closes mid-body).
    #[arg(long, value_name = "RATE")]
    pub fault_interrupted: Option<f64>,
    /// End every running stream at its next chunk when another chat request arrives
    /// (`[DONE]` without a `finish_reason`), as llama.cpp's server does by default.
    #[arg(long)]
    pub fault_interrupt_on_arrival: bool,
    /// Mixed into the fault draws (0 = none): simulators, or incarnations of one, with
    /// different salts inject different faults for the same call.
    #[arg(long)]
    pub fault_salt: Option<u64>,
    /// How long a hang lasts, in seconds.
    #[arg(long)]
    pub hang_secs: Option<f64>,
    /// The first K requests to the model API (`/v1/models`, chat, embeddings; start-up
    /// requests included) answer --fault-first-status: a server still warming up.
    #[arg(long, value_name = "K")]
    pub fault_first_requests: Option<u32>,
    /// Status of those first requests (400..=599; default 500).
    #[arg(long, value_name = "STATUS")]
    pub fault_first_status: Option<u16>,
    /// `Retry-After` seconds sent with them (default: none).
    #[arg(long, value_name = "SECS")]
    pub fault_first_retry_after_secs: Option<u64>,
    /// Chance the verifier scores a wrong answer 1.
    #[arg(long, value_name = "RATE")]
    pub verifier_fp_rate: Option<f64>,
    /// Chance the guideline agent returns a shorter, reworded list.
    #[arg(long, value_name = "RATE")]
    pub guideline_rewrite_rate: Option<f64>,
}

impl Args {
    /// Defaults, then the options file, then the flags.
    pub fn resolve(&self) -> anyhow::Result<SimOptions> {
        let mut o = match &self.options {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read simulator options {}", path.display()))?;
                toml::from_str::<SimOptions>(&text)
                    .with_context(|| format!("simulator options {}", path.display()))?
            }
            None => SimOptions::default(),
        };
        fn set<T: Clone>(dst: &mut T, v: &Option<T>) {
            if let Some(v) = v {
                *dst = v.clone();
            }
        }
        set(&mut o.seed, &self.sim_seed);
        set(&mut o.latency, &self.latency);
        set(&mut o.per_output_token_us, &self.per_output_token_us);
        set(&mut o.max_concurrency, &self.max_concurrency);
        set(&mut o.max_queue, &self.max_queue);
        set(&mut o.overload_status, &self.overload_status);
        set(&mut o.retry_after_secs, &self.retry_after_secs);
        set(&mut o.solution_bytes, &self.solution_bytes);
        set(&mut o.summary_bytes, &self.summary_bytes);
        set(&mut o.reasoning_bytes, &self.reasoning_bytes);
        set(&mut o.reasoning_field, &self.reasoning_field);
        set(&mut o.record_requests, &self.record_requests);
        set(&mut o.faults.error_500, &self.fault_500);
        set(&mut o.faults.drop_connection, &self.fault_drop);
        set(&mut o.faults.hang, &self.fault_hang);
        set(&mut o.faults.malformed_json, &self.fault_malformed);
        set(&mut o.faults.truncated, &self.fault_truncated);
        set(
            &mut o.faults.unparseable_score,
            &self.fault_unparseable_score,
        );
        set(&mut o.faults.interrupted_stream, &self.fault_interrupted);
        if self.fault_interrupt_on_arrival {
            o.faults.interrupt_on_arrival = true;
        }
        set(&mut o.faults.hang_secs, &self.hang_secs);
        set(
            &mut o.faults.first_requests.count,
            &self.fault_first_requests,
        );
        set(
            &mut o.faults.first_requests.status,
            &self.fault_first_status,
        );
        if self.fault_first_retry_after_secs.is_some() {
            o.faults.first_requests.retry_after_secs = self.fault_first_retry_after_secs;
        }
        set(&mut o.fault_salt, &self.fault_salt);
        set(
            &mut o.task.verifier_false_positive_rate,
            &self.verifier_fp_rate,
        );
        set(
            &mut o.task.guideline_rewrite_rate,
            &self.guideline_rewrite_rate,
        );
        o.validate()?;
        Ok(o)
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = args.resolve()?;
    let dataset = args.dataset.as_deref().map(load_answers).transpose()?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let server = SimServer::start(opts, addr, dataset).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "tmas-sim listening on http://{}", server.local_addr())
            .context("writing to stdout")?;
        out.flush().context("flushing stdout")?;
    }
    wait_for_signal().await?;
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot listen for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn flags_override_the_options_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sim.toml");
        std::fs::write(
            &file,
            "seed = 3\nmax_concurrency = 5\n[faults]\nerror_500 = 0.2\n",
        )
        .unwrap();
        let w = Wrap::try_parse_from([
            "x",
            "--options",
            file.to_str().unwrap(),
            "--sim-seed",
            "9",
            "--latency",
            "lognormal:20ms:0.5",
            "--fault-hang",
            "0.1",
            "--reasoning-field",
            "reasoning",
        ])
        .unwrap();
        let o = w.args.resolve().unwrap();
        assert_eq!(
            (o.seed, o.max_concurrency, o.faults.error_500, o.faults.hang),
            (9, 5, 0.2, 0.1)
        );
        assert_eq!(o.reasoning_field, ReasoningField::Reasoning);
        assert!(Wrap::try_parse_from(["x", "--latency", "soon"]).is_err());
        let bad = Wrap::try_parse_from(["x", "--fault-500", "2"]).unwrap();
        assert!(
            bad.args
                .resolve()
                .unwrap_err()
                .to_string()
                .contains("faults.error_500")
        );
        std::fs::write(&file, "sed = 1\n").unwrap();
        let e = Wrap::try_parse_from(["x", "--options", file.to_str().unwrap()])
            .unwrap()
            .args
            .resolve()
            .unwrap_err();
        assert!(format!("{e:#}").contains("sim.toml"), "{e:#}");
    }

    #[test]
    fn first_requests_flags() {
        let w = Wrap::try_parse_from([
            "x",
            "--fault-first-requests",
            "2",
            "--fault-first-status",
            "429",
            "--fault-first-retry-after-secs",
            "1",
        ])
        .unwrap();
        let first = w.args.resolve().unwrap().faults.first_requests;
        assert_eq!(
            (first.count, first.status, first.retry_after_secs),
            (2, 429, Some(1))
        );
        let bad = Wrap::try_parse_from(["x", "--fault-first-status", "302"]).unwrap();
        let e = bad.args.resolve().unwrap_err().to_string();
        assert!(e.contains("faults.first_requests.status"), "{e}");
    }
}
