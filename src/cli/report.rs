//! `tmas report DIR`: print a run's Pass@1 table and draw its chart, then the paper's
//! analyses of the run (`crate::eval::analyses`): each as a text table and a chart, all of
//! them also in `analyses.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::engine::accounting::Accounting;
use crate::engine::run_dir::{ProblemRecord, RunDir, write_atomic};
use crate::eval::chart::{ChartError, Series, write_line_chart, write_pass_at_1_chart};
use crate::eval::pass_at_1::{PassAt1Builder, PassAt1Table};
use crate::store::export::{stored_table, unfinished_problems};
use crate::store::{DB_FILE, StoreReader};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run directory written by `tmas run`.
    pub dir: PathBuf,
    /// Chart title (default: the run directory's name).
    #[arg(long)]
    pub title: Option<String>,
    /// Seed of the verification paradox's permutation test.
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub permutation_seed: u64,
}

/// How many unfinished ids the `partial:` line names.
const NAMED_UNFINISHED: usize = 10;

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = RunDir::open(&args.dir)?;
    let Loaded {
        mut table,
        unfinished,
        unreferenced,
    } = load_table(&dir)?;
    let accounting = load_accounting(&dir, table.rows.len())?;
    if let Some(accounting) = &accounting {
        table.set_calls_lost(&accounting.lost_by_iteration);
    }
    let total = table.problems_total.unwrap_or(0);
    if unreferenced > 0 && total == 0 {
        // A store of requests (`tmas serve --out`): nothing was judged, so there is no
        // Pass@1 to show, not a Pass@1 of 0.
        report_unscored(unreferenced, unfinished.as_deref().unwrap_or_default());
        if let Some(accounting) = &accounting {
            print!("{}", accounting.render_text());
        }
        report_analyses(&dir, &args)?;
        return Ok(ExitCode::SUCCESS);
    }
    if unreferenced > 0 {
        println!(
            "note: {} without a reference answer (requests recorded by `tmas serve`) are not \
             scored and not in the table",
            crate::text::count_of(unreferenced, "problem")
        );
    }
    match &unfinished {
        Some(ids) => {
            if let Some(line) = super::partial_line(ids, total, NAMED_UNFINISHED) {
                println!("{line}");
            }
        }
        // Only the table's own counts (a copy of the outputs without the store).
        None if table.is_partial() => println!(
            "partial: some problems of the {total} are unfinished; each row covers only the \
             problems that have its iteration judged (column `problems`)"
        ),
        None => {}
    }
    println!("{}", table.render_text());
    if let Some(accounting) = &accounting {
        print!("{}", accounting.render_text());
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let name = args
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("Pass@1 by iteration — {name}")
    });
    // A partial table's chart says so, with how many problems its last point covers.
    let title = match table.rows.last() {
        Some(last) if table.is_partial() => format!(
            "{title} (partial: {} of {total} problems finished)",
            last.problems
        ),
        _ => title,
    };
    let series = [Series::of_table(&table, &method_label(&dir))];
    if series[0].points.is_empty() {
        // Nothing to draw yet (a run interrupted before, or still before, its first
        // judged iteration): the table above says so; a chart without a point would be an
        // empty frame.
        println!("chart: none yet: no problem has an iteration judged");
    } else {
        let png = dir.root.join("pass_at_1.png");
        let svg = dir.root.join("pass_at_1.svg");
        write_pass_at_1_chart(&title, &series, &png, &svg)?;
        println!("chart: {} and {}", png.display(), svg.display());
    }
    report_analyses(&dir, &args)?;
    Ok(ExitCode::SUCCESS)
}

/// What `tmas report` says instead of a Pass@1 table when no problem has a reference.
fn report_unscored(problems: usize, unfinished: &[String]) {
    println!(
        "Pass@1: not scored: none of the {} has a reference answer (requests recorded by \
         `tmas serve`); calls, tokens and the banks' analyses below",
        crate::text::count_of(problems, "problem")
    );
    if !unfinished.is_empty() {
        println!(
            "running: {} of {problems} not finished yet ({})",
            unfinished.len(),
            crate::text::name_first(unfinished, NAMED_UNFINISHED)
        );
    }
    println!("chart: none: there is no Pass@1 to draw");
}

