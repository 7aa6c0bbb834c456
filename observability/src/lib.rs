//! `tmas-observability`: everything that lets a user watch a run.
//!
//! - [`logging`]: the process-wide `tracing` subscriber (log lines on stderr plus an empty
//!   OpenTelemetry slot, see `otel_slot`).
//! - [`otlp`]: OTLP span export (gRPC or HTTP/protobuf) configured by the standard
//!   `OTEL_*` variables or the config file's `[observability]` section; flushed on exit;
//!   an unreachable collector is logged once and never stalls a run. Only namespaced
//!   attributes (`tmas.*`, `gen_ai.*`, …) are exported; the plain fields are for log lines.
//! - [`span_ext`]: `traceparent` for outgoing requests, run-time span attributes, the
//!   `--trace-content` switch.
//! - [`prometheus`]: the Prometheus recorder and `/metrics` endpoint.
//! - [`progress`]: progress bars on a terminal, plain status lines otherwise.
//! - [`error_text`]: an error and its causes as one message, without repeated text.
//!
//! Span layout and attribute names are documented in `observability/README.md`.

pub mod error_text;
mod export;
pub mod logging;
mod otel_slot;
pub mod otlp;
pub mod progress;
pub mod prometheus;
pub mod span_ext;

pub use error_text::error_text;
pub use export::ExportStats;
pub use logging::{init_logging, log_filter};
pub use otlp::{ObservabilityConfig, OtlpError, OtlpSettings, Protocol, TracingGuard};
pub use progress::{ProgressDisplay, ProgressMode, ProgressSnapshot};
pub use prometheus::{MetricsError, MetricsServer};
