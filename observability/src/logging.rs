//! The process-wide `tracing` subscriber: log lines on stderr plus the (initially empty)
//! OpenTelemetry slot.
//!
//! Log lines go through [`crate::progress`]'s writer, so while progress bars are drawn a
//! line is printed above them instead of tearing them.

use std::sync::OnceLock;

use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::otel_slot::SlotHandle;
use crate::progress::{Console, StderrWriter};

/// Filled by [`init_logging`]; [`crate::otlp::install`] puts the exporter's layer in it.
static SLOT: OnceLock<SlotHandle> = OnceLock::new();

pub(crate) fn slot() -> Option<&'static SlotHandle> {
    SLOT.get()
}

/// Directives appended to the user's filter unless it names the target itself.
/// ractor opens long-lived INFO spans per actor; the OpenTelemetry SDK reports export
/// failures on every batch (the exporter wrapper logs the first one instead).
const QUIET_TARGETS: [(&str, &str); 2] = [("ractor", "warn"), ("opentelemetry", "off")];

/// The log filter for `filter` (or `RUST_LOG`, or `info`), with [`QUIET_TARGETS`] added.
pub fn log_filter(filter: Option<&str>) -> EnvFilter {
    let base = filter
        .map(str::to_owned)
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".to_owned());
    let mut text = base.clone();
    for (target, level) in QUIET_TARGETS {
        if !base.contains(target) {
            text.push_str(&format!(",{target}={level}"));
        }
    }
    EnvFilter::try_new(&text).unwrap_or_else(|e| {
        eprintln!("warning: log filter `{base}` is invalid ({e}); using `info`");
        EnvFilter::new("info,ractor=warn,opentelemetry=off")
    })
}

/// Installs the global subscriber: formatted log lines on stderr selected by `filter`
/// (or `RUST_LOG`, or `info`), and an empty OpenTelemetry slot that
/// [`crate::otlp::install`] fills. Returns the console its log lines are written through,
/// for the progress display ([`crate::ProgressMode::for_stderr`]). Calling it again (or
/// after another subscriber was installed, as tests do) changes nothing and returns a
/// console no subscriber writes through.
pub fn init_logging(filter: Option<&str>) -> Console {
    init_logging_with(filter, false)
}

/// [`init_logging`], and with `warnings_only` set, only WARN and ERROR lines are printed
/// while spans stay enabled at the filter's level: a benchmark prints its figures, not
/// its runs' INFO lines, yet measures the same per-call span work a `tmas run` does
/// (whether a span exists at all depends on the level the subscriber enables).
pub fn init_logging_with(filter: Option<&str>, warnings_only: bool) -> Console {
    let handle = SlotHandle::default();
    let console = Console::default();
    let printed = tracing_subscriber::filter::filter_fn(move |m| {
        !warnings_only || m.is_span() || *m.level() <= tracing::Level::WARN
    });
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(StderrWriter(console.clone()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(log_filter(filter).and(printed));
    let installed = Registry::default()
        .with(handle.layer().with_filter(handle.filter()))
        .with(fmt)
        .try_init();
    if installed.is_ok() {
        let _ = SLOT.set(handle);
        console
    } else {
        Console::default()
    }
}
