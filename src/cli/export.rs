//! `tmas export DIR --format jsonl|csv|parquet [--output PATH] [--partial]`: a run's store
//! as JSONL (one line per problem), its per-iteration Pass@1 table as CSV, or every table
//! as Parquet files in a folder for notebooks ([`crate::store::parquet`]). Reads only. A run
//! with unfinished problems (interrupted, or still going) is refused with exit code 2
//! unless `--partial` is given: its table would cover only the finished problems, so the
//! rows then say `partial`. It streams, one problem's record in memory at a time (a long
//! run's records are hundreds of MB); with `--output` the file appears only complete.

use std::io::Write;
use std::path::{Path, PathBuf};
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
    /// The run's tables (problems, candidates, verifications, summaries, judge verdicts,
    /// calls without texts, texts, bank versions, metadata) as Parquet files in the folder
    /// given by --output.
    Parquet,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory (holding run.sqlite).
    pub dir: PathBuf,
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// Write here (atomically) instead of standard output; for parquet, the folder to
    /// create (required).
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
    if format == Format::Parquet && out.is_none() {
        return Err(crate::config::BadInput(
            "--format parquet writes a folder of files: name it with --output DIR".into(),
        )
        .into());
    }
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
        let csv = match format {
            Format::Parquet => {
                let folder = out.context("--output is required")?;
                return write_parquet_folder(&reader, &folder);
            }
            Format::Csv => true,
            Format::Jsonl => false,
        };
        let export = |w: &mut dyn Write| {
            if csv {
                write_csv(&reader, w, partial)
            } else {
                write_jsonl(&reader, w, partial)
            }
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

/// Writes the Parquet files into a new folder beside `folder`, then renames it into
/// place: `folder` appears complete or not at all. An existing non-empty `folder` is
/// refused (nothing is overwritten).
fn write_parquet_folder(reader: &StoreReader, folder: &Path) -> anyhow::Result<()> {
    let occupied = std::fs::read_dir(folder)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    if occupied || folder.is_file() {
        return Err(crate::config::BadInput(format!(
            "{}: already exists and is not an empty folder; the Parquet export writes a new \
             folder (choose another --output, or remove it)",
            folder.display()
        ))
        .into());
    }
    let name = folder
        .file_name()
        .with_context(|| format!("{}: not a folder name", folder.display()))?;
    let mut building_name = std::ffi::OsString::from(".");
    building_name.push(name);
    building_name.push(format!(".building-{}", std::process::id()));
    let building = folder.with_file_name(building_name);
    std::fs::create_dir_all(&building)
        .with_context(|| format!("creating {}", building.display()))?;
    let written = match crate::store::parquet::write_all(reader, &building) {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&building);
            return Err(e.into());
        }
    };
    if folder.is_dir() {
        // Empty (checked above): replaced by the finished folder.
        std::fs::remove_dir(folder).with_context(|| format!("replacing {}", folder.display()))?;
    }
    std::fs::rename(&building, folder)
        .with_context(|| format!("moving the export into {}", folder.display()))?;
    for (file, rows) in &written.files {
        println!("{}: {rows} rows", folder.join(file).display());
    }
    Ok(())
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
