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
//! - [`wait_lines`]: one line per thing waited for (an endpoint at start-up), in place on
//!   a terminal, at most once a minute otherwise.
//! - [`error_text`]: an error and its causes as one message, without repeated text.
//!
//! Span layout and attribute names are documented in `observability/README.md`.
//!
//! Everything but [`span_ext`] and [`error_text`](mod@error_text) is behind the default
//! feature `exporters`. A library that only puts attributes on its spans (the runtime crate
//! `tmas-actors`) depends on this crate with `default-features = false` and so builds no
//! exporter, HTTP server or progress bar; the application that installs them turns the
//! feature on, and the helpers then see the exporter it installed.

pub mod error_text;
#[cfg(feature = "exporters")]
mod export;
#[cfg(feature = "exporters")]
pub mod logging;
#[cfg(feature = "exporters")]
mod otel_slot;
#[cfg(feature = "exporters")]
pub mod otlp;
#[cfg(feature = "exporters")]
pub mod progress;
#[cfg(feature = "exporters")]
pub mod prometheus;
pub mod span_ext;
#[cfg(feature = "exporters")]
pub mod wait_lines;

pub use error_text::error_text;
#[cfg(feature = "exporters")]
pub use export::ExportStats;
#[cfg(feature = "exporters")]
pub use logging::{init_logging, init_logging_with, log_filter};
#[cfg(feature = "exporters")]
pub use otlp::{ObservabilityConfig, OtlpError, OtlpSettings, Protocol, TracingGuard};
#[cfg(feature = "exporters")]
pub use progress::{Console, ProgressDisplay, ProgressMode, ProgressSnapshot, ProgressSource};
#[cfg(feature = "exporters")]
pub use prometheus::{MetricsError, MetricsServer};
#[cfg(feature = "exporters")]
pub use wait_lines::WaitLines;
