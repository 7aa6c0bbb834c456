//! The end-of-run assembly: lines of this process copied, earlier sessions' records read
//! from the store, each done problem once in dataset order, the same Pass@1 table as one
//! built from every stored record.

use std::sync::Arc;

use super::*;
use crate::eval::pass_at_1::pass_at_1_csv;
use crate::method::{CallCounts, ProblemInput, StopReason, TmasOutcome};
use crate::record::ProblemRecord;
use crate::store::export::pass_at_1_table;
use crate::store::{Fact, ProblemRow, StatusRow};

/// A record whose `judgments[t][c]` carry the given scores (`None`: no judgment).
fn record(id: &str, scores: &[&[Option<f64>]]) -> ProblemRecord {
    let judgments = scores
        .iter()
        .map(|row| {
            row.iter()
                .map(|s| {
                    s.map(|score| {
                        let mut j = JudgeRecord::from_reply("42", r"so \boxed{42}");
                        j.score = score;
                        j.undecided = score == 0.0;
                        j.disagreement = score > 0.0 && score < 1.0;
                        j
                    })
                })
                .collect()
        })
        .collect();
    ProblemRecord {
        problem_id: id.into(),
        question: format!("question of {id} with \"quotes\" and ünïcode"),
        reference_answer: "42".into(),
        outcome: TmasOutcome {
            problem: ProblemInput {
                id: id.into(),
                question: "q".into(),
            },
            iterations: Vec::new(),
            stop: StopReason::Completed,
            experience: vec!["e".into()],
            guidelines: Vec::new(),
            calls: CallCounts::default(),
            released: Vec::new(),
        },
        judgments,
    }
}

const THIRD: f64 = 1.0 / 3.0;

fn scores_of(i: usize) -> Vec<Vec<Option<f64>>> {
    vec![
        vec![Some(THIRD), None, Some(2.0 * THIRD)],
        vec![Some(0.1 + 0.2), Some(i as f64 / 7.0), Some(1.0)],
        // serde_json (without `float_roundtrip`) parses these printed values back one
        // bit off: the in-memory scores must match the parsed ones anyway.
        vec![Some(0.0), Some(0.925_999_999_999_999_9), Some(34.0 / 330.0)],
    ]
}

fn make(i: usize) -> ProblemRecord {
    let scores = scores_of(i);
    let rows: Vec<&[Option<f64>]> = scores.iter().map(Vec::as_slice).collect();
    record(&format!("p{i}"), &rows)
}

async fn store_done(store: &RunStore, record: &ProblemRecord) -> Arc<str> {
    let json: Arc<str> = serde_json::to_string(record).unwrap().into();
    store
        .write(Fact::Done {
            record: Arc::new(record.clone()),
            iterations: 3,
        })
        .await
        .unwrap();
    json
}

