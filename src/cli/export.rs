//! `tmas export DIR --format jsonl|csv [--output FILE] [--partial]`: a run's store as JSONL
//! (one line per problem) or its per-iteration Pass@1 table as CSV. Reads only. A run
//! with unfinished problems (interrupted, or still going) is refused with exit code 2
//! unless `--partial` is given: its table would cover only the finished problems, so the
//! rows then say `partial`. It streams, one problem's record in memory at a time (a long
//! run's records are hundreds of MB); with `--output` the file appears only complete.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::engine::run_dir::write_atomic_with;
use crate::store::export::{unfinished_problems, write_csv, write_jsonl};
use crate::store::{DB_FILE, StoreReader};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per problem: its `results.jsonl` line (question, reference, the
    /// outcome's iterations and candidates, judge verdicts) with status, error and final
    /// banks.
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
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Export a run with unfinished problems (interrupted or still going): their JSONL
    /// rows, and every CSV row, say `partial`.
    #[arg(long)]
    pub partial: bool,
}

/// How many unfinished ids the refusal names.
const NAMED_UNFINISHED: usize = 5;

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.dir.join(DB_FILE);
    let (format, out, partial) = (args.format, args.output.clone(), args.partial);
    let dir = args.dir.clone();
    // SQLite reads block: keep them off the async workers.
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let reader = StoreReader::open_read_only(&path)?;
        let (unfinished, total) = unfinished_problems(&reader)?;
        if !unfinished.is_empty() && !partial {
            let named = crate::text::name_first(&unfinished, NAMED_UNFINISHED);
            return Err(crate::config::BadInput(format!(
                "{}: {} of {total} problems are unfinished ({named}), so the export would \
                 cover only part of the run; finish it with `tmas run --resume {}`, or pass \
                 --partial to export what is there (its rows then say `partial`)",
                dir.display(),
                unfinished.len(),
                dir.display()
            ))
            .into());
        }
        let export = |w: &mut dyn Write| match format {
            Format::Jsonl => write_jsonl(&reader, w, partial),
            Format::Csv => write_csv(&reader, w, partial),
        };
        match out {
            Some(file) => write_atomic_with(&file, export),
            None => {
                let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
                let written = export(&mut stdout).and_then(|()| Ok(stdout.flush()?));
                match written {
                    // The reader stopped early (`tmas export DIR | head`): what it read is
                    // what it asked for, as with any Unix filter, so no error.
                    Err(e) if is_broken_pipe(&e) => Ok(()),
                    other => other.context("exporting to standard output"),
                }
            }
        }
    })
    .await
    .context("export task failed")??;
    Ok(ExitCode::SUCCESS)
}

/// True when `err` comes from writing to a pipe whose reader has gone.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    let broken = Some(std::io::ErrorKind::BrokenPipe);
    err.chain().any(|cause| {
        // serde_json wraps the writer's error in its own (and its `source` skips it).
        cause.downcast_ref::<std::io::Error>().map(|io| io.kind()) == broken
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|json| json.io_error_kind())
                == broken
    })
}
