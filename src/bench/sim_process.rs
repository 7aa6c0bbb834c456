//! A simulator started as a separate `tmas sim-server` process, so benchmarks measure the
//! orchestrator's own CPU and memory without the simulator's.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running simulator child; killed when dropped.
pub struct SimProcess {
    child: Child,
    /// e.g. `http://127.0.0.1:41234/v1`.
    pub base_url: String,
    /// e.g. `http://127.0.0.1:41234`.
    pub root_url: String,
}

impl SimProcess {
    /// Starts `tmas sim-server --port 0 ARGS…` from this same executable and waits for its
    /// `tmas-sim listening on URL` line.
    pub async fn spawn(extra_args: &[String]) -> anyhow::Result<Self> {
        Self::spawn_on(0, extra_args).await
    }

    /// [`Self::spawn`] on a given port (0 = any free one): a restarted simulator comes
    /// back where its clients expect it.
    pub async fn spawn_on(port: u16, extra_args: &[String]) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot locate the tmas executable")?;
        let mut command = Command::new(exe);
        command
            .arg("sim-server")
            .args(["--port", &port.to_string()]);
        // Its log lines would interleave with the benchmark's figures: warnings only,
        // unless `RUST_LOG` asks for more.
        if std::env::var_os("RUST_LOG").is_none() {
            command.args(["--log", "warn"]);
        }
        let mut child = command
            .args(extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start the simulator process")?;
        let stdout = child
            .stdout
            .take()
            .context("simulator stdout not captured")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("simulator did not report its address within 30 s")?
            .context("reading the simulator's first line")?;
        let Some(line) = first else {
            bail!("simulator exited before reporting its address");
        };
        let Some(url) = line.strip_prefix("tmas-sim listening on ") else {
            bail!("unexpected first line from simulator: {line:?}");
        };
        let root_url = url
            .trim()
            .trim_end_matches("/v1")
            .trim_end_matches('/')
            .to_owned();
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            base_url: format!("{root_url}/v1"),
            root_url,
        })
    }

    /// The child's process id (for reading its CPU time from `/proc`), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Fetches the simulator's `/sim/stats` JSON.
    pub async fn stats(&self) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}/sim/stats", self.root_url);
        let resp = reqwest::get(&url)
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET {url}: HTTP {status}");
        }
        resp.json()
            .await
            .with_context(|| format!("GET {url}: body is not JSON"))
    }

    /// Zeroes the simulator's counters (`POST /sim/reset`).
    pub async fn reset(&self) -> anyhow::Result<()> {
        let url = format!("{}/sim/reset", self.root_url);
        let resp = reqwest::Client::new()
            .post(&url)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        if !resp.status().is_success() {
            bail!("POST {url}: HTTP {}", resp.status());
        }
        Ok(())
    }

    /// The port it listens on.
    pub fn port(&self) -> Option<u16> {
        self.root_url.rsplit(':').next()?.parse().ok()
    }

    /// SIGKILL, as a crashing server dies: no graceful close of its connections.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Stops the child.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