fn results_lines(dir: &RunDir) -> Vec<String> {
    std::fs::read_to_string(dir.results_path())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn scores_kept_in_memory_equal_the_scores_parsed_from_the_stored_record() {
    for i in 0..20 {
        let r = make(i);
        let json = serde_json::to_string(&r).unwrap();
        let parsed = JudgedScores::parse(&json).unwrap();
        assert_eq!(JudgedScores::of(&r.judgments), parsed, "problem {i}");
        // Bit for bit, not just ==.
        for (a, b) in JudgedScores::of(&r.judgments)
            .by_iteration
            .iter()
            .flatten()
            .flatten()
            .zip(parsed.by_iteration.iter().flatten().flatten())
        {
            assert_eq!(a.score.to_bits(), b.score.to_bits());
        }
        assert_eq!(
            parsed.by_iteration[0]
                .iter()
                .filter(|c| c.is_none())
                .count(),
            1,
            "the unjudged candidate is kept as failed"
        );
    }
}

/// A fresh run directory and store holding problems `p0`…`p{n-1}` in that order.
fn run_with_problems(n: i64) -> (tempfile::TempDir, RunDir, RunStore) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::create(&tmp.path().join("run")).unwrap();
    let store = RunStore::create(&dir.root).unwrap();
    store.send(Fact::Problems(
        (0..n)
            .map(|i| ProblemRow {
                problem_id: format!("p{i}"),
                ordinal: i,
                question: "q".into(),
                reference_answer: "42".into(),
                reference_solution: None,
                grading_guidelines: None,
            })
            .collect(),
    ));
    (tmp, dir, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_results_hold_each_done_problem_once_in_dataset_order() {
    let (_tmp, dir, store) = run_with_problems(6);
    let records: Vec<ProblemRecord> = (0..6).map(make).collect();

    // An earlier, killed process: p1 and p3 stored; p1's files written, p3's not (killed
    // between the commit and the files); p3 was appended once partially.
    let mut jsons = vec![None; 6];
    for i in [1, 3] {
        jsons[i] = Some(store_done(&store, &records[i]).await);
    }
    dir.write_problem("p1", jsons[1].as_deref().unwrap())
        .unwrap();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.results_path())
            .unwrap();
        f.write_all(&jsons[3].as_deref().unwrap().as_bytes()[..100])
            .unwrap();
    }
    // p5 failed in that process.
    store.send(Fact::Status(StatusRow {
        problem_id: "p5".into(),
        status: "failed",
        error: Some("boom".into()),
    }));

    // This process finishes p4, p0, p2 in that order.
    let mut written = WrittenOutputs::default();
    for i in [4, 0, 2] {
        let json = store_done(&store, &records[i]).await;
        let line = dir.write_problem(&records[i].problem_id, &json).unwrap();
        jsons[i] = Some(json);
        written.insert(
            records[i].problem_id.clone(),
            WrittenProblem {
                line,
                scores: JudgedScores::of(&records[i].judgments),
            },
        );
    }
    // A file written by this process is not written again: mark it.
    std::fs::write(dir.problem_path("p0"), b"marker").unwrap();
    store.flush().await.unwrap();

    let outputs = rebuild_outputs(&store, &dir, 3, written).await.unwrap();

    let expected: Vec<String> = [0, 1, 2, 3, 4]
        .iter()
        .map(|&i| jsons[i].as_deref().unwrap().to_owned())
        .collect();
    assert_eq!(results_lines(&dir), expected);
    assert_eq!(
        std::fs::read_to_string(dir.problem_path("p3")).unwrap(),
        expected[3],
        "the missing file of an earlier process is written"
    );
    assert_eq!(std::fs::read(dir.problem_path("p0")).unwrap(), b"marker");
    assert!(!dir.problem_path("p5").exists());
    assert_eq!(outputs.problems_total, 6);
    assert_eq!(outputs.problems_done, 5);
    assert_eq!(outputs.problems_failed.len(), 1);
    assert_eq!(outputs.problems_failed[0].error, "boom");

    // The table equals the one built from every stored record (the former way).
    let (problems, stored) = store
        .read(|r| Ok((r.problems()?, r.records()?)))
        .await
        .unwrap();
    let former = pass_at_1_table(
        &problems,
        stored.iter().map(Ok),
        &Default::default(),
        3,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&outputs.table).unwrap(),
        serde_json::to_string(&former).unwrap()
    );
    let written_table = std::fs::read_to_string(dir.root.join("pass_at_1.json")).unwrap();
    assert_eq!(
        written_table,
        serde_json::to_string_pretty(&former).unwrap()
    );

    // A second rebuild (a resume with nothing left) reads everything from the store and
    // gives the same file and table.
    let again = rebuild_outputs(&store, &dir, 3, WrittenOutputs::default())
        .await
        .unwrap();
    assert_eq!(results_lines(&dir), expected);
    assert_eq!(
        serde_json::to_string(&again.table).unwrap(),
        serde_json::to_string(&former).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(dir.problem_path("p0")).unwrap(),
        expected[0],
        "a file that differs from the stored record is rewritten"
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_missing_from_results_jsonl_is_taken_from_the_store() {
    let (_tmp, dir, store) = run_with_problems(2);
    let mut written = WrittenOutputs::default();
    let mut jsons = Vec::new();
    for i in 0..2 {
        let r = make(i);
        let json = store_done(&store, &r).await;
        let line = dir.write_problem(&r.problem_id, &json).unwrap();
        written.insert(
            r.problem_id.clone(),
            WrittenProblem {
                line,
                scores: JudgedScores::of(&r.judgments),
            },
        );
        jsons.push(json.to_string());
    }
    // Someone truncated the file: p1's line is gone, p0's is intact.
    let keep = written["p0"].line.len;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.results_path())
        .unwrap();
    file.set_len(keep + 10).unwrap();
    drop(file);
    store.flush().await.unwrap();

    let outputs = rebuild_outputs(&store, &dir, 3, written).await.unwrap();
    assert_eq!(results_lines(&dir), jsons);
    assert_eq!(outputs.problems_done, 2);
    store.close().await.unwrap();
}

