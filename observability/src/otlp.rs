//! OTLP span export: settings (standard `OTEL_*` variables over the config file), the
//! exporter (gRPC or HTTP/protobuf, batched) and its flush on exit.
//!
//! With no endpoint configured nothing is built: the subscriber's OpenTelemetry slot stays
//! empty and tracing costs what the log filter costs, nothing more.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use serde::{Deserialize, Serialize};

use crate::export::{ExportStats, LogOnce};
pub use crate::otel_slot::OtelLayer;

/// How long the exit flush may take before the run ends without it (an unreachable
/// collector must not hold the process).
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The `[observability]` section of a config file. Every key is optional; the standard
/// `OTEL_*` variables override the OTLP keys, command-line flags override the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservabilityConfig {
    /// OTLP collector, e.g. `http://127.0.0.1:4317` (gRPC) or `http://127.0.0.1:4318`
    /// (HTTP; `/v1/traces` is appended). Unset: no spans are exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// `grpc` or `http/protobuf` (default: `grpc` for port 4317, else `http/protobuf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_protocol: Option<String>,
    /// `service.name` of the exported spans (default `tmas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Serve Prometheus metrics on this address (`--metrics-addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_addr: Option<SocketAddr>,
    /// Put prompt and response text on spans (`--trace-content`).
    #[serde(default)]
    pub trace_content: bool,
}

/// OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    fn parse(text: &str, source: &str) -> Result<Self, OtlpError> {
        match text.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            other => Err(OtlpError::Settings(format!(
                "{source}: protocol `{other}` is not supported (use `grpc` or `http/protobuf`)"
            ))),
        }
    }
}

/// Resolved export settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The URL given to the exporter (for HTTP, including `/v1/traces`).
    pub endpoint: String,
    pub protocol: Protocol,
    pub service_name: String,
    /// Where the endpoint came from (for messages).
    pub source: String,
}

/// Errors configuring or starting the exporter.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("OTLP settings: {0}")]
    Settings(String),
    #[error("OTLP exporter for {endpoint}: {message}")]
    Build { endpoint: String, message: String },
    #[error("OTLP export needs the subscriber from `init_logging`, which is not installed")]
    NoSubscriber,
    #[error("an OTLP exporter is already installed in this process")]
    AlreadyInstalled,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

impl OtlpSettings {
    /// Settings from the environment (`env` looks a variable up) over `config`;
    /// `Ok(None)` when no endpoint is configured or `OTEL_SDK_DISABLED=true` /
    /// `OTEL_TRACES_EXPORTER=none`.
    pub fn resolve(
        config: &ObservabilityConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, OtlpError> {
        let var = |name: &str| non_empty(env(name));
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        // (url, source, used verbatim)
        let endpoint = if let Some(url) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            (url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".to_owned(), true)
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            (url, "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), false)
        } else if let Some(url) = non_empty(config.otlp_endpoint.clone()) {
            (url, "observability.otlp_endpoint".to_owned(), false)
        } else {
            return Ok(None);
        };
        let (url, source, verbatim) = endpoint;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(OtlpError::Settings(format!(
                "{source}: `{url}` is not an http:// or https:// URL"
            )));
        }
        let protocol = if let Some(p) = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Protocol::parse(&p, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?
        } else if let Some(p) = var("OTEL_EXPORTER_OTLP_PROTOCOL") {
            Protocol::parse(&p, "OTEL_EXPORTER_OTLP_PROTOCOL")?
        } else if let Some(p) = non_empty(config.otlp_protocol.clone()) {
            Protocol::parse(&p, "observability.otlp_protocol")?
        } else if port_of(&url) == Some(4317) {
            Protocol::Grpc
        } else {
            Protocol::HttpProtobuf
        };
        let endpoint = match protocol {
            Protocol::HttpProtobuf if !verbatim => {
                format!("{}/v1/traces", url.trim_end_matches('/'))
            }
            _ => url,
        };
        let service_name = var("OTEL_SERVICE_NAME")
            .or_else(|| non_empty(config.service_name.clone()))
            .unwrap_or_else(|| "tmas".to_owned());
        Ok(Some(OtlpSettings {
            endpoint,
            protocol,
            service_name,
            source,
        }))
    }
}

/// The port of an `http(s)://host:port/...` URL, if written.
fn port_of(url: &str) -> Option<u16> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// Keeps the exporter alive; [`TracingGuard::shutdown`] flushes it.
pub struct TracingGuard {
    provider: SdkTracerProvider,
    pub settings: OtlpSettings,
    pub stats: Arc<ExportStats>,
}

/// Builds the exporter and starts exporting every span opened from now on. Must run on a
/// Tokio runtime (the gRPC transport lives there); call once per process.
pub fn install(settings: &OtlpSettings) -> Result<TracingGuard, OtlpError> {
    let slot = crate::logging::slot().ok_or(OtlpError::NoSubscriber)?;
    if slot.is_active() {
        return Err(OtlpError::AlreadyInstalled);
    }
    let (layer, guard) = build(settings)?;
    if !slot.fill(layer) {
        return Err(OtlpError::AlreadyInstalled);
    }
    tracing::info!(endpoint = %settings.endpoint, protocol = ?settings.protocol,
        service = %settings.service_name, "exporting spans over OTLP");
    Ok(guard)
}

/// The OpenTelemetry layer of an exporter for `settings` and the guard that flushes it,
/// for a subscriber of the caller's own ([`install`] puts it into the process-wide one).
/// Must run on a Tokio runtime.
pub fn build(settings: &OtlpSettings) -> Result<(OtelLayer, TracingGuard), OtlpError> {
    let build_error = |e: &dyn std::fmt::Display| OtlpError::Build {
        endpoint: settings.endpoint.clone(),
        message: e.to_string(),
    };
    let exporter = match settings.protocol {
        Protocol::Grpc => SpanExporter::builder()
            .with_tonic()
            .with_endpoint(settings.endpoint.clone())
            .build(),
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_endpoint(settings.endpoint.clone())
            .build(),
    }
    .map_err(|e| build_error(&e))?;
    let stats = Arc::new(ExportStats::default());
    let exporter = LogOnce::new(exporter, settings.endpoint.clone(), stats.clone());
    // An 800-call run opens thousands of spans a second: a larger queue than the SDK's
    // 2,048 unless the user set OTEL_BSP_* themselves.
    let mut batch = BatchConfigBuilder::default();
    if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
        batch = batch.with_max_queue_size(65_536);
    }
    if std::env::var_os("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").is_none() {
        batch = batch.with_max_export_batch_size(2_048);
    }
    if std::env::var_os("OTEL_BSP_SCHEDULE_DELAY").is_none() {
        batch = batch.with_scheduled_delay(Duration::from_secs(2));
    }
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch.build())
        .build();
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("tmas");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        // `target` (the Rust module) on every span is noise to a collector.
        .with_target(false)
        .with_threads(false)
        .with_tracked_inactivity(false);
    let guard = TracingGuard {
        provider,
        settings: settings.clone(),
        stats,
    };
    Ok((layer, guard))
}

