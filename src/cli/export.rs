//! `tmas export DIR --format jsonl|csv [--out FILE]`: a run's store as JSONL (one line per
//! problem) or its per-iteration Pass@1 table as CSV. Reads only; works on a run that is
//! still going or was interrupted.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::engine::run_dir::write_atomic;
use crate::store::export::{write_csv, write_jsonl};
use crate::store::{DB_FILE, StoreReader};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per problem: question, reference, per-iteration candidates with
    /// scores, summaries and judge verdicts, final banks.
    Jsonl,
    /// The per-iteration Pass@1 table.
    Csv,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory (holding run.sqlite).
    pub dir: PathBuf,
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// Write here (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.dir.join(DB_FILE);
    let (format, out) = (args.format, args.out.clone());
    // SQLite reads block: keep them off the async workers.
    let bytes = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<u8>> {
        let reader = StoreReader::open_read_only(&path)?;
        let mut buf = Vec::new();
        match format {
            Format::Jsonl => write_jsonl(&reader, &mut buf)?,
            Format::Csv => write_csv(&reader, &mut buf)?,
        }
        Ok(buf)
    })
    .await
    .context("export task failed")??;
    match out {
        Some(file) => write_atomic(&file, &bytes)?,
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .context("writing to standard output")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
