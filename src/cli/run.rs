//! `tmas run`: run an evaluation and print its per-iteration Pass@1 table.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::config::ConfigArgs;
use crate::config::resolve::process_env;
use crate::engine::{self, RunRequest, run_dir};
use crate::eval::dataset::{DatasetSpec, load_dataset, parse_id_list};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
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
    /// Seconds between status lines on stderr (0: none).
    #[arg(long, default_value_t = 10)]
    pub status_every: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = match args.config.load() {
        Ok(config) => config,
        Err(errors) => {
            for issue in errors.iter() {
                eprintln!("error: {issue}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let dataset_path = config
        .run
        .dataset
        .clone()
        .context("no dataset: set run.dataset in the config or pass --dataset FILE")?;
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
    anyhow::ensure!(
        !dataset.problems.is_empty(),
        "{}: no problems selected",
        spec.path.display()
    );

    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| run_dir::new_run_dir_path(&config.run.out_dir));
    eprintln!(
        "tmas run: {} problems, N={} M={} T={} ε={} → {}",
        dataset.problems.len(),
        config.method.n,
        config.method.m,
        config.method.iterations,
        config.method.epsilon,
        run_dir.display()
    );
    let result = engine::run(RunRequest {
        config,
        config_source: args.config.config.clone(),
        dataset,
        run_dir,
        env: process_env(),
        status_every: (args.status_every > 0).then(|| Duration::from_secs(args.status_every)),
    })
    .await?;

    println!("{}", result.table.render_text());
    println!(
        "{} problems done, {} failed, in {:.1} s; results in {}",
        result.problems_done,
        result.problems_failed.len(),
        result.wall_seconds,
        result.run_dir.display()
    );
    for failed in &result.problems_failed {
        eprintln!("problem {} failed: {}", failed.problem_id, failed.error);
    }
    println!("chart: tmas report {}", result.run_dir.display());
    Ok(if result.problems_failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
