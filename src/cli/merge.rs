//! `tmas merge SHARD_DIR… --out DIR [--partial]`: the shard runs of one run joined into
//! one run directory (`crate::engine::merge` says what is checked). Prints the merged
//! run's Pass@1 table and accounting as `tmas run` does; exit code 0 for a complete clean
//! run, 3 for a degraded or partial one (lost calls, missing shards or unfinished
//! problems), 2 when the shards are refused (nothing is written then).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::engine::merge::{MergeRequest, merge};

/// Exit code of shards that are not one complete run (nothing written).
const EXIT_REFUSED: u8 = 2;
/// Exit code of a merged run that is degraded or partial.
const EXIT_INCOMPLETE: u8 = 3;
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
    let request = MergeRequest {
        shards: args.shards,
        out: args.out,
        partial: args.partial,
    };
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