impl TracingGuard {
    /// Exports every finished span now (bounded by [`FLUSH_TIMEOUT`]); spans keep being
    /// exported afterwards.
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        bounded("flush", move || provider.force_flush()).await;
    }

    /// Flushes and stops the exporter (bounded by [`FLUSH_TIMEOUT`]). Spans ended later
    /// are dropped.
    pub async fn shutdown(self) {
        let provider = self.provider;
        bounded("shutdown", move || provider.shutdown()).await;
    }
}

/// Runs a blocking SDK call on its own thread and waits at most [`FLUSH_TIMEOUT`]. A plain
/// thread, not `spawn_blocking`: a call stuck on a dead collector must not hold up the
/// runtime's shutdown.
async fn bounded<F>(what: &'static str, f: F)
where
    F: FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("otlp-{what}"))
        .spawn(move || {
            let _ = tx.send(f());
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the OTLP {what} thread; spans may be lost");
        return;
    }
    match tokio::time::timeout(FLUSH_TIMEOUT, rx).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::debug!(error = %e, "OTLP {what} reported an error"),
        Ok(Err(_)) => tracing::debug!("OTLP {what} thread ended without an answer"),
        Err(_) => tracing::warn!(
            "OTLP {what} did not finish within {FLUSH_TIMEOUT:?}; unexported spans are dropped"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(
        config: &ObservabilityConfig,
        vars: &[(&str, &str)],
    ) -> Result<Option<OtlpSettings>, OtlpError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OtlpSettings::resolve(config, &|k| map.get(k).cloned())
    }

    #[test]
    fn nothing_configured_means_no_exporter() {
        assert_eq!(resolve(&ObservabilityConfig::default(), &[]).unwrap(), None);
        let cfg = ObservabilityConfig {
            otlp_endpoint: Some("http://127.0.0.1:4317".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve(&cfg, &[("OTEL_SDK_DISABLED", "true")]).unwrap(),
            None
        );
        assert_eq!(
            resolve(&cfg, &[("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
    }

    #[test]
    fn the_environment_overrides_the_config_file() {
        let cfg = ObservabilityConfig {
            otlp_endpoint: Some("http://127.0.0.1:4317".into()),
            service_name: Some("from-file".into()),
            ..Default::default()
        };
        let s = resolve(&cfg, &[]).unwrap().unwrap();
        assert_eq!(s.protocol, Protocol::Grpc, "port 4317 means gRPC");
        assert_eq!(s.endpoint, "http://127.0.0.1:4317");
        assert_eq!(s.service_name, "from-file");
        let s = resolve(
            &cfg,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_SERVICE_NAME", "svc"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.service_name, "svc");
        assert_eq!(s.source, "OTEL_EXPORTER_OTLP_ENDPOINT");
    }

    #[test]
    fn a_traces_endpoint_is_used_verbatim() {
        let s = resolve(
            &ObservabilityConfig::default(),
            &[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:9999/custom",
            )],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:9999/custom");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
    }

    #[test]
    fn bad_settings_name_their_source() {
        let err = resolve(
            &ObservabilityConfig::default(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && err.contains("http/json"),
            "{err}"
        );
        let cfg = ObservabilityConfig {
            otlp_endpoint: Some("127.0.0.1:4317".into()),
            ..Default::default()
        };
        let err = resolve(&cfg, &[]).unwrap_err().to_string();
        assert!(err.contains("observability.otlp_endpoint"), "{err}");
    }

    #[test]
    fn port_of_reads_the_authority() {
        assert_eq!(port_of("http://h:4317"), Some(4317));
        assert_eq!(port_of("http://h:4318/v1/traces"), Some(4318));
        assert_eq!(port_of("http://h/x"), None);
    }
}
