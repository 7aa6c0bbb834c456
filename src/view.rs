//! `tmas view`: a read-only browser over run and experiment directories, served by axum
//! as server-rendered HTML (askama templates in `view/templates/`, embedded in the
//! binary), or written as a static folder of one run's pages.
//!
//! - [`catalog`]: which runs the given directories hold, and their link-safe names;
//! - `run`: one run's read-only store, its cached run-wide figures, its live progress;
//!   `tally`: the call figures, summed from the calls stored since the last look;
//!   `analyses`: the paper's analyses, computed behind the pages and kept until the
//!   judged records change;
//! - `paths`: a run's page names; `pages`: each page from the store (the runs list and a
//!   run's overview, the problems grid, a problem with its candidates and banks, the
//!   calls, two runs compared); `reply`: a reply's think block and a prompt's sections;
//! - `server`: the routes; `export`: the static folder.
//!
//! It never writes a store and never sends a model call: every read is a short
//! read-only transaction on a connection of its own, beside the run's writer (WAL).

mod analyses;
pub mod catalog;
mod export;
mod pages;
mod paths;
mod reply;
mod run;
mod server;
mod tally;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use export::Written;
pub use run::LiveStatus;

/// A test's knob, never needed in use: milliseconds each computation of the analyses
/// sleeps before it starts, so that a test can see the run page show "computing…" and its
/// script put the analyses in place, on a store small enough to build in a test (a store
/// slow enough to compute would take minutes to write). `tmas view` says on stderr when
/// it is set.
pub const ANALYSES_DELAY_ENV: &str = "TMAS_VIEW_TEST_ANALYSES_DELAY_MS";

/// The runs in `dirs`, ready to serve or export.
pub struct Viewer {
    catalog: Arc<server::Catalog>,
}

impl Viewer {
    /// `jaeger`: the base URL of a Jaeger UI (`http://host:16686`), to link each trace
    /// id the pages show; without it they show the ids alone.
    ///
    /// `analyses_delay`: how long each computation of a run's analyses sleeps before it
    /// starts, [`ANALYSES_DELAY_ENV`]'s knob for tests (`None` in use).
    pub fn open(
        dirs: &[PathBuf],
        jaeger: Option<JaegerUrl>,
        analyses_delay: Option<std::time::Duration>,
    ) -> anyhow::Result<Self> {
        let entries = catalog::discover(dirs)?;
        Ok(Self {
            catalog: Arc::new(server::Catalog::new(
                entries
                    .into_iter()
                    .map(|e| run::Run::new(e, jaeger.clone(), analyses_delay))
                    .collect(),
            )),
        })
    }

    /// How many runs were found.
    pub fn runs(&self) -> usize {
        self.catalog.runs.len()
    }

    /// Serves the pages on `listener` until `shutdown` completes.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        // Each run's figures are computed before the first visitor asks for them: on a
        // large store the first pass over the calls takes seconds, later ones only read
        // what was stored since.
        let runs = self.catalog.runs.clone();
        tokio::task::spawn_blocking(move || {
            for run in &runs {
                let _ = run.summary();
                let mut seen = None;
                while let Ok(live) = run.live() {
                    if seen == Some(live.calls_stored) {
                        break;
                    }
                    seen = Some(live.calls_stored);
                }
            }
            // Then the analyses, one run at a time: each parses every judged record.
            for run in runs {
                let _ = run.analyses(None);
            }
        });
        axum::serve(listener, server::router(self.catalog.clone()))
            .with_graceful_shutdown(shutdown)
            .await?;
        Ok(())
    }

    /// Writes the only run's pages into `out` (a new or empty directory).
    pub fn export(&self, out: &Path) -> anyhow::Result<Written> {
        match self.catalog.runs.as_slice() {
            [run] => export::write_static(run, out),
            runs => Err(crate::config::BadInput(format!(
                "a static export holds one run, and the directories given hold {} ({}); \
                 give one run directory",
                runs.len(),
                crate::text::name_first(
                    &runs
                        .iter()
                        .map(|r| r.entry.label.clone())
                        .collect::<Vec<_>>(),
                    5
                )
            ))
            .into()),
        }
    }
}

/// The base URL of a Jaeger UI: a trace's page is `BASE/trace/TRACE_ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaegerUrl(String);

impl std::str::FromStr for JaegerUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let base = text.trim().trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
            .ok_or_else(|| format!("`{text}` is not an http:// or https:// URL"))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("`{text}` names no host"));
        }
        if let Some(c) = base.chars().find(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>' | '?' | '#')
        }) {
            return Err(format!(
                "`{text}` holds {c:?}: give the UI's base URL (like http://localhost:16686)"
            ));
        }
        Ok(Self(base.to_string()))
    }
}

impl JaegerUrl {
    /// The UI's page of trace `trace_id`.
    pub fn trace(&self, trace_id: &str) -> String {
        format!("{}/trace/{trace_id}", self.0)
    }
}

/// Whether `addr` is reachable from this machine only.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::JaegerUrl;

    #[test]
    fn a_jaeger_url_is_an_http_base_and_links_a_trace_under_it() {
        let url: JaegerUrl = "http://localhost:16686/".parse().unwrap();
        assert_eq!(
            url.trace("4bf92f3577b34da6a3ce929d0e0e4736"),
            "http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let proxied: JaegerUrl = "https://tools.example/jaeger".parse().unwrap();
        assert_eq!(proxied.trace("ab"), "https://tools.example/jaeger/trace/ab");
        for bad in [
            "localhost:16686",
            "ftp://host",
            "http://",
            "http:///x",
            "http://host/a b",
            "http://host/\"x",
            "http://host/?q=1",
        ] {
            assert!(bad.parse::<JaegerUrl>().is_err(), "{bad}");
        }
    }
}
