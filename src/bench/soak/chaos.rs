//! The fault schedule's process side: simulators that are SIGKILLed and restarted on the
//! same port, and their counters kept across restarts (each is read just before a kill).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::bench::sim_process::SimProcess;
use crate::sim::rng::SimRng;

/// Counters of every incarnation of one or more simulators, added up.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SimTotals {
    pub requests: u64,
    pub busy_seconds: f64,
    /// Highest peak in-flight of any one incarnation.
    pub peak_in_flight: u64,
    /// Most requests waiting in a simulator's queue at once (`--max-queue`).
    pub peak_queued: u64,
    pub faults: BTreeMap<String, u64>,
    /// SIGKILLs delivered.
    pub kills: u64,
    /// Restarts that failed (the endpoint then stayed down).
    pub failed_restarts: u64,
}

impl SimTotals {
    fn add_stats(&mut self, stats: &serde_json::Value) {
        let num = |k: &str| {
            stats
                .get(k)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0)
        };
        self.requests += num("requests_total") as u64;
        self.busy_seconds += num("busy_seconds");
        self.peak_in_flight = self.peak_in_flight.max(num("peak_in_flight") as u64);
        self.peak_queued = self.peak_queued.max(num("peak_queued") as u64);
        if let Some(faults) = stats.get("faults").and_then(|f| f.as_object()) {
            for (kind, n) in faults {
                *self.faults.entry(kind.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
    }

    pub fn merge(&mut self, other: &SimTotals) {
        self.requests += other.requests;
        self.busy_seconds += other.busy_seconds;
        self.peak_in_flight = self.peak_in_flight.max(other.peak_in_flight);
        self.peak_queued = self.peak_queued.max(other.peak_queued);
        for (k, n) in &other.faults {
            *self.faults.entry(k.clone()).or_default() += n;
        }
        self.kills += other.kills;
        self.failed_restarts += other.failed_restarts;
    }
}

/// One endpoint's simulator, restartable. Each incarnation gets its own `--fault-salt`
/// (`salt_base` + incarnation), so a restarted simulator does not replay the faults its
/// predecessor drew for the same calls, and two endpoints do not draw the same ones.
pub struct Restartable {
    args: Vec<String>,
    salt_base: u64,
    incarnation: std::sync::atomic::AtomicU64,
    port: u16,
    current: Mutex<Option<SimProcess>>,
    totals: Mutex<SimTotals>,
}

impl Restartable {
    pub async fn spawn(args: Vec<String>, salt_base: u64) -> anyhow::Result<Arc<Self>> {
        let sim = SimProcess::spawn(&with_salt(&args, salt_base)).await?;
        let port = sim.port().context("simulator address without a port")?;
        Ok(Arc::new(Self {
            args,
            salt_base,
            incarnation: std::sync::atomic::AtomicU64::new(0),
            port,
            current: Mutex::new(Some(sim)),
            totals: Mutex::new(SimTotals::default()),
        }))
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Zeroes the live incarnation's counters (after a warm-up, before the measurement).
    pub async fn reset(&self) -> anyhow::Result<()> {
        match self.current.lock().await.as_ref() {
            Some(sim) => sim.reset().await,
            None => Ok(()),
        }
    }

    /// Reads the counters, then SIGKILLs the process.
    async fn kill(&self) {
        let Some(sim) = self.current.lock().await.take() else {
            return;
        };
        let stats = sim.stats().await;
        let mut totals = self.totals.lock().await;
        if let Ok(stats) = stats {
            totals.add_stats(&stats);
        }
        totals.kills += 1;
        drop(totals);
        sim.kill().await;
    }

    /// Starts a new incarnation on the same port (retried: the port may linger briefly).
    async fn restart(&self) {
        let n = self
            .incarnation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let args = with_salt(&self.args, self.salt_base + n);
        for _ in 0..20 {
            match SimProcess::spawn_on(self.port, &args).await {
                Ok(sim) => {
                    *self.current.lock().await = Some(sim);
                    return;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        self.totals.lock().await.failed_restarts += 1;
    }

    /// Stops it for good; its counters of every incarnation.
    pub async fn finish(&self) -> SimTotals {
        if let Some(sim) = self.current.lock().await.take() {
            if let Ok(stats) = sim.stats().await {
                self.totals.lock().await.add_stats(&stats);
            }
            sim.stop().await;
        }
        self.totals.lock().await.clone()
    }
}

fn with_salt(args: &[String], salt: u64) -> Vec<String> {
    let mut out = args.to_vec();
    out.extend(["--fault-salt".to_string(), salt.to_string()]);
    out
}

/// Kill and restart `sim` at intervals drawn uniformly in `every` (seconds), down for
/// `down` each time, until `stop` is cancelled. Deterministic for a seed.
///
/// The first kill comes at a random phase of the cycle ([`first_wait`]), as if the
/// endpoint had been crashing on this schedule all along: endpoints whose first kill came
/// a whole interval after the start would all be killed within the same `every` window,
/// and with a narrow window (90..120 s) they would keep going down within seconds of
/// each other for the rest of a 10-minute run, a correlated outage the schedule does not
/// describe.
pub async fn kill_loop(
    sim: Arc<Restartable>,
    every: (f64, f64),
    down: Duration,
    seed: u64,
    stop: CancellationToken,
) {
    let mut rng = SimRng::new(seed);
    let mut wait = first_wait(every, &mut rng);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
        }
        sim.kill().await;
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(down) => {}
        }
        sim.restart().await;
        if stop.is_cancelled() {
            return;
        }
        wait = interval(every, &mut rng);
    }
}

/// One interval between kills: uniform in `every`.
fn interval(every: (f64, f64), rng: &mut SimRng) -> f64 {
    every.0 + (every.1 - every.0) * rng.unit()
}

/// The wait before the first kill of a kill process in steady state: the remaining part
/// of the interval the start falls in. That interval is drawn length-biased (a random
/// moment falls in a long interval more often: density ∝ x on `every`, so
/// x = √(a² + u·(b² − a²))), and the start is uniform within it.
fn first_wait(every: (f64, f64), rng: &mut SimRng) -> f64 {
    let (a, b) = every;
    let x = (a * a + rng.unit() * (b * b - a * a)).sqrt();
    x * rng.unit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_kill_comes_at_a_random_phase_and_later_ones_every_interval() {
        let every = (90.0, 120.0);
        let n = 20_000;
        let (mut sum, mut early) = (0.0, 0);
        for seed in 0..n {
            let mut rng = SimRng::new(seed);
            let w = first_wait(every, &mut rng);
            assert!((0.0..=120.0).contains(&w), "{w}");
            sum += w;
            early += usize::from(w < 90.0);
            let next = interval(every, &mut rng);
            assert!((90.0..=120.0).contains(&next), "{next}");
        }
        // The mean residual life of uniform(90, 120) intervals: E[X²] / (2 E[X]).
        let (a, b): (f64, f64) = every;
        let ex2 = (b.powi(3) - a.powi(3)) / (3.0 * (b - a));
        let expected = ex2 / (a + b);
        let mean = sum / n as f64;
        assert!(
            (mean - expected).abs() < 1.0,
            "mean {mean:.2} against {expected:.2}"
        );
        // Most first kills come before the shortest interval: the endpoints' phases are
        // spread over the cycle rather than all in 90..120 s.
        assert!(early as f64 / n as f64 > 0.8, "{early}");
    }
}
