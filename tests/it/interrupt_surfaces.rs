//! An interrupted run tells the truth everywhere: runs stopped by SIGINT at several
//! points (and an extension stopped half-way) print a table, write `pass_at_1.json|csv`
//! and `run.json`, and give a `tmas report` and a `tmas export --partial` that all agree
//! with the run store, read here with plain SQL: each row over the problems that have its
//! iteration judged (their number shown: a finished problem in every row, an unfinished
//! one in the iterations it judged), `final_pass_at_1` null until every problem
//! finished, the `partial:` line wherever a table is printed.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::cli::*;

const PROBLEMS: usize = 6;
const ITERATIONS: u32 = 3;

/// What the store says, computed without the crate's table code.
#[derive(Debug)]
struct Truth {
    /// Per problem in dataset order: id, status, whether it finished, judged iterations of
    /// its record (`None` without one).
    problems: Vec<(String, String, bool, Option<usize>)>,
    /// Per iteration: the problems covering it and their mean candidate score.
    rows: Vec<(usize, f64)>,
    unfinished: usize,
}

/// The scores of an unfinished problem's judged iterations: its `candidates` rows with
/// their verdicts, by iteration.
fn judged_rows(conn: &rusqlite::Connection, problem: &str) -> BTreeMap<usize, Vec<Option<f64>>> {
    let mut out: BTreeMap<usize, Vec<Option<f64>>> = BTreeMap::new();
    let mut stmt = conn
        .prepare(
            "SELECT c.iteration, j.score FROM candidates AS c LEFT JOIN judge_verdicts AS j \
             USING (problem_id, iteration, candidate) WHERE c.problem_id = ?1",
        )
        .unwrap();
    let rows = stmt
        .query_map([problem], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?)))
        .unwrap();
    for row in rows {
        let (t, score) = row.unwrap();
        out.entry(t as usize).or_default().push(score);
    }
    out
}

fn truth(dir: &Path) -> Truth {
    let conn = read_store(dir);
    let t: usize = conn
        .query_row("SELECT value FROM meta WHERE key = 'iterations'", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap()
        .parse()
        .unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT problem_id, status, iterations, record_json FROM problems ORDER BY ordinal",
        )
        .unwrap();
    let rows: Vec<(String, String, Option<i64>, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut sums = vec![(0usize, 0.0f64); t];
    let mut problems = Vec::new();
    let mut unfinished = 0;
    for (id, status, done_t, record) in rows {
        let finished = match status.as_str() {
            "failed" => true,
            "done" => done_t.unwrap() as usize >= t,
            _ => false,
        };
        let record_judgments: Vec<Vec<Option<f64>>> = record
            .as_deref()
            .map(|json| {
                let v: Value = serde_json::from_str(json).unwrap();
                v["judgments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|it| {
                        it.as_array()
                            .unwrap()
                            .iter()
                            .map(|j| j.get("score").and_then(Value::as_f64))
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A finished problem counts in every row (a failed one scores 0 there); an
        // unfinished one in the iterations whose rows the store holds.
        let judgments: BTreeMap<usize, Vec<Option<f64>>> = if finished {
            (0..t)
                .map(|i| (i, record_judgments.get(i).cloned().unwrap_or_default()))
                .collect()
        } else {
            unfinished += 1;
            judged_rows(&conn, &id)
        };
        for (i, scores) in judgments.into_iter().filter(|(i, _)| *i < t) {
            let scores: Vec<f64> = scores.into_iter().flatten().collect();
            sums[i].0 += 1;
            if !scores.is_empty() {
                sums[i].1 += scores.iter().sum::<f64>() / scores.len() as f64;
            }
        }
        let judged = record.map(|_| record_judgments.len());
        problems.push((id, status, finished, judged));
    }
    let rows = sums
        .into_iter()
        .map(|(n, sum)| (n, if n == 0 { 0.0 } else { sum / n as f64 }))
        .collect();
    Truth {
        problems,
        rows,
        unfinished,
    }
}

/// The table's rows as printed: (iteration label, pass@1 text, problems).
fn printed_rows(stdout: &str) -> Vec<(String, String, usize)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("iteration  pass@1"))
        .skip(1)
        .take_while(|l| l.starts_with("It"))
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[0].into(), cells[1].into(), cells[2].parse().unwrap())
        })
        .collect()
}

