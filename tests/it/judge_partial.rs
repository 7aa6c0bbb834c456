//! Partial runs keep their judging: each iteration's candidate and verdict rows are stored
//! as soon as it is judged, so a `tmas run` killed mid-run (SIGKILL) or stopped (SIGINT)
//! keeps the verdicts of every iteration it judged, its table, `run.json` and exports count
//! an unfinished problem in exactly those iterations and say so, and its resume sends no
//! stored judge call again and ends with the uninterrupted run's rows, once each.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::cli::*;

const PROBLEMS: usize = 3;
const ITERATIONS: u32 = 5;
/// The LLM judge on, twice per candidate, each candidate asked on its own (reuse off): every
/// judged candidate has judge calls of its own.
const JUDGE: &[&str] = &[
    "--set",
    "judge.enabled=true",
    "--set",
    "judge.policy=\"always\"",
    "--set",
    "judge.reuse=false",
];

fn run_args(config: &Path, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "-c",
        path_arg(config),
        "--out",
        path_arg(dir),
        "--progress-every",
        "0",
    ]
    .map(String::from)
    .to_vec();
    args.extend(JUDGE.iter().map(|s| s.to_string()));
    args
}

/// Every `judge_verdicts` row: (problem, iteration, candidate) → (score, llm_json).
type Verdicts = BTreeMap<(String, u32, u32), (f64, String)>;

fn verdicts(dir: &Path) -> Verdicts {
    read_store(dir)
        .prepare("SELECT problem_id, iteration, candidate, score, llm_json FROM judge_verdicts")
        .unwrap()
        .query_map([], |r| {
            Ok(((r.get(0)?, r.get(1)?, r.get(2)?), (r.get(3)?, r.get(4)?)))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The iterations with `candidates` rows, by problem, of the problems not stored as done.
/// A store whose schema the run has not written yet reads as nothing judged.
fn judged_unfinished(dir: &Path) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let conn = read_store(dir);
    let stmt = conn.prepare(
        "SELECT c.problem_id, c.iteration FROM candidates AS c \
         JOIN problems AS p USING (problem_id) WHERE p.status != 'done'",
    );
    let mut stmt = match stmt {
        Ok(stmt) => stmt,
        Err(e) if e.to_string().contains("no such table") => return out,
        Err(e) => panic!("reading the store: {e}"),
    };
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))
        .unwrap();
    for row in rows {
        let (p, t) = row.unwrap();
        out.entry(p).or_default().insert(t);
    }
    out
}

