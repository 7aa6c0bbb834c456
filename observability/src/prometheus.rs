//! Prometheus metrics: one recorder per process (the `metrics` crate's macros write to
//! it) and an HTTP endpoint serving its text format on `GET /metrics`.
//!
//! Counters and histograms are recorded where things happen (the model client, the
//! coordinators). Gauges that mirror live state (calls in flight, breaker state, problems
//! done) are set by a `refresh` callback right before each scrape, so they are exact at
//! scrape time and cost nothing in between.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Request-latency buckets (seconds): from a fast simulator call to a long reasoning trace.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0,
];

static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once) and returns its handle.
pub fn recorder() -> Result<PrometheusHandle, MetricsError> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .map_err(|e| e.to_string())?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map_err(|e| format!("another metrics recorder is already installed: {e}"))?;
            Ok(handle)
        })
        .clone()
        .map_err(MetricsError::Recorder)
}

/// Errors starting the metrics endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metrics recorder: {0}")]
    Recorder(String),
    #[error("cannot listen for metrics on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Called before each scrape to set the live gauges.
pub type Refresh = Arc<dyn Fn() + Send + Sync>;

/// A running `/metrics` endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free one) and serves `GET /metrics`.
    pub async fn start(addr: SocketAddr, refresh: Refresh) -> Result<Self, MetricsError> {
        let handle = recorder()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| MetricsError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MetricsError::Bind { addr, source })?;
        let (stop, mut stopped) = watch::channel(false);
        let render = handle.clone();
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let refresh = refresh.clone();
                let handle = render.clone();
                async move {
                    refresh();
                    (
                        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                        handle.render(),
                    )
                        .into_response()
                }
            }),
        );
        let task = tokio::spawn(async move {
            // Histograms need periodic upkeep to age out old samples.
            let upkeep = handle.clone();
            let mut upkeep_stop = stopped.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(5));
                loop {
                    tokio::select! {
                        _ = tick.tick() => upkeep.run_upkeep(),
                        _ = upkeep_stop.changed() => return,
                    }
                }
            });
            let shutdown = async move {
                let _ = stopped.changed().await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!(error = %e, "metrics endpoint stopped");
            }
        });
        tracing::info!(url = %format!("http://{addr}/metrics"), "serving Prometheus metrics");
        Ok(Self {
            addr,
            stop,
            task: Some(task),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving (a scrape in progress finishes).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// One parsed sample of the Prometheus text format: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses Prometheus text (as served here: no escaped quotes or commas inside label
/// values). Comment lines are skipped; a malformed line is an error naming it.
pub fn parse_text(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: cannot parse `{line}`", n + 1);
        let (series, value) = line.rsplit_once(' ').ok_or_else(bad)?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| bad())?,
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), Vec::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').ok_or_else(bad)?;
                let mut labels = Vec::new();
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').ok_or_else(bad)?;
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .ok_or_else(bad)?;
                    labels.push((k.to_owned(), v.to_owned()));
                }
                (name.to_owned(), labels)
            }
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_with_and_without_labels() {
        let text = "# HELP x y\n# TYPE a gauge\na 3\nb{endpoint=\"e1\",kind=\"timeout\"} 2.5\nc_bucket{le=\"+Inf\"} 7\n";
        let s = parse_text(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].name.as_str(), s[0].value), ("a", 3.0));
        assert_eq!(s[1].label("kind"), Some("timeout"));
        assert_eq!(s[1].value, 2.5);
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert!(parse_text("garbage").is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_what_the_macros_recorded_and_what_refresh_sets() {
        let refresh: Refresh = Arc::new(|| metrics::gauge!("test_refreshed").set(42.0));
        let server = MetricsServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), refresh)
            .await
            .unwrap();
        metrics::counter!("test_counter_total", "kind" => "x").increment(3);
        metrics::histogram!("test_latency_seconds").record(0.2);
        let url = format!("http://{}/metrics", server.local_addr());
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        let samples = parse_text(&text).unwrap();
        let find = |name: &str| samples.iter().find(|s| s.name == name).cloned();
        assert_eq!(find("test_refreshed").unwrap().value, 42.0);
        assert_eq!(find("test_counter_total").unwrap().label("kind"), Some("x"));
        assert_eq!(find("test_latency_seconds_count").unwrap().value, 1.0);
        assert!(
            samples
                .iter()
                .any(|s| s.name == "test_latency_seconds_bucket"),
            "histograms are rendered with buckets:\n{text}"
        );
        server.stop().await;
    }
}
