//! `tmas export --format parquet` on a demo run: one file per table, each with the store's
//! row count, every call's prompt among the texts, and pyarrow reading the folder the way
//! `docs/run-store.md`'s notebook example does. Bad uses are refused without writing.

use std::fs::File;
use std::path::Path;
use std::process::Command;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::support::cli::{output as tmas, path_arg, repo, show};
use crate::support::python::python_with;

const TABLES: &[&str] = &[
    "problems",
    "candidates",
    "verifications",
    "summaries",
    "judge_verdicts",
    "calls",
    "bank_versions",
    "meta",
];

pub(crate) fn parquet_rows(path: &Path) -> usize {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    reader.map(|batch| batch.expect("a batch").num_rows()).sum()
}

fn store_rows(run: &Path, sql: &str) -> usize {
    let conn = rusqlite::Connection::open(run.join("run.sqlite")).expect("store");
    conn.query_row(sql, [], |r| r.get::<_, i64>(0))
        .expect("count") as usize
}

#[test]
fn a_demo_run_exports_to_parquet_and_reads_back() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run = tmp.path().join("run");
    let out = tmas(&[
        "run",
        "--config",
        "config/demo.toml",
        "--out",
        path_arg(&run),
        "--quiet",
        "--progress-every",
        "0",
        "--set",
        "method.iterations=2",
        "--ids",
        "imo-bench-algebra-001,imo-bench-combinatorics-001,imo-bench-geometry-001",
    ]);
    assert!(out.status.success(), "tmas run: {}", show(&out));

    // Without --output there is nowhere to put a folder of files.
    let out = tmas(&["export", path_arg(&run), "--format", "parquet"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(show(&out).contains("--output DIR"), "{}", show(&out));

    let folder = tmp.path().join("tables");
    let out = tmas(&[
        "export",
        path_arg(&run),
        "--format",
        "parquet",
        "--output",
        path_arg(&folder),
    ]);
    assert!(out.status.success(), "export: {}", show(&out));
    for table in TABLES {
        let file = folder.join(format!("{table}.parquet"));
        let expected = store_rows(&run, &format!("SELECT COUNT(*) FROM {table}"));
        assert!(expected > 0, "the demo run fills {table}");
        assert_eq!(parquet_rows(&file), expected, "{table}");
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .contains(&format!("{table}.parquet: {expected} rows")),
            "{}",
            show(&out)
        );
    }
    // A run without tracing has an empty traces file, with its columns.
    assert_eq!(
        parquet_rows(&folder.join("problem_traces.parquet")),
        0,
        "the demo run exports no spans"
    );
    let texts = store_rows(
        &run,
        "SELECT (SELECT COUNT(*) FROM prompts) \
         + (SELECT COUNT(content) FROM calls) + (SELECT COUNT(reasoning) FROM calls)",
    );
    assert_eq!(parquet_rows(&folder.join("texts.parquet")), texts);
    // Nothing of the building folder is left beside it.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("listing")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("building"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A second export into the same folder is refused and leaves the first intact.
    let before = std::fs::read(folder.join("calls.parquet")).expect("calls file");
    let out = tmas(&[
        "export",
        path_arg(&run),
        "--format",
        "parquet",
        "--output",
        path_arg(&folder),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(show(&out).contains("already exists"), "{}", show(&out));
    assert_eq!(
        std::fs::read(folder.join("calls.parquet")).expect("calls file"),
        before
    );

    if let Some(python) = python_with(&["pyarrow"], "reading the Parquet export with pyarrow") {
        let out = Command::new(python)
            .current_dir(repo())
            .args(["scripts/read_export_parquet.py", path_arg(&folder)])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "read_export_parquet.py: {}",
            show(&out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let calls = store_rows(&run, "SELECT COUNT(*) FROM calls");
        assert!(stdout.contains(&format!("calls: {calls} rows")), "{stdout}");
        assert!(
            stdout.contains("share correct by iteration:\n  0: "),
            "{stdout}"
        );
        assert!(stdout.contains("  1: "), "{stdout}");
        assert!(stdout.contains("completion tokens by role:"), "{stdout}");
    }
}
