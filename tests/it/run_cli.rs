//! The built `tmas` binary: `tmas run` on the demo config (embedded simulator) prints the
//! Pass@1 table, `tmas report` draws its chart and the four analyses, a bad dataset row
//! is an error naming file and line unless `--skip-bad-rows` is given, `--quiet` leaves
//! warnings and the table, and an error is printed once.

use std::path::{Path, PathBuf};

use crate::support::cli::{output as tmas, path_arg, repo, show};

const DEMO: &str = "config/demo.toml";

/// T of the demo config, read through the config loader.
fn demo_iterations() -> u32 {
    let config = tmas::config::load(&repo().join(DEMO), &[], &[])
        .unwrap_or_else(|e| panic!("{DEMO} loads: {e}"));
    config.method.iterations
}

/// Table rows `It0`, `It1`, … printed on stdout, in order.
fn table_rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("It") && w[2..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

fn expected_rows(t: u32) -> Vec<String> {
    (0..t).map(|i| format!("It{i}")).collect()
}

#[test]
fn demo_run_prints_pass_at_1_per_iteration_and_report_draws_the_chart() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run_dir = tmp.path().join("demo-run");
    let out = tmas(&[
        "run",
        "--config",
        DEMO,
        "--out",
        path_arg(&run_dir),
        "--progress-every",
        "0",
    ]);
    assert!(out.status.success(), "tmas run failed: {}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("pass@1"), "table header: {}", show(&out));
    assert_eq!(
        table_rows(&stdout),
        expected_rows(demo_iterations()),
        "{}",
        show(&out)
    );
    for file in [
        "config.toml",
        "run.json",
        "pass_at_1.json",
        "pass_at_1.csv",
        "results.jsonl",
    ] {
        assert!(run_dir.join(file).is_file(), "{file} written");
    }
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("run.json")).expect("run.json readable"),
    )
    .expect("run.json is JSON");
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["problems_done"], summary["problems_total"]);

    let report = tmas(&["report", path_arg(&run_dir)]);
    assert!(
        report.status.success(),
        "tmas report failed: {}",
        show(&report)
    );
    let report_out = String::from_utf8_lossy(&report.stdout);
    // The Pass@1 table comes first; the analyses follow after a blank line.
    let (pass_at_1, analyses) = report_out
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("table, then analyses: {}", show(&report)));
    assert_eq!(table_rows(pass_at_1), expected_rows(demo_iterations()));
    for heading in [
        "Unique guidelines per problem",
        "Verification paradox",
        "Explore vs exploit",
        "Bank growth",
    ] {
        assert!(analyses.contains(heading), "{heading}: {}", show(&report));
    }
    assert!(analyses.contains("first correct answer on an explore branch"));
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("analyses.json")).expect("analyses.json written"),
    )
    .expect("analyses.json is JSON");
    let t = demo_iterations() as usize;
    assert_eq!(
        json["unique_guidelines"]["mean"].as_array().map(Vec::len),
        Some(t)
    );
    assert_eq!(
        json["bank_growth"]["guideline"].as_array().map(Vec::len),
        Some(t)
    );
    for stem in [
        "pass_at_1",
        "unique_guidelines",
        "verification_paradox",
        "explore_exploit",
        "bank_growth",
    ] {
        let png = std::fs::read(run_dir.join(format!("{stem}.png")))
            .unwrap_or_else(|e| panic!("{stem}.png written: {e}"));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{stem}: a PNG file");
        let svg = std::fs::read_to_string(run_dir.join(format!("{stem}.svg")))
            .unwrap_or_else(|e| panic!("{stem}.svg written: {e}"));
        assert!(svg.contains("<svg"), "{stem}: an SVG file");
    }
}

