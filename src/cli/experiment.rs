//! `tmas experiment FILE.toml`: run a grid of variants as one job, then write the
//! comparison report; `tmas experiment --resume DIR` continues one after a crash;
//! `tmas experiment report DIR` rewrites the report. See `crate::engine::experiment`.
//!
//! Exit codes: docs/cli.md (a variant that could not run exits 1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;
use tmas_observability::Console;

use super::exit::{self, BadInput};
use crate::config::CliOverride;
use crate::config::resolve::process_env;
use crate::engine::experiment::{self, ExperimentDisplay, ExperimentResult, report};
use crate::engine::preflight::StartupError;
use crate::engine::{RunControl, shutdown};

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    override_usage = "tmas experiment [OPTIONS] <FILE.toml>\n       \
                      tmas experiment --resume <DIR> [OPTIONS]\n       \
                      tmas experiment report <DIR>"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<ExperimentCommand>,
    /// The experiment file (variants and sweeps over a base config; see experiments/).
    #[arg(required_unless_present = "resume", value_name = "FILE.toml")]
    pub file: Option<PathBuf>,
    /// The experiment directory to create (default: `run.out_dir/experiment-NAME`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Resume the experiment in DIR (each variant's run resumes from its store).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "out", "shard"])]
    pub resume: Option<PathBuf>,
    /// Override a config key in every variant (`--set run.limit=5`), after the
    /// experiment's own overrides. With --resume: operational settings only.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Seconds between progress lines on stderr when it is not a terminal (0: none; on
    /// a terminal, one bar per variant is drawn instead).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub progress_every: u64,
    /// Errors, warnings and the final report only: no progress display, no
    /// informational log lines (unless `--log` asks for them).
    #[arg(long)]
    pub quiet: bool,
    /// Skip the start-up check of the endpoints (`GET /models` and a one-token chat
    /// completion on each endpoint the variants use).
    #[arg(long)]
    pub no_preflight: bool,
    /// Every variant runs this shard of its problems; `tmas merge` joins the experiment's
    /// shards (docs/cluster.md).
    #[command(flatten)]
    pub shard: crate::config::ShardArgs,
}

#[derive(Debug, Subcommand)]
pub enum ExperimentCommand {
    /// Write the comparison table (Markdown, CSV) and charts (PNG, SVG) of an experiment.
    Report {
        /// An experiment directory.
        dir: PathBuf,
    },
}

pub async fn run(args: Args, console: Console) -> anyhow::Result<ExitCode> {
    if let Some(ExperimentCommand::Report { dir }) = &args.command {
        print_report(dir)?;
        return Ok(ExitCode::SUCCESS);
    }
    let control = RunControl::default();
    let signals = shutdown::install(control.stop.clone()).context("installing signal handlers")?;
    let display = ExperimentDisplay {
        status_every: (args.progress_every > 0).then(|| Duration::from_secs(args.progress_every)),
        quiet: args.quiet,
        console,
    };
    let env = process_env();
    let mut cli: Vec<CliOverride> = args.set.iter().map(CliOverride::set).collect();
    match args.shard.override_with_env(&env) {
        Ok(o) => cli.extend(o),
        Err(errors) => {
            for issue in errors.iter() {
                eprintln!("error: {issue}");
            }
            return Ok(ExitCode::from(exit::BAD_INPUT));
        }
    }
    let started = match (&args.resume, &args.file) {
        (Some(dir), _) => {
            experiment::resume(dir, env, cli, control, display, !args.no_preflight).await
        }
        (None, Some(file)) => {
            let out = match &args.out {
                Some(o) => o.clone(),
                None => default_dir(file, &env, &cli)?,
            };
            let plan = match experiment::plan_new(file, &out, &env, &cli)? {
                Ok(plan) => plan,
                Err(errors) => return Ok(nothing_created(&errors.0)),
            };
            // Every endpoint answers before the directory exists.
            let checked = async {
                match args.no_preflight {
                    true => Ok(()),
                    false => {
                        experiment::check_endpoints(&plan, &env, &control, &display.console).await
                    }
                }
            };
            match checked.await {
                Err(e) => match e.downcast_ref::<StartupError>() {
                    Some(startup) => return Ok(nothing_created(&startup.problems)),
                    None => Err(e),
                },
                Ok(()) => {
                    for v in &plan.variants {
                        let notice = crate::config::Config::from_toml_str(&v.config_toml, &v.name)
                            .ok()
                            .and_then(|c| {
                                if args.quiet {
                                    c.lexical_dedup_notice_quiet()
                                } else {
                                    c.lexical_dedup_notice()
                                }
                            });
                        if let Some(notice) = notice {
                            eprintln!("warning: variant {}: {notice}", v.name);
                        }
                    }
                    if !args.quiet {
                        eprintln!(
                            "tmas experiment {}: {} sharing {} calls in flight → {}",
                            plan.name,
                            crate::text::count_of(plan.variants.len(), "variant"),
                            plan.max_in_flight,
                            out.display()
                        );
                    }
                    experiment::run_new(plan, &out, env, control, display).await
                }
            }
        }
        (None, None) => {
            return Err(BadInput("give an experiment file or --resume DIR".into()).into());
        }
    };
    let result = match started {
        Ok(result) => result,
        Err(e) if experiment::is_stopped_before_start(&e) => {
            match &args.resume {
                Some(dir) => eprintln!(
                    "stopped before the experiment resumed; nothing changed; resume with: tmas \
                     experiment --resume {}",
                    dir.display()
                ),
                None => eprintln!("stopped before the experiment started; nothing was created"),
            }
            return Ok(ExitCode::from(signals.exit_code()));
        }
        Err(e) => match e.downcast_ref::<StartupError>() {
            // A resume's check of the endpoints: the experiment is as it was.
            Some(startup) => {
                for problem in &startup.problems {
                    eprintln!("error: {problem}");
                }
                eprintln!("nothing changed; fix the above and resume again");
                return Ok(ExitCode::from(exit::BAD_INPUT));
            }
            None => return Err(e),
        },
    };
    finish(&result, &signals)
}