/// Stored judge calls: key → completion time (a call made again is stored again, later).
fn judge_calls(dir: &Path) -> BTreeMap<String, i64> {
    read_store(dir)
        .prepare("SELECT call_key, completed_at_ms FROM calls WHERE role = 'judge'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn count(dir: &Path, sql: &str) -> i64 {
    read_store(dir).query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Waits until some problem not yet done has at least two iterations judged in the store
/// (long before any problem's last iteration).
fn wait_for_judged_iterations(dir: &Path, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if dir.join("run.sqlite").is_file()
            && judged_unfinished(dir).values().any(|its| its.len() >= 2)
        {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("tmas exited ({status}) before it judged two iterations");
        }
        assert!(Instant::now() < deadline, "no iteration judged after 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pass@1 of each row as the rule says, from the stored rows: the mean, over the problems
/// with that iteration judged (done ones: every iteration), of their candidates' mean score.
fn expected_rows(verdicts: &Verdicts, covered: &BTreeMap<String, BTreeSet<u32>>) -> Vec<String> {
    (0..ITERATIONS)
        .map(|t| {
            let shares: Vec<f64> = covered
                .iter()
                .filter(|(_, its)| its.contains(&t))
                .map(|(p, _)| {
                    let scores: Vec<f64> = verdicts
                        .iter()
                        .filter(|((q, it, _), _)| q == p && *it == t)
                        .map(|(_, (score, _))| *score)
                        .collect();
                    scores.iter().sum::<f64>() / scores.len() as f64
                })
                .collect();
            if shares.is_empty() {
                format!("{t},,0")
            } else {
                let pass = shares.iter().sum::<f64>() / shares.len() as f64;
                format!("{t},{pass:.6},{}", shares.len())
            }
        })
        .collect()
}

#[test]
fn a_killed_run_keeps_its_judged_iterations_and_its_resume_sends_no_judge_call_again() {
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, PROBLEMS, ITERATIONS);
    let base_dir = tmp.path().join("uninterrupted");
    reset(&sim);
    let args = run_args(&config, &base_dir);
    ok(
        tmas(&args.iter().map(String::as_str).collect::<Vec<_>>()),
        "baseline run",
    );
    let base_requests = sim.requests();
    let base_export = export(&base_dir);
    let base_verdicts = verdicts(&base_dir);
    assert_eq!(
        base_verdicts.len(),
        PROBLEMS * ITERATIONS as usize * 2,
        "every candidate judged"
    );

    reset(&sim);
    let dir = tmp.path().join("killed");
    let dir_s = path_arg(&dir).to_owned();
    let args = run_args(&config, &dir);
    let mut child = spawn_tmas(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_for_judged_iterations(&dir, &mut child);
    // Frozen, so the store and the simulator's count are read at one moment.
    signal(&child, libc::SIGSTOP);
    let received = sim.settled_requests();
    let stored = stored_calls(&dir);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();

    // Every iteration judged before the kill is kept, with the verdicts an uninterrupted
    // run gives it, for problems that did not finish too.
    let unfinished = judged_unfinished(&dir);
    assert!(
        unfinished.values().any(|its| its.len() >= 2),
        "judged iterations of unfinished problems: {unfinished:?}"
    );
    let kept = verdicts(&dir);
    for (slot, verdict) in &kept {
        assert_eq!(Some(verdict), base_verdicts.get(slot), "{slot:?}");
    }
    let unfinished_slots = kept
        .keys()
        .filter(|(p, _, _)| unfinished.contains_key(p))
        .count();
    let judged_its: usize = unfinished.values().map(BTreeSet::len).sum();
    assert_eq!(unfinished_slots, judged_its * 2, "both candidates of each");

    // The table counts a problem in the iterations it judged: done problems in every row.
    let done: Vec<String> = read_store(&dir)
        .prepare("SELECT problem_id FROM problems WHERE status = 'done'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut covered = unfinished.clone();
    for p in &done {
        covered.insert(p.clone(), (0..ITERATIONS).collect());
    }
    let expected = expected_rows(&kept, &covered);
    let csv = ok(
        tmas(&["export", &dir_s, "--format", "csv", "--partial"]),
        "export --format csv --partial",
    );
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.ends_with(",unfinished_problems,status"), "{header}");
    for (line, want) in lines.zip(&expected) {
        assert!(
            line.starts_with(&format!("{want},")),
            "{line} vs {want}\n{csv}"
        );
    }
    // JSONL: an unfinished problem's line holds its judged iterations with their verdicts.
    let jsonl = ok(tmas(&["export", &dir_s, "--partial"]), "export --partial");
    for line in jsonl.lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = line["problem_id"].as_str().unwrap();
        let Some(its) = unfinished.get(id) else {
            assert!(line.get("judged_iterations").is_none(), "{line}");
            continue;
        };
        assert_eq!(line["status"], "partial");
        let listed = line["judged_iterations"].as_array().unwrap();
        let numbers: BTreeSet<u32> = listed
            .iter()
            .map(|it| it["iteration"].as_u64().unwrap() as u32)
            .collect();
        assert_eq!(&numbers, its, "{id}");
        for it in listed {
            let t = it["iteration"].as_u64().unwrap() as u32;
            for c in it["candidates"].as_array().unwrap() {
                let slot = (id.to_owned(), t, c["candidate"].as_u64().unwrap() as u32);
                assert_eq!(
                    c["verdict"]["score"].as_f64(),
                    Some(kept[&slot].0),
                    "{slot:?}"
                );
            }
        }
    }
    let report = ok(tmas(&["report", &dir_s]), "tmas report");
    let (first, judged) = unfinished.iter().next().unwrap();
    assert!(
        report.contains(&format!(
            "{first} ({} of {ITERATIONS} judged)",
            judged.len()
        )),
        "{report}"
    );
    assert!(report.contains("problems  unfinished"), "{report}");
    // Parquet: the verdict rows of the judged iterations, unfinished problems' included.
    let tables = tmp.path().join("tables");
    let parquet = ok(
        tmas(&[
            "export",
            &dir_s,
            "--format",
            "parquet",
            "--output",
            path_arg(&tables),
            "--partial",
        ]),
        "export --format parquet --partial",
    );
    assert!(
        parquet.contains(&format!("judge_verdicts.parquet: {} rows", kept.len())),
        "{parquet}"
    );

    // The resume replays every stored judge call (none made again) and ends with the
    // uninterrupted run's rows, each once.
    let before = judge_calls(&dir);
    ok(
        tmas(&["run", "--resume", &dir_s, "--progress-every", "0"]),
        "resume after SIGKILL",
    );
    let after = judge_calls(&dir);
    let made_again: Vec<&String> = before
        .iter()
        .filter(|(key, at)| after.get(*key) != Some(at))
        .map(|(key, _)| key)
        .collect();
    assert!(
        made_again.is_empty(),
        "judge calls made again: {made_again:?}"
    );
    let resent = sim.requests() - base_requests;
    assert!(
        resent <= received - stored,
        "re-sent {resent} calls but only {} were in flight at the kill",
        received - stored
    );
    assert_eq!(verdicts(&dir), base_verdicts);
    let slots = (PROBLEMS * ITERATIONS as usize * 2) as i64;
    assert_eq!(count(&dir, "SELECT COUNT(*) FROM candidates"), slots);
    assert_eq!(count(&dir, "SELECT COUNT(*) FROM judge_verdicts"), slots);
    assert_eq!(export(&dir), base_export, "resumed results differ");
    let report = ok(tmas(&["report", &dir_s]), "tmas report");
    assert!(!report.contains("unfinished"), "{report}");
}

#[test]
fn a_stopped_run_says_in_its_table_and_run_json_which_iterations_it_judged() {
    let sim = Sim::start(0, 100);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, PROBLEMS, ITERATIONS);
    let dir = tmp.path().join("stopped");
    let args = run_args(&config, &dir);
    let mut child = spawn_tmas(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_for_judged_iterations(&dir, &mut child);
    signal(&child, libc::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", show(&output));
    let stdout = text(&output.stdout);

    let unfinished = judged_unfinished(&dir);
    assert!(!unfinished.is_empty(), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "interrupted");
    assert!(summary["final_pass_at_1"].is_null(), "{summary}");
    let listed: BTreeMap<String, u64> = summary["unfinished"]
        .as_array()
        .unwrap_or_else(|| panic!("run.json lists the unfinished problems: {summary}"))
        .iter()
        .map(|u| {
            (
                u["problem_id"].as_str().unwrap().to_owned(),
                u["iterations_judged"].as_u64().unwrap(),
            )
        })
        .collect();
    for (p, its) in &unfinished {
        assert_eq!(listed.get(p), Some(&(its.len() as u64)), "{p}: {summary}");
    }
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("pass_at_1.json")).unwrap()).unwrap();
    assert_eq!(table["unfinished"], summary["unfinished"]);
    for row in table["rows"].as_array().unwrap() {
        let t = row["iteration"].as_u64().unwrap() as u32;
        let judging = unfinished.values().filter(|its| its.contains(&t)).count();
        assert_eq!(row["unfinished_problems"], judging, "{row}");
    }
    let (first, judged) = unfinished.iter().next().unwrap();
    assert!(
        stdout.contains(&format!(
            "{first} ({} of {ITERATIONS} judged)",
            judged.len()
        )),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("partial: ")
            && l.contains("each row covers only the problems that have its iteration judged")),
        "{stdout}"
    );
}