/// Lost calls and problem states from the run's store (`None` for a directory without
/// one, e.g. a copy of the outputs only).
fn load_accounting(dir: &RunDir, iterations: usize) -> anyhow::Result<Option<Accounting>> {
    let path = dir.root.join(DB_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let reader = StoreReader::open_read_only(&path)?;
    let mut accounting = Accounting::build(
        &reader.problems()?,
        &reader.lost_calls()?,
        &reader.answered_calls()?,
        iterations,
    );
    let (calls, verdicts) = reader.judge_use()?;
    accounting.judge = crate::engine::accounting::JudgeUse { calls, verdicts };
    Ok(Some(accounting))
}

/// Computes, prints and draws the analyses of the run's finished problems.
fn report_analyses(dir: &RunDir, args: &Args) -> anyhow::Result<()> {
    let records = load_records(dir)?;
    let failed = dir.failed_candidates()?;
    let analyses = ProblemRecord::analyses(&records, failed, args.permutation_seed);
    println!();
    println!("{}", analyses.render_text());
    let json = dir.root.join("analyses.json");
    write_atomic(&json, &serde_json::to_vec_pretty(&analyses)?)?;
    println!("analyses: {}", json.display());
    let name = args
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for chart in analyses.charts(&name) {
        let png = dir.root.join(format!("{}.png", chart.stem));
        let svg = dir.root.join(format!("{}.svg", chart.stem));
        match write_line_chart(&chart.title, &chart.y, &chart.series, &png, &svg) {
            Ok(()) => println!("chart: {} and {}", png.display(), svg.display()),
            // A run without data for one analysis (say, no verifications at all) gets a
            // note instead of a chart, and loses the chart an earlier report drew, which
            // would show data the run no longer has; the table above shows why.
            Err(ChartError::NoData(_)) => {
                for stale in [&png, &svg] {
                    match std::fs::remove_file(stale) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(e).with_context(|| {
                                format!("cannot remove the stale chart {}", stale.display())
                            });
                        }
                    }
                }
                println!(
                    "note: no chart {}: nothing to draw (the table above shows why)",
                    chart.stem
                );
            }
            Err(e) => eprintln!("note: chart {} not drawn: {e}", chart.stem),
        }
    }
    Ok(())
}

/// The judged records of the run's finished problems: from the run store, or from
/// `problems/*.json` when the directory has no store.
fn load_records(dir: &RunDir) -> anyhow::Result<Vec<ProblemRecord>> {
    let db = dir.root.join(DB_FILE);
    if db.is_file() {
        let reader = StoreReader::open_read_only(&db)?;
        return Ok(reader.records()?);
    }
    dir.read_problems()
}

/// The run's table and, when the run store says, its unfinished problems.
struct Loaded {
    table: PassAt1Table,
    /// `None`: no store to tell (the table's own counts say whether it is partial).
    unfinished: Option<Vec<String>>,
    /// Problems without a reference answer: not judged, not in the table.
    unreferenced: usize,
}

/// The table as the run store holds it now (so the same as `tmas export --format csv`,
/// also while the run goes on or after it was interrupted); without a store, the table
/// the run wrote, or one rebuilt from `problems/*.json` (then only finished problems
/// count).
fn load_table(dir: &RunDir) -> anyhow::Result<Loaded> {
    let db = dir.root.join(DB_FILE);
    if db.is_file() {
        let reader = StoreReader::open_read_only(&db)?;
        return Ok(Loaded {
            table: stored_table(&reader)?,
            unfinished: Some(unfinished_problems(&reader)?.0),
            unreferenced: reader
                .problems()?
                .iter()
                .filter(|p| !p.has_reference())
                .count(),
        });
    }
    let path = dir.root.join("pass_at_1.json");
    if path.is_file() {
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let table = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a Pass@1 table", path.display()))?;
        return Ok(Loaded {
            table,
            unfinished: None,
            unreferenced: 0,
        });
    }
    let records = dir.read_problems()?;
    anyhow::ensure!(
        !records.is_empty(),
        "{}: no finished problems yet",
        dir.root.display()
    );
    eprintln!(
        "note: no pass_at_1.json (run not finished); table over {} finished problems",
        records.len()
    );
    let iterations = records.iter().map(|r| r.judgments.len()).max().unwrap_or(0);
    let mut builder = PassAt1Builder::new(records.iter().map(|r| r.problem_id.clone()), iterations)
        .counting_failed(dir.failed_candidates()?);
    for record in &records {
        for (t, candidates) in record.judgments.iter().enumerate() {
            for judged in candidates {
                builder.record_candidate(&record.problem_id, t, judged.as_ref())?;
            }
        }
    }
    Ok(Loaded {
        table: builder.build(),
        unfinished: None,
        unreferenced: 0,
    })
}

/// The legend text: the run's method as its `config.toml` names it (`tmas`, the only
/// method older runs had, when the file or key is missing).
fn method_label(dir: &RunDir) -> String {
    std::fs::read_to_string(dir.root.join("config.toml"))
        .map_or(crate::config::MethodName::Tmas, |text| {
            crate::config::MethodName::of_stored_config(&text)
        })
        .as_str()
        .to_string()
}
