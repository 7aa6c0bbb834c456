//! Command-line entry: one module per subcommand.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::text::name_first;

pub(crate) mod bench_cmd;
pub(crate) mod config_cmd;
#[cfg(test)]
mod doc_table;
pub(crate) mod exit;
pub(crate) mod experiment;
pub(crate) mod export;
pub(crate) mod judge;
pub(crate) mod merge;
pub(crate) mod report;
pub(crate) mod rl_data;
pub(crate) mod rl_rollouts;
pub(crate) mod rl_score;
pub(crate) mod rl_serve;
pub(crate) mod run;
pub(crate) mod select_hard;
pub(crate) mod serve;
pub(crate) mod sim_server;
pub(crate) mod view;
pub(crate) mod vocabulary;
/// Runs TMAS and related test-time-compute methods against OpenAI-compatible endpoints.
#[derive(Debug, Parser)]
#[command(name = "tmas", version, about)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax). Default: `RUST_LOG`, else `info`; `warn`
    /// under `--quiet` and for benchmarks, whose output is their figures.
    #[arg(long, global = true)]
    pub log: Option<String>,
    /// Worker threads of the async runtime (default: `TOKIO_WORKER_THREADS`, else one
    /// per core).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an evaluation (TMAS over a dataset) and print Pass@1 per iteration.
    Run(run::Args),
    /// Run a grid of variants (methods, ablations, sweeps) as one job and compare them
    /// (`tmas experiment report DIR` rewrites the comparison).
    Experiment(experiment::Args),
    /// Print a finished run's Pass@1 table and write its chart (PNG and SVG).
    Report(report::Args),
    /// Browse runs, experiments and their problems, candidates, banks and calls in a
    /// browser (read-only, loopback by default, live while a run goes on).
    View(view::Args),
    /// Export a run's store: JSONL (one line per problem) or the Pass@1 table as CSV.
    Export(export::Args),
    /// Join the shard runs of one run (`tmas run --shard I/N`) into one run directory.
    Merge(merge::Args),
    /// Check answers against references (rule verdict, reason, normalized forms; --pairs
    /// scores a labelled file; --llm also asks the judge role).
    Judge(judge::Args),
    /// Select a hard subset: k samples per problem, keep those with fewer than c correct,
    /// draw n (seeded); writes JSONL with the counts.
    SelectHard(select_hard::Args),
    /// Serve the simulated OpenAI-compatible endpoint.
    SimServer(sim_server::Args),
    /// Serve TMAS and the baselines as an OpenAI-compatible model (POST
    /// /v1/chat/completions, model `METHOD/MODEL`).
    Serve(serve::Args),
    /// Build Hybrid-RL training data for verl (parquet) from stored runs.
    RlData(rl_data::Args),
    /// Sample a rollout batch for RL instances of stored runs from the solution role.
    RlRollouts(rl_rollouts::Args),
    /// Score a batch of RL rollouts with the Hybrid-RL rewards (rewards and advantages).
    RlScore(rl_score::Args),
    /// Serve rollout scoring over HTTP for a training loop (POST /score).
    RlServe(rl_serve::Args),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Inspect configuration files.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
}

/// Parses arguments, sets up logging and a runtime, and runs the subcommand.
pub fn main() -> ExitCode {
    crate::resources::small_pages_only();
    let cli = parse();
    // `--quiet`: warnings and errors only, unless a filter is given explicitly.
    let quiet = match &cli.command {
        Command::Run(args) => args.quiet,
        Command::Experiment(args) => args.quiet,
        Command::SelectHard(args) => args.quiet,
        _ => false,
    };
    let filter = cli.log.as_deref().or(quiet.then_some("warn"));
    // Benchmarks print warnings and their figures, not the INFO lines of the runs they
    // drive; their spans stay at the usual level so they measure what a run does.
    let bench_quiet = matches!(&cli.command, Command::Bench(_)) && cli.log.is_none();
    let console = tmas_observability::init_logging_with(filter, bench_quiet);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(n) = cli.worker_threads {
        builder.worker_threads(usize::from(n));
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(args, console).await,
            Command::Experiment(args) => experiment::run(args, console).await,
            Command::Report(args) => {
                stop_quietly_on_closed_stdout();
                report::run(args).await
            }
            Command::View(args) => view::run(args).await,
            Command::Export(args) => export::run(args).await,
            Command::Merge(args) => merge::run(args).await,
            Command::Judge(args) => judge::run(args).await,
            Command::SelectHard(args) => select_hard::run(args).await,
            Command::SimServer(args) => sim_server::run(args).await,
            Command::Serve(args) => serve::run(args).await,
            Command::RlData(args) => rl_data::run(args).await,
            Command::RlRollouts(args) => rl_rollouts::run(args).await,
            Command::RlScore(args) => rl_score::run(args).await,
            Command::RlServe(args) => rl_serve::run(args).await,
            Command::Bench(cmd) => bench_cmd::run(cmd).await,
            Command::Config(cmd) => config_cmd::run(cmd).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", tmas_observability::error_text(e.as_ref()));
            ExitCode::from(exit::code_of(&e))
        }
    }
}

/// The command line, old spellings included: each one used is named on stderr with the
/// spelling that replaced it. A usage error exits with [`exit::BAD_INPUT`].
fn parse() -> Cli {
    let os_args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = vocabulary::with_old_spellings(Cli::command()).get_matches_from(&os_args);
    let args: Vec<String> = os_args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let path = vocabulary::command_path(&matches);
    for old in vocabulary::old_spellings_used(&path, &args) {
        eprintln!("{}", vocabulary::note(&old));
    }
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The line above the Pass@1 table of a run with unfinished problems (`None` without):
/// how many, which (the first `at_most`), and what the rows cover instead.
fn partial_line(unfinished: &[String], total: usize, at_most: usize) -> Option<String> {
    if unfinished.is_empty() {
        return None;
    }
    Some(format!(
        "partial: {} of {total} problems unfinished ({}); each row covers only the problems \
         that have its iteration judged (column `problems`): the finished ones, and an \
         unfinished one in the iterations it judged (column `unfinished`)",
        unfinished.len(),
        name_first(unfinished, at_most)
    ))
}

/// For a command that only reads and prints: a reader that stops early (`tmas report DIR |
/// head`) ends the process quietly, as it does any Unix filter, instead of the panic of a
/// `println!` into a closed pipe. Rust ignores SIGPIPE by default; this restores the
/// default action. Only for such commands: one that talks to endpoints or writes a store
/// must not die on a signal, so it keeps the default of getting an error instead.
fn stop_quietly_on_closed_stdout() {
    // SAFETY: setting a signal's disposition to its default is async-signal-safe and
    // touches no Rust state; nothing else in the process handles SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// SIGINT or SIGTERM, for the commands that serve (`serve`, `view`, `rl-serve`): stop
/// accepting, finish the requests being served, exit.
pub(crate) async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
