//! Pass@1's denominator over a run whose solution calls fail: the `tmas` binary on its
//! embedded simulator told to answer part of the solution calls with HTTP 500 and no
//! retries, so some candidates have no answer. By default each counts in n_i as not
//! correct (the table's `failed` column counts them); `judge.failed_candidates =
//! "excluded"` leaves them out of n_i. Both tables, written at the end of the run and
//! rebuilt from the store by `tmas export`, equal the figure recomputed from the records.

use std::path::Path;

use crate::support::cli::*;

/// The records' `judgments[iteration][candidate]` scores (`None`: no judgment), by problem.
fn judged(dir: &Path) -> Vec<Vec<Vec<Option<f64>>>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join("problems")).expect("problems/") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("record");
        let record: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        let its = record["judgments"].as_array().expect("judgments").iter();
        out.push(
            its.map(|c| {
                let slots = c.as_array().expect("candidates").iter();
                slots
                    .map(|j| j.get("score").and_then(|s| s.as_f64()))
                    .collect()
            })
            .collect(),
        );
    }
    out
}

/// Pass@1 of iteration `t` over `problems` problems (those without a record score 0), a
/// failed candidate counted as wrong or left out.
fn expected(records: &[Vec<Vec<Option<f64>>>], t: usize, problems: u64, excluded: bool) -> f64 {
    let shares: f64 = records
        .iter()
        .filter_map(|r| r.get(t))
        .map(|slots| {
            let counted: Vec<f64> = slots
                .iter()
                .filter_map(|s| if excluded { *s } else { Some(s.unwrap_or(0.0)) })
                .collect();
            if counted.is_empty() {
                0.0
            } else {
                counted.iter().sum::<f64>() / counted.len() as f64
            }
        })
        .sum();
    shares / problems as f64
}

fn run(config: &Path, dir: &Path, rule: &str) -> serde_json::Value {
    let out = tmas(&[
        "run",
        "-c",
        path_arg(config),
        "--out",
        path_arg(dir),
        "--progress-every",
        "0",
        "--set",
        "simulator.faults.error_500=0.35",
        "--set",
        r#"simulator.faults.roles=["solution"]"#,
        "--set",
        "resilience.max_attempts=1",
        "--set",
        &format!("judge.failed_candidates={rule}"),
    ]);
    // Lost calls make the run degraded (exit 3), not failed.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", show(&out));
    let bytes = std::fs::read(dir.join("pass_at_1.json")).expect("pass_at_1.json");
    serde_json::from_slice(&bytes).expect("table")
}

/// The `failed_candidates` column of `tmas export --format csv`, by row.
fn csv_failed(dir: &Path) -> Vec<u64> {
    let csv = export_csv(dir);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "failed_candidates")
        .expect("failed_candidates column");
    lines
        .map(|l| l.split(',').nth(col).expect("cell").parse().expect("count"))
        .collect()
}

#[test]
fn failed_candidates_count_as_not_correct_in_pass_at_1_unless_excluded() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 6, 2);
    let mut checked_difference = false;
    for (rule, excluded) in [("wrong", false), ("excluded", true)] {
        let dir = tmp.path().join(rule);
        let table = run(&config, &dir, rule);
        let records = judged(&dir);
        let rows = table["rows"].as_array().expect("rows");
        let mut failed_total = 0;
        for (t, row) in rows.iter().enumerate() {
            let problems = row["problems"].as_u64().unwrap();
            let failed = row["failed_candidates"].as_u64().unwrap();
            let slots: Vec<&Option<f64>> =
                records.iter().filter_map(|r| r.get(t)).flatten().collect();
            let none = slots.iter().filter(|s| s.is_none()).count() as u64;
            assert_eq!(failed, none, "row {t}: {row}");
            let candidates = row["candidates"].as_u64().unwrap();
            let expected_candidates = slots.len() as u64 - if excluded { none } else { 0 };
            assert_eq!(candidates, expected_candidates, "row {t} ({rule}): {row}");
            let pass = row["pass_at_1"].as_f64().unwrap();
            let want = expected(&records, t, problems, excluded);
            assert!(
                (pass - want).abs() < 1e-9,
                "row {t} ({rule}): {pass} vs {want}"
            );
            let other = expected(&records, t, problems, !excluded);
            checked_difference |= (other - want).abs() > 1e-9;
            failed_total += failed;
        }
        assert!(failed_total > 0, "no solution call failed: {table}");
        // The table rebuilt from the store counts them the same way.
        let from_store = csv_failed(&dir);
        let in_table: Vec<u64> = rows
            .iter()
            .map(|r| r["failed_candidates"].as_u64().unwrap())
            .collect();
        assert_eq!(from_store, in_table);
    }
    assert!(
        checked_difference,
        "no row where the two rules give different figures: the test shows nothing"
    );
}
