//! `tmas view [DIR…] [--addr 127.0.0.1:PORT]`: a read-only browser over run directories,
//! experiment directories and folders of them (`crate::view`); `--out DIR` writes one
//! run's pages as a static folder instead of serving them; `--jaeger-url` links trace ids
//! to a Jaeger UI.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::view::{ANALYSES_DELAY_ENV, JaegerUrl, Viewer, is_loopback};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run directories, experiment directories or folders holding them (default: the
    /// current directory).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    /// The default is reachable from this machine only.
    #[arg(long, default_value = "127.0.0.1:8765")]
    pub addr: SocketAddr,
    /// Write the run's pages as a static folder here (created; it must be new or
    /// empty) instead of serving them: one run directory only.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base URL of a Jaeger UI (like http://localhost:16686): each trace id the pages
    /// show links to its trace there (default: the ids alone).
    #[arg(long, value_name = "URL")]
    pub jaeger_url: Option<JaegerUrl>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    let analyses_delay = analyses_delay()?;
    let viewer = Viewer::open(&dirs, args.jaeger_url.clone(), analyses_delay)?;
    if let Some(out) = args.out {
        let written = tokio::task::block_in_place(|| viewer.export(&out))?;
        println!(
            "wrote {} to {} (open {})",
            crate::text::count(written.pages as u64, "page"),
            out.display(),
            out.join("index.html").display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let reach = if is_loopback(&local) {
        "loopback only: reachable from this machine alone"
    } else {
        "NOT loopback: anyone who reaches this address can read these runs"
    };
    println!(
        "tmas view: http://{local}/ ({reach}; {}, read-only; Ctrl-C stops)",
        crate::text::count(viewer.runs() as u64, "run")
    );
    // A test or script reads the address from the first line as soon as it is there.
    let _ = std::io::stdout().flush();
    viewer.serve(listener, super::shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// The test knob [`ANALYSES_DELAY_ENV`], said on stderr when it is set.
fn analyses_delay() -> anyhow::Result<Option<std::time::Duration>> {
    let Some(text) = std::env::var_os(ANALYSES_DELAY_ENV) else {
        return Ok(None);
    };
    let ms = delay_ms(&text.to_string_lossy())?;
    eprintln!(
        "tmas view: every computation of the analyses waits {ms} ms first \
         ({ANALYSES_DELAY_ENV}, a knob for tests)"
    );
    Ok(Some(std::time::Duration::from_millis(ms)))
}

/// [`ANALYSES_DELAY_ENV`]'s value as milliseconds, or an error naming the variable.
fn delay_ms(text: &str) -> Result<u64, crate::config::BadInput> {
    text.trim().parse().map_err(|_| {
        crate::config::BadInput(format!(
            "environment {ANALYSES_DELAY_ENV} = `{text}`: not a whole number of milliseconds"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_analyses_delay_is_whole_milliseconds_or_an_error_naming_the_variable() {
        assert_eq!(delay_ms(" 8000 ").unwrap(), 8000);
        let e = delay_ms("8s").unwrap_err().to_string();
        assert!(e.contains(ANALYSES_DELAY_ENV) && e.contains("`8s`"), "{e}");
    }
}
