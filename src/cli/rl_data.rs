//! `tmas rl-data RUN_DIR… --output FILE.parquet`: Hybrid-RL training instances for verl from
//! stored runs (`crate::rl::data`), written in verl's layout (`crate::rl::verl_table`).
//! Reads the run stores read-only, so a run may still be going.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::rl::data::{self, Mix, PAPER_MIX, SelectionReport};
use crate::rl::runs::run_instances;
use crate::rl::verl_table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run directories (each holding run.sqlite); a teacher model's runs are the paper's
    /// cold-start data.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// The parquet file to write.
    #[arg(long, short = 'o', value_name = "FILE.parquet")]
    pub output: PathBuf,
    /// Standard-correctness instances (`_source = normal`).
    #[arg(long, default_value_t = PAPER_MIX.normal)]
    pub normal: usize,
    /// Experience-utilization instances (`_source = experience`).
    #[arg(long, default_value_t = PAPER_MIX.experience)]
    pub experience: usize,
    /// Novel-strategy instances (`_source = guideline`).
    #[arg(long, default_value_t = PAPER_MIX.guideline)]
    pub guideline: usize,
    /// Seed of the selection (which iteration per question, which questions).
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub selection_seed: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    tokio::task::spawn_blocking(move || build(&args))
        .await
        .context("the rl-data task failed")?
}

fn build(args: &Args) -> anyhow::Result<ExitCode> {
    let mut candidates = Vec::new();
    let mut reports = Vec::new();
    for dir in &args.runs {
        let (instances, report) = run_instances(dir)?;
        candidates.extend(instances);
        reports.push(report);
    }
    for r in &reports {
        println!(
            "{}: status {}, {} problems done{}{}, {} candidate instances",
            r.run,
            r.status,
            r.done,
            if r.not_done > 0 {
                format!(" ({} not done, skipped)", r.not_done)
            } else {
                String::new()
            },
            if r.unreferenced > 0 {
                format!(
                    " ({} without a reference answer, skipped: no ground truth to reward)",
                    r.unreferenced
                )
            } else {
                String::new()
            },
            r.instances
        );
    }
    let mix = Mix {
        normal: args.normal,
        experience: args.experience,
        guideline: args.guideline,
    };
    let (rows, selection) = data::select(candidates, mix, args.selection_seed);
    print_selection(&selection);
    if rows.is_empty() {
        let why = if reports.iter().any(|r| r.unreferenced > 0) {
            "the runs have no finished problem with a reference answer (a `tmas serve` store's \
             requests have none, and a reward needs one)"
        } else {
            "the runs have no finished problem"
        };
        return Err(crate::config::BadInput(format!(
            "no instance to write: {why} (nothing written to {})",
            args.output.display()
        ))
        .into());
    }
    verl_table::write(&args.output, &rows)?;
    println!("wrote {} rows to {}", rows.len(), args.output.display());
    let short = selection.iter().any(|s| s.selected < s.asked);
    if short {
        println!(
            "note: fewer instances than asked for (each question gives at most one per \
             objective); run more questions to reach the mix"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_selection(selection: &[SelectionReport]) {
    println!(
        "{:<12} {:>8} {:>10} {:>9}",
        "_source", "asked", "questions", "selected"
    );
    for s in selection {
        println!(
            "{:<12} {:>8} {:>10} {:>9}",
            s.source.as_str(),
            s.asked,
            s.available,
            s.selected
        );
    }
}
