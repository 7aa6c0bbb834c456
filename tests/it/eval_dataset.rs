//! Dataset loading from real files: the shipped samples, every kind of bad row (with the
//! file, line and field in the message), `--skip-bad-rows`, and `--limit` / `--ids`.

use std::path::{Path, PathBuf};

use tmas::eval::dataset::{DatasetError, DatasetFormat, DatasetSpec, load_dataset, parse_id_list};

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write test file");
    path
}

fn error_text(spec: &DatasetSpec) -> String {
    match load_dataset(spec) {
        Ok(d) => panic!("expected an error, loaded {} problems", d.problems.len()),
        Err(e) => e.to_string(),
    }
}

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}

#[test]
fn shipped_samples_load_and_agree() {
    let jsonl = load_dataset(&DatasetSpec::new(sample("imo-answerbench-sample.jsonl"))).unwrap();
    let csv = load_dataset(&DatasetSpec::new(sample("imo-answerbench-sample.csv"))).unwrap();
    assert_eq!(jsonl.format, DatasetFormat::Jsonl);
    assert_eq!(csv.format, DatasetFormat::Csv);
    assert_eq!(jsonl.problems.len(), 20);
    assert_eq!(
        jsonl.problems, csv.problems,
        "both samples hold the same problems"
    );
    assert!(jsonl.skipped.is_empty());
    assert_eq!(jsonl.problems[0].id, "imo-bench-algebra-001");
    assert_eq!(jsonl.problems[0].answer, "3");
    let notice = std::fs::read_to_string(sample("NOTICE.md")).unwrap();
    assert!(notice.contains("Copyright 2025 Google LLC") && notice.contains("CC-BY 4.0"));
}

#[test]
fn jsonl_numbers_blank_lines_and_custom_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "d.jsonl",
        "{\"id\": 7, \"q\": \" What? \", \"a\": 42}\n\n   \n{\"id\": \"x\", \"q\": \"Why?\", \"a\": \"\\\\frac{1}{2}\"}\r\n",
    );
    let mut spec = DatasetSpec::new(&path);
    spec.id_field = Some("id".into());
    spec.question_field = Some("q".into());
    spec.answer_field = Some("a".into());
    let d = load_dataset(&spec).unwrap();
    assert_eq!(d.problems.len(), 2);
    assert_eq!(
        (
            d.problems[0].id.as_str(),
            d.problems[0].question.as_str(),
            d.problems[0].answer.as_str()
        ),
        ("7", "What?", "42")
    );
    assert_eq!(d.problems[1].answer, "\\frac{1}{2}");
}

#[test]
fn jsonl_bad_rows_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = "{\"problem_id\": \"p1\", \"question\": \"Q\", \"answer\": \"1\"}\n";
    let cases = [
        (
            "{\"problem_id\": \"p2\", \"question\": \"Q\"}",
            "field \"answer\": missing",
        ),
        (
            "{\"problem_id\": \"p2\", \"question\": \"Q\", \"answer\": \"  \"}",
            "field \"answer\": empty",
        ),
        (
            "{\"problem_id\": \"p2\", \"question\": 3, \"answer\": \"1\"}",
            "field \"question\": expected a string, found a number",
        ),
        (
            "{\"problem_id\": null, \"question\": \"Q\", \"answer\": \"1\"}",
            "field \"problem_id\": expected a string or number, found null",
        ),
        (
            "{\"problem_id\": \"p2\", \"question\": \"Q\", ",
            "invalid JSON",
        ),
        ("[1, 2]", "expected a JSON object"),
        (
            "{\"problem_id\": \"p1\", \"question\": \"Q\", \"answer\": \"2\"}",
            "field \"problem_id\": duplicate id \"p1\" (first seen at line 1)",
        ),
    ];
    for (bad, expected) in cases {
        let path = write(dir.path(), "bad.jsonl", &format!("{good}\n{bad}\n"));
        let message = error_text(&DatasetSpec::new(&path));
        let location = format!("{}:3: ", path.display());
        assert!(message.starts_with(&location), "{message}");
        assert!(
            message.contains(expected),
            "{message} should contain {expected}"
        );
    }
}

