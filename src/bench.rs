//! Benchmarks (`tmas bench …`): each prints its figures as ratios against the ideal
//! measured in the same run and writes them as JSON under `bench-results/`.

use crate::config::Config;

pub(crate) mod client;
pub(crate) mod dedup;
pub(crate) mod eval;
pub(crate) mod schedule;
pub(crate) mod serve;
pub(crate) mod sim_process;
pub(crate) mod soak;

/// A model client on one endpoint, for the benchmarks that drive a server directly: the
/// endpoint `name` at `base_url` serving `model`, its calls in group `group`, at most
/// `in_flight` at once, each given `timeout`.
fn one_endpoint_client(
    name: &str,
    base_url: &str,
    model: &str,
    group: &str,
    in_flight: usize,
    timeout: std::time::Duration,
) -> tmas_client::ClientConfig {
    let endpoint = tmas_client::EndpointSpec {
        name: name.into(),
        base_url: base_url.to_owned(),
        model: model.into(),
        api_key: None,
        max_in_flight: in_flight,
        requests_per_minute: None,
        tokens_per_minute: None,
        request_timeout: timeout,
        max_connecting: tmas_client::DEFAULT_MAX_CONNECTING,
        stream_idle_timeout: timeout,
        context_window: 131_072,
        token_estimate: tmas_client::TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        },
    };
    tmas_client::ClientConfig {
        endpoints: vec![endpoint],
        groups: vec![(group.into(), vec![name.into()])],
        routing: Vec::new(),
        global_max_in_flight: in_flight,
        global_requests_per_minute: None,
        global_tokens_per_minute: None,
        policy: tmas_client::ResiliencePolicy::default(),
    }
}

/// A benchmark's config built in code, with its derived defaults filled in and every
/// rule `tmas run` applies to a loaded config checked (`label` names it in errors).
fn validated(mut config: Config, label: &str) -> anyhow::Result<Config> {
    config.fill_derived();
    config
        .validate()
        .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    Ok(config)
}

/// The shape of the synthetic TMAS workload, shared by `bench eval` and `bench schedule`.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Problems in the synthetic dataset.
    #[arg(long, default_value_t = 200)]
    pub problems: usize,
    /// N: candidates per iteration.
    #[arg(long = "candidates", value_name = "N", default_value_t = 8)]
    pub n: u32,
    /// M: verifications per candidate.
    #[arg(long = "verifications", value_name = "M", default_value_t = 8)]
    pub m: u32,
    /// T: iterations per problem (5 for a quick run, 20 for the full one).
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
}

impl WorkloadArgs {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.problems > 0, "--problems must be at least 1");
        anyhow::ensure!(self.iterations > 0, "--iterations must be at least 1");
        anyhow::ensure!(self.n > 0, "--candidates must be at least 1");
        Ok(())
    }
}

/// Writes a benchmark result as pretty JSON to `bench-results/NAME-<unix time>.json`.
pub fn write_result(name: &str, value: &serde_json::Value) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let dir = std::path::Path::new("bench-results");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = dir.join(format!("{name}-{secs}.json"));
    write_json(&path, value)?;
    Ok(path)
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Prints the simulator's peak in-flight against the cap, flagging a violation.
pub fn print_sim_peak(peak: u64, cap: usize) {
    let verdict = if peak as usize <= cap {
        "ok"
    } else {
        "EXCEEDED"
    };
    println!("  sim peak in-flight {peak} (cap {cap}, {verdict})");
}