/// An analysis without data gets a note instead of a chart, and the chart an earlier
/// report drew from other data is removed: MV@k has no verifications, so the
/// verification paradox has nothing to draw.
#[test]
fn report_writes_a_note_instead_of_a_chart_for_an_analysis_without_data() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run_dir = tmp.path().join("mv-run");
    let out = tmas(&[
        "run",
        "--config",
        DEMO,
        "--out",
        path_arg(&run_dir),
        "--progress-every",
        "0",
        "--limit",
        "2",
        "--set",
        "method.name=majority-vote",
        "--set",
        "method.k=4",
        "--set",
        "method.iterations=1",
    ]);
    assert!(out.status.success(), "tmas run failed: {}", show(&out));
    let stale = run_dir.join("verification_paradox.png");
    std::fs::write(&stale, b"an earlier report's chart").expect("stale chart planted");
    let report = tmas(&["report", path_arg(&run_dir)]);
    assert!(report.status.success(), "tmas report: {}", show(&report));
    let stdout = String::from_utf8_lossy(&report.stdout);
    assert!(
        stdout.contains("note: no chart verification_paradox"),
        "{}",
        show(&report)
    );
    assert!(!stale.exists(), "the stale chart is removed");
    assert!(!run_dir.join("verification_paradox.svg").exists());
    // The other charts are drawn.
    assert!(run_dir.join("pass_at_1.png").is_file());
    assert!(run_dir.join("bank_growth.png").is_file());
}

/// A dataset whose third line lacks its answer.
fn dataset_with_bad_row(dir: &Path) -> PathBuf {
    let path = dir.join("with-bad-row.jsonl");
    let rows = [
        r#"{"problem_id": "good-1", "question": "Compute 1000 + 1.", "answer": "1001"}"#,
        r#"{"problem_id": "good-2", "question": "Compute 1000 + 2.", "answer": "1002"}"#,
        r#"{"problem_id": "bad-3", "question": "Compute 1000 + 3."}"#,
        r#"{"problem_id": "good-4", "question": "Compute 1000 + 4.", "answer": "1004"}"#,
    ];
    std::fs::write(&path, rows.join("\n") + "\n").expect("dataset written");
    path
}

#[test]
fn a_bad_dataset_row_is_named_by_file_and_line_and_skip_bad_rows_runs_the_rest() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dataset = dataset_with_bad_row(tmp.path());
    let run_dir = tmp.path().join("run");
    let base = [
        "run",
        "--config",
        DEMO,
        "--dataset",
        path_arg(&dataset),
        "--iterations",
        "2",
        "--out",
        path_arg(&run_dir),
        "--progress-every",
        "0",
    ];

    let out = tmas(&base);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad row is bad input: {}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let location = format!("{}:3", dataset.display());
    assert!(
        stderr.contains(&location),
        "the error names {location}: {}",
        show(&out)
    );
    assert!(stderr.contains("answer"), "and the field: {}", show(&out));

    // A missing dataset: one message, the OS error once.
    let missing = tmp.path().join("missing.jsonl");
    let mut args = base.to_vec();
    args[4] = path_arg(&missing);
    let out = tmas(&args);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let os = std::io::Error::from_raw_os_error(2).to_string();
    assert_eq!(stderr.matches(&os).count(), 1, "{}", show(&out));
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error:")).count(),
        1
    );
    assert!(
        stderr.contains(&missing.display().to_string()),
        "{}",
        show(&out)
    );

    // --quiet: the skipped row's warning and the final table, nothing else.
    let mut skipping = base.to_vec();
    skipping.extend(["--skip-bad-rows", "--quiet"]);
    let out = tmas(&skipping);
    assert!(
        out.status.success(),
        "--skip-bad-rows passes: {}",
        show(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table_rows(&stdout), expected_rows(2));
    assert!(!stdout.contains("chart:"), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WARN") && stderr.contains("skipping bad dataset row"),
        "{}",
        show(&out)
    );
    assert!(
        !stderr.contains("INFO") && !stderr.contains("tmas run:") && !stderr.contains("problems |"),
        "--quiet prints warnings only: {}",
        show(&out)
    );
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("run.json")).expect("run.json readable"),
    )
    .expect("run.json is JSON");
    assert_eq!(summary["problems_total"], 3, "the three good rows ran");
    assert_eq!(summary["problems_done"], 3);
}