/// Checks every surface of the run in `dir` against the store; `stdout` is what `tmas
/// run` printed.
fn assert_surfaces_agree(dir: &Path, stdout: &str, what: &str) {
    let truth = truth(dir);
    let total = truth.problems.len();
    let dir_s = dir.display().to_string();
    let partial = truth.unfinished > 0;
    eprintln!("{what}: {truth:?}");

    // The printed table: one row per iteration, its count and figure from the store.
    let expected: Vec<(String, String, usize)> = truth
        .rows
        .iter()
        .enumerate()
        .map(|(t, (n, pass))| {
            let figure = if *n == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", pass * 100.0)
            };
            (format!("It{t}"), figure, *n)
        })
        .collect();
    assert_eq!(
        printed_rows(stdout),
        expected,
        "{what}: printed table\n{stdout}"
    );
    let partial_line = stdout.lines().find(|l| l.starts_with("partial: "));
    if partial {
        let line = partial_line.unwrap_or_else(|| panic!("{what}: no partial line\n{stdout}"));
        assert!(
            line.contains(&format!(
                "{} of {total} problems unfinished",
                truth.unfinished
            )),
            "{what}: {line}"
        );
    } else {
        assert!(partial_line.is_none(), "{what}: {stdout}");
    }

    // pass_at_1.json and .csv, and the CSV export.
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.join("pass_at_1.json")).unwrap()).unwrap();
    assert_eq!(json["problems_total"], total, "{what}");
    for (t, (n, pass)) in truth.rows.iter().enumerate() {
        let row = &json["rows"][t];
        assert_eq!(row["problems"], *n, "{what}: pass_at_1.json row {t}");
        let stored = row["pass_at_1"].as_f64().unwrap();
        assert!(
            (stored - pass).abs() < 1e-9,
            "{what}: row {t}: {stored} vs {pass}"
        );
    }
    let csv = std::fs::read_to_string(dir.join("pass_at_1.csv")).unwrap();
    let exported = ok(
        tmas(&["export", &dir_s, "--format", "csv", "--partial"]),
        "export --format csv --partial",
    );
    let unmarked: String = exported
        .lines()
        .map(|l| {
            let l = l.strip_suffix(",partial").unwrap_or(l);
            format!("{}\n", l.strip_suffix(",status").unwrap_or(l))
        })
        .collect();
    assert_eq!(unmarked, csv, "{what}: export csv vs pass_at_1.csv");
    assert_eq!(exported != csv, partial, "{what}: rows marked partial");

    // run.json: no final figure until every problem finished, and how many did.
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["problems_total"], total, "{what}");
    assert_eq!(
        summary["problems_finished"],
        total - truth.unfinished,
        "{what}"
    );
    if partial {
        assert!(summary["final_pass_at_1"].is_null(), "{what}: {summary}");
        assert_eq!(summary["status"], "interrupted", "{what}");
    } else {
        let last = truth.rows.last().unwrap().1;
        let stored = summary["final_pass_at_1"].as_f64().unwrap();
        assert!((stored - last).abs() < 1e-9, "{what}");
    }

    // tmas report: the same table under the same partial line; the chart says partial.
    let report = ok(tmas(&["report", &dir_s]), "tmas report");
    assert_eq!(printed_rows(&report), expected, "{what}: report\n{report}");
    let report_line = report.lines().find(|l| l.starts_with("partial: "));
    assert_eq!(report_line, partial_line, "{what}: report's partial line");
    let svg = std::fs::read_to_string(dir.join("pass_at_1.svg")).unwrap();
    assert_eq!(
        svg.contains("partial:"),
        partial,
        "{what}: the chart's title says partial"
    );

    // export --partial: every problem, unfinished ones marked, finished iterations kept.
    let jsonl = ok(tmas(&["export", &dir_s, "--partial"]), "export --partial");
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), total, "{what}");
    for (line, (id, status, finished, judged)) in lines.iter().zip(&truth.problems) {
        assert_eq!(line["problem_id"], id.as_str(), "{what}");
        let expected_status = if !finished {
            "partial"
        } else {
            status.as_str()
        };
        assert_eq!(line["status"], expected_status, "{what}: {id}");
        let iterations = line["outcome"]["iterations"].as_array().map_or(0, Vec::len);
        assert_eq!(iterations, judged.unwrap_or(0), "{what}: {id}'s iterations");
    }
}

/// `tmas run` stopped by SIGINT once `n` calls are stored: its stdout.
fn interrupted_run(config: &Path, dir: &Path, n: u64, extra: &[&str]) -> String {
    let mut args: Vec<String> = vec![
        "run".into(),
        "-c".into(),
        config.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--progress-every".into(),
        "0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_tmas(&args);
    wait_for_stored(dir, n, &mut child);
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(130) | Some(0)),
        "{}",
        text(&out.stderr)
    );
    stdout
}