#[test]
fn skip_bad_rows_logs_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "d.jsonl",
        "{\"problem_id\": \"a\", \"question\": \"Q\", \"answer\": \"1\"}\nnot json\n{\"problem_id\": \"a\", \"question\": \"Q\", \"answer\": \"1\"}\n{\"problem_id\": \"b\", \"question\": \"Q\", \"answer\": \"2\"}\n",
    );
    let mut spec = DatasetSpec::new(&path);
    spec.skip_bad_rows = true;
    let d = load_dataset(&spec).unwrap();
    let ids: Vec<&str> = d.problems.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let lines: Vec<u64> = d.skipped.iter().map(|s| s.line).collect();
    assert_eq!(lines, [2, 3]);
    assert!(d.skipped[1].to_string().contains("duplicate id"));
}

#[test]
fn csv_multiline_fields_report_the_starting_line() {
    let dir = tempfile::tempdir().unwrap();
    let content = "\u{feff}Problem ID,Problem,Short Answer,Category\n\
                   p1,\"Line one\nline two, with comma\",3,Algebra\n\
                   p2,\"Another\n\nmulti-line\",,Geometry\n";
    let path = write(dir.path(), "d.csv", content);
    let message = error_text(&DatasetSpec::new(&path));
    assert_eq!(
        message,
        format!("{}:4: field \"Short Answer\": empty", path.display())
    );

    let mut spec = DatasetSpec::new(&path);
    spec.skip_bad_rows = true;
    let d = load_dataset(&spec).unwrap();
    assert_eq!(d.problems.len(), 1);
    assert_eq!(d.problems[0].question, "Line one\nline two, with comma");
    assert_eq!(
        d.skipped[0].line, 4,
        "p2 starts on line 4: p1 spans lines 2-3"
    );
}

#[test]
fn csv_short_rows_and_missing_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "short.csv",
        "Problem ID,Problem,Short Answer\np1,Q,1\np2,Q\n",
    );
    assert_eq!(
        error_text(&DatasetSpec::new(&path)),
        format!(
            "{}:3: field \"Short Answer\": missing (row has too few columns)",
            path.display()
        )
    );
    let path = write(dir.path(), "cols.csv", "id,Problem,Short Answer\np1,Q,1\n");
    let message = error_text(&DatasetSpec::new(&path));
    assert!(
        message.starts_with(&format!(
            "{}:1: CSV header has no column \"Problem ID\"",
            path.display()
        )),
        "{message}"
    );
    assert!(
        message.contains("\"id\", \"Problem\", \"Short Answer\""),
        "{message}"
    );
}

#[test]
fn selection_by_ids_and_limit() {
    let path = sample("imo-answerbench-sample.jsonl");
    let mut spec = DatasetSpec::new(&path);
    spec.limit = Some(3);
    let ids: Vec<String> = load_dataset(&spec)
        .unwrap()
        .problems
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        ids,
        [
            "imo-bench-algebra-001",
            "imo-bench-algebra-021",
            "imo-bench-algebra-041"
        ]
    );

    spec.limit = Some(1);
    spec.ids = Some(parse_id_list(
        "imo-bench-geometry-001, imo-bench-algebra-061",
    ));
    let ids: Vec<String> = load_dataset(&spec)
        .unwrap()
        .problems
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        ids,
        ["imo-bench-algebra-061"],
        "ids keep file order, then limit applies"
    );

    spec.ids = Some(vec![
        "nope".into(),
        "imo-bench-algebra-001".into(),
        "gone".into(),
    ]);
    let message = error_text(&spec);
    assert!(
        message.ends_with("--ids lists problem ids not in the dataset: nope, gone"),
        "{message}"
    );

    spec.ids = None;
    spec.limit = Some(0);
    assert!(matches!(
        load_dataset(&spec),
        Err(DatasetError::Empty { .. })
    ));
}