/// `tmas select-hard` on the demo config: k samples per problem through the engine, the
/// hard pool (fewer than c correct), a seeded draw of n; selecting again from the run
/// gives the same file, and a different seed may draw differently.
#[test]
fn select_hard_samples_through_the_engine_and_draws_reproducibly() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run = tmp.path().join("samples");
    let out = tmp.path().join("hard.jsonl");
    let args = |out: &Path, seed: &str| -> Vec<String> {
        [
            "select-hard",
            "-k",
            "4",
            "--below",
            "2",
            "--take",
            "3",
            "--selection-seed",
            seed,
            "--output",
        ]
        .into_iter()
        .map(String::from)
        .chain([out.display().to_string()])
        .collect()
    };
    let mut first = args(&out, "3");
    first.extend(["-c", DEMO, "--limit", "8", "--run-dir"].map(String::from));
    first.push(run.display().to_string());
    let o = tmas(&first.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", show(&o));
    let text = std::fs::read_to_string(&out).expect("subset written");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(!rows.is_empty() && rows.len() <= 3, "{text}");
    for r in &rows {
        assert_eq!(r["samples"], 4, "{r}");
        assert!(r["correct"].as_u64().expect("a count") < 2, "{r}");
        assert!(r["question"].is_string() && r["answer"].is_string());
    }
    let records = std::fs::read_dir(run.join("problems"))
        .expect("the sampling run")
        .count();
    assert_eq!(records, 8, "one record per sampled problem");

    let again = tmp.path().join("again.jsonl");
    let mut from_run = args(&again, "3");
    from_run.extend(["--from-run".to_string(), run.display().to_string()]);
    let o = tmas(&from_run.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(std::fs::read_to_string(&again).expect("written"), text);
}

/// `tmas experiment` sweeping ε on the embedded simulator: the report adds the paper's
/// analyses of each variant and, for the ε sweep, unique guidelines per problem per
/// iteration across the swept values (table in comparison.md, chart, analyses.json).
#[test]
fn an_epsilon_sweep_report_shows_unique_guidelines_across_the_sweep() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let exp = tmp.path().join("eps.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"eps\"\nconfig = {:?}\nreport_iterations = [0, 1]\n\n\
             [[sweep]]\nkey = \"method.epsilon\"\nvalues = [0.0, 1.0]\n",
            repo().join(DEMO).display().to_string()
        ),
    )
    .expect("experiment file written");
    let out_dir = tmp.path().join("out");
    let out = tmas(&[
        "experiment",
        path_arg(&exp),
        "--out",
        path_arg(&out_dir),
        "--progress-every",
        "0",
        "--set",
        "run.limit=3",
        "--set",
        "method.n=3",
        "--set",
        "method.m=1",
        "--set",
        "method.iterations=3",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let md = std::fs::read_to_string(out_dir.join("comparison.md")).expect("comparison.md");
    assert!(md.contains("## Analyses"), "{md}");
    assert!(
        md.contains("## Unique guidelines across the ε sweep"),
        "{md}"
    );
    let sweep = md
        .split("## Unique guidelines across the ε sweep")
        .nth(1)
        .expect("the sweep section");
    let header = sweep
        .lines()
        .find(|l| l.starts_with("iteration"))
        .expect("the sweep table's header");
    assert!(
        header.contains("ε = 0") && header.contains("ε = 1"),
        "{header}"
    );
    let rows: Vec<&str> = sweep.lines().filter(|l| l.starts_with("It")).collect();
    assert_eq!(rows.len(), 3, "{sweep}");
    // ε = 1: every candidate explores, so the guideline bank grows; ε = 0 never explores
    // and its guideline agent still records strategies — both columns hold numbers.
    for row in &rows {
        assert_eq!(row.split_whitespace().count(), 3, "{row}");
    }
    for f in ["unique_guidelines_sweep.png", "unique_guidelines_sweep.svg"] {
        assert!(out_dir.join(f).is_file(), "{f} written");
    }
    let analyses: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out_dir.join("analyses.json")).expect("analyses.json"),
    )
    .expect("JSON");
    let variants = analyses.as_object().expect("an object by variant");
    assert_eq!(variants.len(), 2, "{analyses}");
    for (name, a) in variants {
        assert!(
            a["unique_guidelines"]["mean"].as_array().map(Vec::len) == Some(3),
            "{name}: {a}"
        );
        assert!(a["verification_paradox"].is_object(), "{name}");
    }
    // The variants' rows in the analyses table.
    let table: Vec<&str> = md
        .split("## Analyses")
        .nth(1)
        .expect("analyses section")
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| variant") && !l.starts_with("| ---"))
        .collect();
    assert_eq!(table.len(), 2, "{md}");
}