/// Prints why a new experiment cannot start; exit code 2.
fn nothing_created(problems: &[String]) -> ExitCode {
    for problem in problems {
        eprintln!("error: {problem}");
    }
    eprintln!("nothing was created; fix the above and run again");
    ExitCode::from(exit::BAD_INPUT)
}

/// `run.out_dir/experiment-NAME` (with `-2`, `-3`, … when taken).
fn default_dir(
    file: &Path,
    env: &[(String, String)],
    cli: &[CliOverride],
) -> anyhow::Result<PathBuf> {
    let spec = experiment::spec::ExperimentSpec::load(file)?;
    let out_dir = match spec.base_config_path(file) {
        Some(p) => crate::config::load_with(&p, env, cli)
            .map(|c| c.run.out_dir)
            .unwrap_or_else(|_| PathBuf::from("runs")),
        None => PathBuf::from("runs"),
    };
    let base = out_dir.join(format!("experiment-{}", spec.name));
    let mut dir = base.clone();
    let mut n = 2;
    while dir.exists() {
        dir = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    Ok(dir)
}

fn print_report(dir: &Path) -> anyhow::Result<()> {
    let written = report::write_report(dir)?;
    println!("{}", written.markdown);
    for f in &written.files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// Prints each variant's end and the report; the exit code says how the job ended.
fn finish(result: &ExperimentResult, signals: &shutdown::Signals) -> anyhow::Result<ExitCode> {
    let mut errors = 0;
    let mut degraded = 0;
    let mut stopped = 0;
    for (name, r) in &result.runs {
        match r {
            Ok(run) => {
                for f in &run.problems_failed {
                    eprintln!(
                        "variant {name}: problem {} failed: {}",
                        f.problem_id, f.error
                    );
                }
                if !run.accounting.is_clean() {
                    degraded += 1;
                    eprintln!(
                        "variant {name}: {} lost, {} failed",
                        crate::text::count(run.accounting.calls_lost, "call"),
                        crate::text::count_of(run.problems_failed.len(), "problem")
                    );
                }
                if let Some(stop) = &run.permanent_stop {
                    stopped += 1;
                    eprintln!(
                        "error: variant {name}: stopped: endpoint `{}` answered {} calls in a row with an error that retrying cannot fix: {}",
                        stop.endpoint, stop.consecutive, stop.error
                    );
                }
            }
            // Stopped before its run started: counted as interrupted below.
            Err(e) if experiment::is_stopped_before_start(e) => {}
            Err(e) => {
                errors += 1;
                eprintln!("error: variant {name}: {e:#}");
            }
        }
    }
    print_report(&result.dir)?;
    if result.interrupted() {
        eprintln!(
            "interrupted; resume with: tmas experiment --resume {}",
            result.dir.display()
        );
        return Ok(ExitCode::from(signals.exit_code()));
    }
    if errors > 0 {
        eprintln!(
            "{errors} variant(s) did not run to the end; fix the cause and resume with: tmas experiment --resume {}",
            result.dir.display()
        );
        return Ok(ExitCode::from(exit::FAILED));
    }
    if stopped > 0 {
        return Ok(ExitCode::from(exit::ENDPOINT_REFUSED));
    }
    Ok(if degraded > 0 {
        eprintln!(
            "once the endpoints are fine, `tmas experiment --resume {}` sends lost calls again",
            result.dir.display()
        );
        ExitCode::from(exit::INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    })
}