#[test]
fn a_run_interrupted_at_several_points_reports_what_the_store_holds_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", PROBLEMS, ITERATIONS);
    // Two problems at a time, so problems finish one after another.
    let two = ["--set", "run.max_concurrent_problems=2"];
    let whole = tmp.path().join("whole");
    let mut args = vec![
        "run".to_owned(),
        "-c".into(),
        config.display().to_string(),
        "--out".into(),
        whole.display().to_string(),
        "--progress-every".into(),
        "0".into(),
    ];
    args.extend(two.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = ok(tmas(&args), "uninterrupted run");
    assert_surfaces_agree(&whole, &stdout, "uninterrupted");
    let total = stored_calls(&whole);

    let mut partial_seen = 0;
    // Iterations are judged as they complete, so the stored calls of an early stop are
    // spread over every problem started; from half of the calls on some problem is done.
    for (i, quarters) in [2, 3].into_iter().enumerate() {
        let dir = tmp.path().join(format!("stopped-{i}"));
        let stdout = interrupted_run(&config, &dir, total * quarters / 4, &two);
        assert_surfaces_agree(&dir, &stdout, &format!("stopped at {quarters}/4"));
        partial_seen += usize::from(stdout.contains("partial: "));
    }
    assert!(
        partial_seen > 0,
        "no stop came early enough to test anything"
    );
}

/// Problems with a call committed to the run store so far.
fn problems_with_stored_calls(dir: &Path) -> u64 {
    let Ok(conn) = rusqlite::Connection::open_with_flags(
        dir.join("run.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) else {
        return 0;
    };
    let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
    conn.query_row("SELECT COUNT(DISTINCT problem_id) FROM calls", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as u64)
    .unwrap_or(0)
}

#[test]
fn a_problem_solved_before_the_stop_is_still_judged_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, ITERATIONS);
    let dir = tmp.path().join("run");
    // One problem at a time: the second starts once the first has finished, whose last
    // iteration is then being judged.
    let mut child = spawn_tmas(&[
        "run",
        "-c",
        path_arg(&config),
        "--out",
        path_arg(&dir),
        "--progress-every",
        "0",
        "--set",
        "run.max_concurrent_problems=1",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while problems_with_stored_calls(&dir) < 2 {
        assert!(child.try_wait().unwrap().is_none(), "ended before the stop");
        assert!(
            std::time::Instant::now() < deadline,
            "the second problem never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let truth = truth(&dir);
    let statuses: Vec<&str> = truth.problems.iter().map(|p| p.1.as_str()).collect();
    assert_eq!(
        statuses,
        ["done", "pending"],
        "the problem being judged at the stop is kept"
    );
    assert_surfaces_agree(&dir, &stdout, "stopped while judging");
}

#[test]
fn an_extension_stopped_half_way_counts_each_iteration_over_the_problems_that_reached_it() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", PROBLEMS, 2);
    let dir = tmp.path().join("run");
    let dir_s = dir.display().to_string();
    let two = "run.max_concurrent_problems=2";
    ok(
        tmas(&[
            "run",
            "-c",
            &config.display().to_string(),
            "--out",
            &dir_s,
            "--progress-every",
            "0",
            "--set",
            two,
        ]),
        "2-iteration run",
    );
    let before = stored_calls(&dir);
    let mut child = spawn_tmas(&[
        "run",
        "--resume",
        &dir_s,
        "--iterations",
        "4",
        "--progress-every",
        "0",
        "--set",
        two,
    ]);
    // Half of the new iterations' calls, about as many as the first two made.
    wait_for_stored(&dir, before + before / 2, &mut child);
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let truth = truth(&dir);
    let counts: Vec<usize> = truth.rows.iter().map(|(n, _)| *n).collect();
    assert_eq!(counts[..2], [PROBLEMS, PROBLEMS], "{truth:?}");
    assert!(
        counts[3] < PROBLEMS,
        "some problem did not reach It3: {truth:?}"
    );
    assert_surfaces_agree(&dir, &stdout, "extension stopped");
}

#[test]
fn a_run_stopped_before_any_iteration_finished_reports_without_a_chart() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", PROBLEMS, ITERATIONS);
    let dir = tmp.path().join("early");
    interrupted_run(&config, &dir, 2, &[]);
    let dir_s = dir.display().to_string();
    let report = ok(tmas(&["report", &dir_s]), "tmas report");
    assert!(
        report.contains("chart: none yet: no problem has an iteration judged"),
        "{report}"
    );
    assert!(report.contains("partial: "), "{report}");
    assert!(!dir.join("pass_at_1.svg").exists());
}

#[test]
fn a_report_into_a_closed_pipe_ends_quietly() {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let dir = tmp.path().join("run");
    ok(run_fresh(&config, &dir), "run");
    // A pipe whose reader is already gone: every write to it fails (`tmas report | head`
    // after head has exited), whatever the timing.
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    let stdout = unsafe { std::process::Stdio::from_raw_fd(fds[1]) };
    let out = command(&["report", &dir.display().to_string()])
        .stdout(stdout)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}