#[test]
fn io_and_format_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let message = error_text(&DatasetSpec::new(&missing));
    assert!(
        message.starts_with(&format!("{}: cannot read dataset", missing.display())),
        "{message}"
    );
    let txt = write(dir.path(), "d.txt", "x");
    assert!(error_text(&DatasetSpec::new(&txt)).contains("unknown dataset format"));
    let mut spec = DatasetSpec::new(&txt);
    spec.format = Some(DatasetFormat::Jsonl);
    assert!(error_text(&spec).contains(":1: invalid JSON"));
    let empty = write(dir.path(), "e.jsonl", "\n\n");
    assert!(matches!(
        load_dataset(&DatasetSpec::new(&empty)),
        Err(DatasetError::Empty { .. })
    ));
}

#[test]
fn invalid_utf8_is_a_row_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let mut bytes = b"{\"problem_id\": \"a\", \"question\": \"Q\", \"answer\": \"1\"}\n".to_vec();
    bytes
        .extend_from_slice(b"{\"problem_id\": \"b\", \"question\": \"\xff\", \"answer\": \"1\"}\n");
    std::fs::write(&path, &bytes).unwrap();
    let message = error_text(&DatasetSpec::new(&path));
    assert!(
        message.starts_with(&format!("{}:2: not valid UTF-8", path.display())),
        "{message}"
    );

    let csv = dir.path().join("bad.csv");
    let mut bytes = b"Problem ID,Problem,Short Answer\np1,Q,1\n".to_vec();
    bytes.extend_from_slice(b"p2,\xff,2\np3,Q,3\n");
    std::fs::write(&csv, &bytes).unwrap();
    let mut spec = DatasetSpec::new(&csv);
    spec.skip_bad_rows = true;
    let d = load_dataset(&spec).unwrap();
    let ids: Vec<&str> = d.problems.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["p1", "p3"]);
    assert_eq!(d.skipped[0].line, 3);
}

#[test]
fn every_bad_row_is_listed_in_one_error_up_to_twenty() {
    let dir = tempfile::tempdir().unwrap();
    let good = |id: usize| {
        format!("{{\"problem_id\": \"p{id}\", \"question\": \"Q\", \"answer\": \"1\"}}\n")
    };
    let mut content = good(0);
    content.push_str("not json\n");
    content.push_str(&good(1));
    content.push_str("{\"problem_id\": \"p2\", \"question\": \"Q\"}\n");
    content.push_str(&good(0));
    let path = write(dir.path(), "three.jsonl", &content);
    let message = error_text(&DatasetSpec::new(&path));
    let p = path.display();
    assert!(
        message.starts_with(&format!("{p}: 3 bad rows")),
        "{message}"
    );
    for part in [
        format!("\n  {p}:2: invalid JSON"),
        format!("\n  {p}:4: field \"answer\": missing"),
        format!("\n  {p}:5: field \"problem_id\": duplicate id \"p0\""),
    ] {
        assert!(message.contains(&part), "{part:?} missing in {message}");
    }
    assert!(message.contains("--skip-bad-rows"), "{message}");

    // 25 bad rows: the first 20 are listed, the rest counted.
    let mut content = good(0);
    for _ in 0..25 {
        content.push_str("[1]\n");
    }
    let path = write(dir.path(), "many.jsonl", &content);
    let message = error_text(&DatasetSpec::new(&path));
    assert!(message.contains(": 25 bad rows"), "{message}");
    assert_eq!(message.matches("expected a JSON object").count(), 20);
    assert!(
        message.contains(&format!("{}:21: ", path.display())),
        "{message}"
    );
    assert!(
        !message.contains(&format!("{}:22: ", path.display())),
        "{message}"
    );
    assert!(message.ends_with("… and 5 more"), "{message}");

    // CSV: a short row and an empty field.
    let path = write(
        dir.path(),
        "bad.csv",
        "Problem ID,Problem,Short Answer\np1,Q\np2,Q,\np3,Q,3\n",
    );
    let message = error_text(&DatasetSpec::new(&path));
    let p = path.display();
    assert!(
        message.starts_with(&format!("{p}: 2 bad rows")),
        "{message}"
    );
    assert!(
        message.contains(&format!("\n  {p}:2: field \"Short Answer\": missing")),
        "{message}"
    );
    assert!(
        message.contains(&format!("\n  {p}:3: field \"Short Answer\": empty")),
        "{message}"
    );
}
