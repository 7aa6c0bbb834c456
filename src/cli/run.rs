//! `tmas run`: run an evaluation (or resume one) and print its per-iteration Pass@1 table.
//!
//! Exit codes: docs/cli.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tmas_observability::Console;

use super::exit::{self, BadInput};
use crate::config::loader::load_str;
use crate::config::resolve::process_env;
use crate::config::{ConfigArgs, ShardArgs};
use crate::engine::preflight::StartupError;
use crate::engine::{
    self, RequestedConfig, ResumeRequest, RunControl, RunRequest, RunResult, run_dir, shutdown,
};
use crate::eval::dataset::{DatasetSpec, load_dataset, parse_id_list};

/// Stands for "no --config given" (clap needs a value for the flattened `--config`).
const STORED_CONFIG: &str = "(the stored config)";

#[derive(Debug, clap::Args)]
// `--config` is needed for a new run only: a resume starts from the stored config.
#[command(
    override_usage = "tmas run --config <FILE> [OPTIONS]\n       tmas run --resume <DIR> [OPTIONS]"
)]
#[command(mut_arg("config", |a| a
    .required(false)
    .required_unless_present("resume")
    .default_value(STORED_CONFIG)
    .hide_default_value(true)))]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
    /// Resume the run in DIR: finished calls are replayed from its store, only the rest
    /// is sent. The stored config is used; `--config`/`--set`/flags may change only
    /// operational settings (endpoints, in-flight caps, timeouts) and `--iterations`
    /// (extend to T in total). See docs/run-store.md.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "ids"])]
    pub resume: Option<PathBuf>,
    /// With --resume: accept result-affecting config differences (listed as warnings).
    #[arg(long, requires = "resume")]
    pub force: bool,
    /// With --resume: replay calls stored as failures as failures (by default a resume
    /// sends them again and recomputes what depends on them).
    #[arg(long, requires = "resume")]
    pub keep_failed: bool,
    /// The run directory to create (default: a new `run-YYYYMMDD-HHMMSS` under
    /// `run.out_dir`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only these problem ids (comma-separated).
    #[arg(long, value_name = "ID,ID,…")]
    pub ids: Option<String>,
    /// Log and skip dataset rows that cannot be read instead of stopping.
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Dataset field holding the problem id (default: `problem_id`, or `Problem ID` in CSV).
    #[arg(long, value_name = "NAME")]
    pub id_field: Option<String>,
    /// Dataset field holding the question (default: `question`, or `Problem` in CSV).
    #[arg(long, value_name = "NAME")]
    pub question_field: Option<String>,
    /// Dataset field holding the reference answer (default: `answer`, or `Short Answer`).
    #[arg(long, value_name = "NAME")]
    pub answer_field: Option<String>,
    /// Seconds between progress lines on stderr when it is not a terminal (0: none; on
    /// a terminal, progress bars are drawn instead).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub progress_every: u64,
    // Observability: metrics endpoint, span content, progress output.
    /// Serve Prometheus metrics on ADDR (e.g. 127.0.0.1:9464) at `/metrics`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Put prompt and response text on exported spans (off by default: size and privacy).
    #[arg(long)]
    pub trace_content: bool,
    /// Warnings, errors and the final table only: no progress bars or status lines, no
    /// informational log lines (unless `--log` asks for them).
    #[arg(long)]
    pub quiet: bool,
    /// Skip the start-up check of the endpoints (`GET /models` and a one-token chat
    /// completion on each endpoint the run uses).
    #[arg(long)]
    pub no_preflight: bool,
}

pub async fn run(args: Args, console: Console) -> anyhow::Result<ExitCode> {
    let control = RunControl::default();
    // Installed before anything is started, so even a slow start can be interrupted.
    let signals = shutdown::install(control.stop.clone()).context("installing signal handlers")?;
    let status_every = (args.progress_every > 0).then(|| Duration::from_secs(args.progress_every));
    let observe = engine::observe::ObserveOptions {
        metrics_addr: args.metrics_addr,
        trace_content: args.trace_content,
        quiet: args.quiet,
        progress_every: None,
        console,
    };
    let result = match &args.resume {
        Some(dir) => {
            let request = ResumeRequest {
                run_dir: dir.clone(),
                config: requested_config(&args.config, &args.shard),
                force: args.force,
                keep_failed: args.keep_failed,
                env: process_env(),
                status_every,
                preflight: !args.no_preflight,
                observe,
            };
            engine::resume(request, control).await
        }
        None => match fresh_request(&args, status_every, observe)? {
            Ok(request) => engine::run_with(request, control).await,
            Err(code) => return Ok(code),
        },
    };
    match result {
        Ok(result) => Ok(report(&result, args.quiet, &signals)),
        Err(e) if e.downcast_ref::<shutdown::StoppedBeforeStart>().is_some() => {
            match &args.resume {
                Some(dir) => eprintln!(
                    "stopped before the run resumed; nothing changed; resume with: tmas run \
                     --resume {}",
                    dir.display()
                ),
                None => eprintln!("stopped before the run started; nothing was created"),
            }
            Ok(ExitCode::from(signals.exit_code()))
        }
        Err(e) => match e.downcast_ref::<StartupError>() {
            Some(startup) => {
                for problem in &startup.problems {
                    eprintln!("error: {problem}");
                }
                eprintln!("nothing was created; fix the above and run again");
                Ok(ExitCode::from(exit::BAD_INPUT))
            }
            None => Err(e),
        },
    }
}

