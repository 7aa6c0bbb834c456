//! Hybrid-RL commands end to end on the simulator: a demo run, `tmas rl-data` (the parquet
//! reads back with the documented schema and mix), `tmas rl-rollouts` (a rollout batch from
//! the simulator's solution role), `tmas rl-score --compare`, and `tmas rl-serve` over
//! loopback giving the same rewards and advantages for the same batch.

use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use arrow_array::{Array, ListArray, RecordBatch, StringArray, StructArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::support::cli::{output as tmas, path_arg, repo, show};
use crate::support::python::python_with;
use crate::support::rl::{DEMO, demo_run, start_serve};

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("type of column {name}"))
}

fn field<'a, T: 'static>(s: &'a StructArray, name: &str) -> &'a T {
    s.column_by_name(name)
        .unwrap_or_else(|| panic!("field {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("type of field {name}"))
}

fn check_parquet(path: &Path) -> Vec<String> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("parquet"))
        .expect("parquet metadata")
        .build()
        .expect("reader");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "data_source",
            "prompt",
            "ability",
            "reward_model",
            "extra_info",
            "_source"
        ]
    );
    let mut sources = Vec::new();
    for b in &batches {
        let source = column::<StringArray>(b, "_source");
        let prompt = column::<ListArray>(b, "prompt");
        let reward = column::<StructArray>(b, "reward_model");
        let extra = column::<StructArray>(b, "extra_info");
        for i in 0..b.num_rows() {
            let s = source.value(i).to_owned();
            let messages = prompt.value(i);
            let messages = messages.as_any().downcast_ref::<StructArray>().unwrap();
            assert_eq!(field::<StringArray>(messages, "role").value(0), "user");
            assert!(
                !field::<StringArray>(messages, "content")
                    .value(0)
                    .is_empty()
            );
            assert_eq!(field::<StringArray>(reward, "style").value(i), "rule");
            assert!(
                !field::<StringArray>(reward, "ground_truth")
                    .value(i)
                    .is_empty()
            );
            assert_eq!(field::<StringArray>(extra, "split").value(i), "train");
            assert_eq!(field::<StringArray>(extra, "ability").value(i), "math");
            assert_eq!(field::<StringArray>(extra, "_source").value(i), s);
            let experience = field::<ListArray>(extra, "experience_bank").value(i).len();
            let guideline = field::<ListArray>(extra, "guideline_bank").value(i).len();
            let bank_prompt = field::<StringArray>(extra, "bank_prompt");
            match s.as_str() {
                "normal" => assert!(experience == 0 && guideline == 0 && bank_prompt.is_null(i)),
                "experience" => assert!(experience > 0 && bank_prompt.is_valid(i)),
                "guideline" => assert!(guideline > 0 && bank_prompt.is_null(i)),
                other => panic!("unknown _source {other}"),
            }
            sources.push(s);
        }
    }
    sources
}

fn scored_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("scored file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("scored line"))
        .collect()
}

#[test]
fn rl_data_score_and_serve_on_a_demo_run() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run = demo_run(tmp.path());

    // rl-data: the mix is capped by the 6 questions; rows read back.
    let parquet = tmp.path().join("rl.parquet");
    let out = tmas(&[
        "rl-data",
        path_arg(&run),
        "--output",
        path_arg(&parquet),
        "--normal",
        "4",
        "--experience",
        "10",
        "--guideline",
        "3",
    ]);
    assert!(out.status.success(), "rl-data: {}", show(&out));
    let sources = check_parquet(&parquet);
    let count = |s: &str| sources.iter().filter(|x| *x == s).count();
    assert_eq!(count("normal"), 4, "{}", show(&out));
    assert_eq!(count("guideline"), 3, "{}", show(&out));
    let experience = count("experience");
    assert!((1..=6).contains(&experience), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("wrote {} rows", 7 + experience)),
        "{stdout}"
    );
    assert!(stdout.contains("fewer instances than asked"), "{stdout}");

    // pyarrow reads it too.
    if let Some(python) = python_with(&["pyarrow"], "reading rl-data's parquet with pyarrow") {
        let out = Command::new(python)
            .current_dir(repo())
            .args(["scripts/read_rl_parquet.py", path_arg(&parquet)])
            .output()
            .expect("python runs");
        assert!(out.status.success(), "read_rl_parquet.py: {}", show(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{} rows", 7 + experience)));
    }

    // A rollout batch from the simulator's solution role.
    let rollouts = tmp.path().join("rollouts.jsonl");
    let out = tmas(&[
        "rl-rollouts",
        path_arg(&run),
        "--config",
        DEMO,
        "--output",
        path_arg(&rollouts),
        "--per-prompt",
        "6",
        "--normal",
        "3",
        "--experience",
        "3",
        "--guideline",
        "3",
    ]);
    assert!(out.status.success(), "rl-rollouts: {}", show(&out));
    let lines = std::fs::read_to_string(&rollouts).expect("rollouts");
    let n = lines.lines().count();
    assert_eq!(n % 6, 0);
    assert!(
        lines.contains("\"group_kind\":\"bank\""),
        "experience groups have a Bank half"
    );

    // rl-score with the judges of the demo config, both modes compared.
    let scored = tmp.path().join("scored.jsonl");
    let out = tmas(&[
        "rl-score",
        path_arg(&rollouts),
        "--config",
        DEMO,
        "--output",
        path_arg(&scored),
        "--compare",
    ]);
    assert!(out.status.success(), "rl-score: {}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("standard vs hybrid advantages, by _source"),
        "{stdout}"
    );
    let by_file = scored_lines(&scored);
    assert_eq!(by_file.len(), n);
    let novelty_asked = by_file
        .iter()
        .filter(|s| s["reward_kind"] == "novelty")
        .count();
    assert!(novelty_asked > 0, "{stdout}");

    // rl-serve gives the same numbers for the same batch.
    let (serve, addr) = start_serve(&["--config", DEMO]);
    let batch: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("rollout line"))
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let reply: serde_json::Value = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        let health = client
            .get(format!("http://{addr}/health"))
            .send()
            .await
            .expect("health");
        assert!(health.status().is_success());
        let bad = client
            .post(format!("http://{addr}/score"))
            .json(&serde_json::json!({"rollouts": [
                {"question_id": "q", "group_id": "g", "group_kind": "bank",
                 "_source": "experience", "ground_truth": "1", "response": "\\boxed{1}"}
            ]}))
            .send()
            .await
            .expect("bad batch");
        assert_eq!(bad.status().as_u16(), 422);
        let body: serde_json::Value = bad.json().await.expect("error body");
        assert!(
            body["error"].as_str().unwrap().contains("no Base rollout"),
            "{body}"
        );
        client
            .post(format!("http://{addr}/score"))
            .json(&serde_json::json!({ "rollouts": batch }))
            .send()
            .await
            .expect("score")
            .error_for_status()
            .expect("200")
            .json()
            .await
            .expect("scored json")
    });
    drop(serve);
    let served = reply["rollouts"].as_array().expect("rollouts");
    assert_eq!(served.len(), n);
    for (a, b) in by_file.iter().zip(served) {
        assert_eq!(a["group_id"], b["group_id"]);
        assert_eq!(a["correct"], b["correct"], "{a} vs {b}");
        assert_eq!(a["novel"], b["novel"], "{a} vs {b}");
        let close = |k: &str| (a[k].as_f64().unwrap() - b[k].as_f64().unwrap()).abs() < 1e-12;
        assert!(close("reward") && close("advantage"), "{a} vs {b}");
    }
}