/// The store writer holds finished-problem records back behind call rows; a flush (and a
/// close) must still mean "everything sent before is committed", records included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_without_waiting_are_committed_before_a_later_flush_returns() {
    let (_tmp, _dir, store) = run_with_problems(3);
    for i in 0..3 {
        let record = make(i);
        store.send(Fact::Done {
            record: Arc::new(record),
            iterations: 3,
        });
    }
    store.flush().await.unwrap();
    let done = store.read(|r| r.done_problem_ids()).await.unwrap();
    assert_eq!(done, vec!["p0", "p1", "p2"]);
    for i in 0..3 {
        let id = format!("p{i}");
        let stored = store
            .read(move |r| r.record_json(&id))
            .await
            .unwrap()
            .expect("record stored");
        assert_eq!(stored, serde_json::to_string(&make(i)).unwrap());
    }
}

/// Exports read one done record at a time: `done_record` gives a done problem's record
/// and nothing for a pending or unknown one, and the exported CSV equals the table built
/// from every record at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_read_done_records_one_at_a_time() {
    let (_tmp, _dir, store) = run_with_problems(3);
    store.send(Fact::Meta(vec![(
        crate::store::schema::META_ITERATIONS.into(),
        "3".into(),
    )]));
    for i in [0, 2] {
        store_done(&store, &make(i)).await;
    }
    let (p0, p1, unknown) = store
        .read(|r| {
            Ok((
                r.done_record("p0")?,
                r.done_record("p1")?,
                r.done_record("nope")?,
            ))
        })
        .await
        .unwrap();
    assert!(p1.is_none(), "p1 is still pending");
    assert!(unknown.is_none());

    let (problems, stored) = store
        .read(|r| Ok((r.problems()?, r.records()?)))
        .await
        .unwrap();
    // The record as stored, bit for bit: serde_json's `float_roundtrip` reads a score
    // such as 0.9259999999999999 back as itself, not as 0.926.
    assert_eq!(
        serde_json::to_string(&p0.expect("p0 is done")).unwrap(),
        serde_json::to_string(&make(0)).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&stored[0]).unwrap(),
        serde_json::to_string(&make(0)).unwrap()
    );
    assert_eq!(stored[0].problem_id, "p0");
    let whole = pass_at_1_table(
        &problems,
        stored.iter().map(Ok),
        &Default::default(),
        3,
        Default::default(),
    )
    .unwrap();
    let (csv, jsonl) = store
        .read(|r| {
            let (mut csv, mut jsonl) = (Vec::new(), Vec::new());
            crate::store::export::write_csv(r, &mut csv, false).expect("csv export");
            crate::store::export::write_jsonl(r, &mut jsonl, false).expect("jsonl export");
            Ok((csv, jsonl))
        })
        .await
        .unwrap();
    assert_eq!(String::from_utf8(csv).unwrap(), pass_at_1_csv(&whole));
    let lines: Vec<serde_json::Value> = jsonl
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    // Done problems carry their record's stop reason; the pending one has none.
    assert_eq!(lines[0]["outcome"]["stop"]["reason"], "completed");
    assert!(lines[1]["outcome"].is_null());
    assert_eq!(lines[2]["outcome"]["stop"]["reason"], "completed");
    // One schema for a line per problem: a done problem's export line is its
    // `results.jsonl` line (the record) with `status`, `error` and `final_banks` added.
    let mut line = lines[0].clone();
    for extra in ["status", "error", "final_banks"] {
        line.as_object_mut().unwrap().remove(extra);
    }
    assert_eq!(line, serde_json::to_value(&stored[0]).unwrap());
    store.close().await.unwrap();
}

/// "No answer" is counted the same from memory and from a stored record: an unboxed
/// wrong candidate is one, a graded proof (no box either) and a boxed answer are not.
#[test]
fn no_answer_verdicts_agree_between_memory_and_store() {
    let judgments = vec![vec![
        Some(JudgeRecord::from_reply("42", "it is 42, no box")),
        Some(JudgeRecord::from_grades(vec![Some(0.0), Some(0.0)])),
        Some(JudgeRecord::from_reply("42", r"\boxed{41}")),
    ]];
    let from_memory = JudgedScores::of(&judgments);
    let json = serde_json::json!({ "judgments": judgments }).to_string();
    let from_store = JudgedScores::parse(&json).expect("parses");
    for scores in [&from_memory, &from_store] {
        let flags: Vec<bool> = scores.by_iteration[0]
            .iter()
            .flatten()
            .map(CandidateScore::is_no_answer)
            .collect();
        assert_eq!(flags, [true, false, false]);
        let mut builder = PassAt1Builder::new(["p"], 1);
        scores.add_to(&mut builder, "p").expect("adds");
        assert_eq!(builder.build().rows[0].no_answer, 1);
    }
}
