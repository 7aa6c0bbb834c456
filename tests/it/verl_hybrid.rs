//! Base and Bank rollouts of one question in one GRPO group, through the verl pieces of
//! `integrations/verl/` on CPU: their Python unit tests, then `hybrid_e2e.py`, which
//! feeds the experience rows of `tmas rl-data` (from a demo run) through the hybrid agent
//! loop with a `tmas sim-server` as the model, scores the groups with `tmas rl-serve`
//! under the hybrid and the standard reward, and computes verl 0.7.0's GRPO advantages
//! (re-implemented in `integrations/verl/tests/verl_grpo.py`). The script checks every
//! reward and advantage against the paper's formula and that correct Bank rollouts'
//! advantages rise under the hybrid reward and not under the standard one. Needs Python
//! (standard library only; `support::python`: skipped loudly without it, a failure under
//! `.ci/run`).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use arrow_array::{Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::support::cli::{Sim, output as tmas, path_arg, repo, show};
use crate::support::python::python_with;
use crate::support::rl::{DEMO, demo_run, start_serve};

fn strings<'a>(s: &'a StructArray, name: &str) -> &'a StringArray {
    s.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .unwrap_or_else(|| panic!("string field {name}"))
}

/// The experience rows of a `tmas rl-data` file as JSON lines in verl's row shape.
fn experience_rows(parquet: &Path, out: &Path) -> usize {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(parquet).expect("parquet"))
        .expect("parquet metadata")
        .build()
        .expect("reader");
    let mut file = File::create(out).expect("rows file");
    let mut n = 0;
    for batch in reader {
        let b: RecordBatch = batch.expect("batch");
        let col = |name: &str| b.column_by_name(name).unwrap_or_else(|| panic!("{name}"));
        let source = col("_source")
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let data_source = col("data_source")
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let prompt = col("prompt").as_any().downcast_ref::<ListArray>().unwrap();
        let reward = col("reward_model")
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let extra = col("extra_info")
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let index = extra
            .column_by_name("index")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .expect("index");
        for i in 0..b.num_rows() {
            if source.value(i) != "experience" {
                continue;
            }
            let messages = prompt.value(i);
            let messages = messages.as_any().downcast_ref::<StructArray>().unwrap();
            let row = serde_json::json!({
                "data_source": data_source.value(i),
                "prompt": (0..messages.len()).map(|m| serde_json::json!({
                    "role": strings(messages, "role").value(m),
                    "content": strings(messages, "content").value(m),
                })).collect::<Vec<_>>(),
                "reward_model": {
                    "ground_truth": strings(reward, "ground_truth").value(i),
                    "style": strings(reward, "style").value(i),
                },
                "extra_info": {
                    "split": strings(extra, "split").value(i),
                    "index": index.value(i),
                    "question_id": strings(extra, "question_id").value(i),
                    "question": strings(extra, "question").value(i),
                    "_source": "experience",
                    "bank_prompt": strings(extra, "bank_prompt").value(i),
                },
            });
            writeln!(file, "{row}").expect("row written");
            n += 1;
        }
    }
    n
}

#[test]
fn base_and_bank_rollouts_share_a_grpo_group_and_only_the_hybrid_reward_lifts_bank() {
    let Some(python) = python_with(&["asyncio", "json"], "the verl integration's CPU tests") else {
        return;
    };
    let verl = repo().join("integrations/verl");
    let unit = Command::new(&python)
        .current_dir(repo())
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "integrations/verl/tests",
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    assert!(unit.status.success(), "python unit tests: {}", show(&unit));

    let tmp = tempfile::tempdir().unwrap();
    let run = demo_run(tmp.path());
    let parquet = tmp.path().join("rl.parquet");
    let out = tmas(&[
        "rl-data",
        path_arg(&run),
        "--output",
        path_arg(&parquet),
        "--normal",
        "0",
        "--experience",
        "6",
        "--guideline",
        "0",
    ]);
    assert!(out.status.success(), "rl-data: {}", show(&out));
    let rows = tmp.path().join("rows.jsonl");
    let n = experience_rows(&parquet, &rows);
    assert!(n >= 3, "{n} experience rows: {}", show(&out));

    let sim = Sim::start(0, 0);
    // verl's GRPO normalises with the sample std: the service's own advantages then match.
    let (_serve, addr) = start_serve(&["--config", DEMO, "--std", "sample"]);
    let e2e = Command::new(&python)
        .current_dir(&verl)
        .args([
            "tests/hybrid_e2e.py",
            "--rows",
            path_arg(&rows),
            "--sim",
            &sim.root,
            "--n",
            "16",
            "--fraction",
            "0.5",
        ])
        .env("TMAS_RL_URL", format!("http://{addr}"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&e2e.stdout);
    println!("{stdout}");
    assert!(e2e.status.success(), "hybrid_e2e.py: {}", show(&e2e));
    let summary: serde_json::Value = serde_json::from_str(&stdout).expect("JSON summary");
    assert_eq!(summary["failures"], serde_json::json!([]), "{summary}");
    assert_eq!(summary["groups"].as_u64(), Some(n as u64));
    assert!(summary["groups_with_three_reward_levels"].as_u64().unwrap() > 0);
}
