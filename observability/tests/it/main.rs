//! Integration tests of `tmas-observability`: one test binary whose modules are the
//! former test files (each file in `tests/` would be linked on its own).
//!
//! The modules run as threads of one process, and the process-wide exporter can be
//! installed once: only `otlp_export` installs it; other tests give the exporter's layer
//! a subscriber of their own (`otlp::build` and `tracing::subscriber::with_default`).

mod otlp_export;
mod otlp_unreachable;
