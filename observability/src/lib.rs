//! `tmas-observability`: logging/tracing setup (OTLP export and metrics come later).

use tracing_subscriber::EnvFilter;

/// Installs a `tracing` subscriber writing to stderr. `filter` (or `RUST_LOG`, or `info`)
/// selects what is shown; ractor's per-actor spans are kept at `warn`.
pub fn init_logging(filter: Option<&str>) {
    let filter = filter
        .map(str::to_owned)
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".to_owned());
    let filter = EnvFilter::try_new(format!("{filter},ractor=warn"))
        .unwrap_or_else(|_| EnvFilter::new("info,ractor=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