/// The config a resume asks for: the stored one with the environment and command-line
/// overrides on top, or the file given with `--config` (with the same overrides).
fn requested_config(args: &ConfigArgs, shard: &ShardArgs) -> RequestedConfig {
    if args.config.as_os_str() != STORED_CONFIG {
        let (args, shard) = (args.clone(), shard.clone());
        return Box::new(move |_stored| args.load_sharded(&shard).map_err(anyhow::Error::new));
    }
    let mut overrides = args.overrides();
    let shard = shard.clone();
    Box::new(move |stored| {
        let env = process_env();
        overrides.extend(shard.override_with_env(&env)?);
        load_str(stored, "stored config", &env, &overrides).map_err(anyhow::Error::new)
    })
}

/// How many unfinished ids the line above an interrupted run's table names.
const NAMED_UNFINISHED: usize = 10;

/// Prints the outcome; the exit code says how the run ended.
fn report(result: &RunResult, quiet: bool, signals: &shutdown::Signals) -> ExitCode {
    let total = result.table.problems_total.unwrap_or(0);
    if let Some(line) = super::partial_line(&result.unfinished, total, NAMED_UNFINISHED) {
        println!("{line}");
    }
    println!("{}", result.table.render_text());
    print!("{}", result.accounting.render_text());
    println!(
        "done in {:.1} s ({} calls sent, {} replayed from the store); results in {}",
        result.wall_seconds,
        result.calls_sent,
        result.calls_replayed,
        result.run_dir.display()
    );
    for failed in &result.accounting.problems_failed {
        eprintln!("problem {} failed: {}", failed.problem_id, failed.error);
    }
    let resume = format!("tmas run --resume {}", result.run_dir.display());
    if let Some(stop) = &result.permanent_stop {
        eprintln!(
            "error: stopped: endpoint `{}` answered {} calls in a row with an error that \
             retrying cannot fix:\n  {}\nfix the endpoint settings or key, then resume with: \
             {resume} (endpoint settings may change on resume, e.g. --set \
             endpoints.{}.base_url=URL)",
            stop.endpoint, stop.consecutive, stop.error, stop.endpoint
        );
        return ExitCode::from(exit::ENDPOINT_REFUSED);
    }
    if result.interrupted {
        eprintln!("interrupted; resume with: {resume}");
        return ExitCode::from(signals.exit_code());
    }
    if !quiet {
        println!("chart: tmas report {}", result.run_dir.display());
    }
    if result.accounting.is_clean() {
        ExitCode::SUCCESS
    } else {
        if result.accounting.calls_lost > 0 {
            eprintln!(
                "warning: {} calls lost; once the endpoints are fine, `{resume}` sends them \
                 again and recomputes what depends on them",
                result.accounting.calls_lost
            );
        }
        ExitCode::from(exit::INCOMPLETE)
    }
}

/// A new run's request, or the exit code of a config error already printed.
fn fresh_request(
    args: &Args,
    status_every: Option<Duration>,
    observe: engine::observe::ObserveOptions,
) -> anyhow::Result<Result<RunRequest, ExitCode>> {
    let config = match args.config.load_sharded(&args.shard) {
        Ok(config) => config,
        Err(errors) => {
            for issue in errors.iter() {
                eprintln!("error: {issue}");
            }
            return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
        }
    };
    let dataset_path = config.run.dataset.clone().ok_or_else(|| {
        BadInput("no dataset: set run.dataset in the config or pass --dataset FILE".into())
    })?;
    let mut spec = DatasetSpec::new(dataset_path);
    spec.limit = config.run.limit;
    spec.ids = match &args.ids {
        Some(list) => Some(parse_id_list(list)),
        None => config.run.ids.clone(),
    };
    spec.skip_bad_rows = args.skip_bad_rows;
    spec.id_field = args.id_field.clone();
    spec.question_field = args.question_field.clone();
    spec.answer_field = args.answer_field.clone();
    let dataset = load_dataset(&spec)?;
    if dataset.problems.is_empty() {
        let message = format!("{}: no problems selected", spec.path.display());
        return Err(BadInput(message).into());
    }

    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| run_dir::new_run_dir_path(&config.run.out_dir));
    if let Some(problem) = run_dir::not_empty(&run_dir, "run") {
        eprintln!("error: {problem}");
        eprintln!("nothing was created; fix the above and run again");
        return Ok(Err(ExitCode::from(exit::BAD_INPUT)));
    }
    let notice = if args.quiet {
        config.lexical_dedup_notice_quiet()
    } else {
        config.lexical_dedup_notice()
    };
    if let Some(notice) = notice {
        eprintln!("warning: {notice}");
    }
    if !args.quiet {
        eprintln!(
            "tmas run: {}, N={} M={} T={} ε={} → {}",
            crate::text::count_of(dataset.problems.len(), "problem"),
            config.method.n,
            config.method.m,
            config.method.iterations,
            config.method.epsilon,
            run_dir.display()
        );
    }
    Ok(Ok(RunRequest {
        config,
        config_source: args.config.config.clone(),
        dataset,
        run_dir,
        env: process_env(),
        status_every,
        preflight: !args.no_preflight,
        observe,
    }))
}
