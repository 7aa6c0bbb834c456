//! `tmas serve --config FILE [--addr 127.0.0.1:PORT]`: the methods as an OpenAI-compatible
//! model (`docs/serve.md`).
//!
//! Prints one first line on stdout, `tmas serve listening on http://ADDR`, so a parent
//! process can read the port, then whether it is reachable beyond loopback and the models
//! it serves; serves until SIGINT or SIGTERM, then lets the requests in progress finish.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::CliOverride;
use crate::config::resolve::process_env;
use crate::serve::ServeOptions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Config file (TOML): endpoints, roles, the method defaults and `[serve]`.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Override a config key, e.g. `--set method.n=4` (repeatable; TOML value syntax).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Address to listen on (port 0 picks a free port). Loopback by default; a
    /// non-loopback address (e.g. 0.0.0.0:8080) serves other machines: set
    /// `serve.api_key_envs` then.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Keep every request in a run store in DIR (new or empty): `tmas report`, `view`,
    /// `export` and `rl-data` read it as a run directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = ServeOptions {
        config: args.config,
        overrides: args.set.iter().map(CliOverride::set).collect(),
        addr: args.addr,
        env: process_env(),
        out: args.out,
    };
    let started = crate::serve::start(options, super::shutdown_signal()).await?;
    let addr = started.addr;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "tmas serve listening on http://{addr}");
    if addr.ip().is_loopback() {
        let _ = writeln!(
            out,
            "loopback only: other machines cannot connect (--addr 0.0.0.0:PORT serves them)"
        );
    } else {
        let _ = writeln!(out, "reachable from other machines on {}", addr.ip());
        if started.api_keys == 0 {
            eprintln!(
                "warning: serving beyond loopback with no API key asked for (set serve.api_key_envs)"
            );
        }
    }
    let keys = match started.api_keys {
        0 => "no API key asked for".to_string(),
        n => format!("{n} API key(s) accepted"),
    };
    let _ = writeln!(out, "{keys}; models: {}", started.models.join(", "));
    let _ = out.flush();
    drop(out);
    started.served.await??;
    Ok(ExitCode::SUCCESS)
}
