//! `tmas merge SHARD_DIR… --out DIR [--partial]`: the shard runs of one run joined into
//! one run directory, or the shards of one experiment into one experiment (each variant
//! merged, then the comparison); `crate::engine::merge` says what is checked. Prints the merged
//! run's Pass@1 table and accounting as `tmas run` does; exit code 0 for a complete clean
//! run, 3 for a degraded or partial one (lost calls, missing shards or unfinished
//! problems), 2 when the shards are refused (nothing is written then); docs/cli.md.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::engine::merge::{MergeRequest, merge, merge_experiment};

use super::exit::{BAD_INPUT as EXIT_REFUSED, INCOMPLETE as EXIT_INCOMPLETE};

/// How many unfinished ids the partial line names.
const NAMED_UNFINISHED: usize = 10;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shard run directories (each made by `tmas run --shard I/N`).
    #[arg(required = true, value_name = "SHARD_DIR")]
    pub shards: Vec<PathBuf>,
    /// The merged run directory: new, empty, or an earlier merge (replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Merge the shards given even if some of N are missing or have unfinished problems;
    /// the merged run says `partial` and its final Pass@1 stays null.
    #[arg(long)]
    pub partial: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let experiments = args
        .shards
        .iter()
        .filter(|d| d.join(crate::engine::experiment::PLAN_FILE).is_file())
        .count();
    let request = MergeRequest {
        shards: args.shards,
        out: args.out,
        partial: args.partial,
    };
    if experiments > 0 {
        if experiments < request.shards.len() {
            eprintln!(
                "error: some of the directories are experiments and some are not; merge the shards of one run or of one experiment"
            );
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
        return experiment(request).await;
    }
    let merged = match merge(request).await {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("error: {}", tmas_observability::error_text(e.as_ref()));
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    let shards: Vec<String> = merged.shards.iter().map(ToString::to_string).collect();
    println!(
        "merged {} ({}) → {}",
        crate::text::count_of(shards.len(), "shard"),
        shards.join(", "),
        merged.run_dir.display()
    );
    if !merged.missing.is_empty() {
        let missing: Vec<String> = merged.missing.iter().map(ToString::to_string).collect();
        println!(
            "partial: shards {} missing; their problems are in no row below",
            missing.join(", ")
        );
    }
    let total = merged.table.problems_total.unwrap_or(0);
    if let Some(line) = super::partial_line(&merged.unfinished, total, NAMED_UNFINISHED) {
        println!("{line}");
    }
    println!("{}", merged.table.render_text());
    print!("{}", merged.accounting.render_text());
    println!("chart: tmas report {}", merged.run_dir.display());
    let complete = merged.missing.is_empty() && merged.unfinished.is_empty();
    Ok(if complete && merged.accounting.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INCOMPLETE)
    })
}

/// Merges the shards of an experiment and prints its comparison.
async fn experiment(request: MergeRequest) -> anyhow::Result<ExitCode> {
    let merged = match merge_experiment(request).await {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("error: {}", tmas_observability::error_text(e.as_ref()));
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    println!(
        "merged {} of the experiment → {}",
        crate::text::count_of(merged.variants.len(), "variant"),
        merged.dir.display()
    );
    println!("{}", merged.report.markdown);
    let mut complete = true;
    for (name, run) in &merged.variants {
        if !run.missing.is_empty() || !run.unfinished.is_empty() || !run.accounting.is_clean() {
            complete = false;
            eprintln!(
                "variant {name}: partial or degraded ({} missing shards, {} unfinished problems, {} calls lost)",
                run.missing.len(),
                run.unfinished.len(),
                run.accounting.calls_lost
            );
        }
    }
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INCOMPLETE)
    })
}
