//! `tmas judge` as a process: a single pair, a labelled pairs file (verdict JSONL and the
//! per-type report), bad input, and `--llm` against the embedded simulator (whose judge
//! compares answers textually, so `1/2` vs `0.5` is a rule/LLM disagreement).

use std::path::Path;
use std::process::Output;

use crate::support::cli::command;

fn tmas(args: &[&str], dir: &Path) -> Output {
    command(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .expect("tmas runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const PAIRS: &str = r#"{"reference":"\\frac{1}{2}","candidate":"0.5","equivalent":true,"answer_type":"fraction"}
{"reference":"3","candidate":"4","equivalent":false,"answer_type":"integer"}

{"reference":"\\{1,2\\}","candidate":"2, 1","equivalent":true,"answer_type":"set"}
{"reference":"odd $n$","candidate":"n is even","equivalent":false,"answer_type":"prose"}
{"reference":"(1,2)","candidate":"(2,1)","equivalent":true,"answer_type":"tuple"}
"#;

const SIM_CONFIG: &str = r#"
[judge]
repeats = 2

[endpoints.sim]
base_url = "embedded-sim"
model = "tmas-sim"
max_in_flight = 16
request_timeout_secs = 120
stream_idle_timeout_secs = 60
context_window = 131072

[simulator]
seed = 7
model = "tmas-sim"
latency = "fixed:1ms"
"#;

#[test]
fn single_pair_prints_verdict_reason_and_normalized_forms() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = tmas(
        &[
            "judge",
            "--reference",
            "$\\frac{1}{7}$",
            "--answer",
            "0.\\overline{142857}.",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("verdict: equivalent"), "{text}");
    assert!(text.contains("reason: numbers_equal"), "{text}");
    assert!(
        text.contains("reference (normalized): \\frac{1}{7}"),
        "{text}"
    );
    assert!(
        text.contains("answer (normalized): 0.\\overline{142857}"),
        "{text}"
    );

    let rounded = tmas(
        &["judge", "--reference", "1/7", "--answer", "0.142857"],
        dir.path(),
    );
    assert!(stdout(&rounded).contains("verdict: not equivalent"));
}

#[test]
fn hostile_input_is_undecided_not_a_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let deep = "{".repeat(3_000) + "1";
    let nested = "\\sqrt{".repeat(200) + "2" + &"}".repeat(200);
    for (reference, answer) in [
        ("{", deep.as_str()),
        ("1", nested.as_str()),
        ("\\foo{", "}"),
    ] {
        let out = tmas(
            &["judge", "--reference", reference, "--answer", answer],
            dir.path(),
        );
        assert!(out.status.success(), "{out:?}");
        let text = stdout(&out);
        assert!(text.contains("verdict: undecided"), "{text}");
        assert!(text.contains("reason: needs_llm"), "{text}");
    }
}

#[test]
fn pairs_file_writes_verdicts_and_scores_by_type() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("pairs.jsonl"), PAIRS).expect("write pairs");
    let out = tmas(&["judge", "--pairs", "pairs.jsonl"], dir.path());
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("5 pairs judged"), "{text}");
    // The swapped tuple is labelled (wrongly) equivalent: one false negative.
    assert!(text.contains("misses: 1"), "{text}");
    assert!(text.contains("FN line 6 [tuple]"), "{text}");
    let tuple_row = text
        .lines()
        .find(|l| l.starts_with("tuple"))
        .expect("tuple row");
    assert!(tuple_row.contains("0.0%"), "{tuple_row}");
    let all_row = text
        .lines()
        .find(|l| l.starts_with("all"))
        .expect("all row");
    assert!(all_row.contains("80.0%"), "{all_row}");

    let verdicts = std::fs::read_to_string(dir.path().join("pairs.verdicts.jsonl"))
        .expect("default verdict file next to the pairs");
    let lines: Vec<serde_json::Value> = verdicts
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["verdict"]["outcome"], "equivalent");
    assert_eq!(lines[1]["verdict"]["outcome"], "not_equivalent");
    assert_eq!(lines[2]["line"], 4, "blank lines keep file line numbers");
    assert_eq!(lines[3]["verdict"]["outcome"], "undecided");
}

#[test]
fn bad_pairs_file_names_the_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"reference\":\"1\",\"candidate\":\"1\"}\n{\"reference\":\"1\",\"candidate\":2}\n",
    )
    .expect("write");
    let out = tmas(&["judge", "--pairs", "bad.jsonl"], dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:2: field \"candidate\""), "{err}");
    let missing = tmas(&["judge", "--pairs", "missing.jsonl"], dir.path());
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("missing.jsonl"));
}

#[test]
fn llm_flag_asks_the_simulated_judge_and_reports_disagreements() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("sim.toml"), SIM_CONFIG).expect("write config");
    std::fs::write(dir.path().join("pairs.jsonl"), PAIRS).expect("write pairs");
    let out = tmas(
        &[
            "judge",
            "--pairs",
            "pairs.jsonl",
            "--llm",
            "--config",
            "sim.toml",
            "--output",
            "v.jsonl",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("LLM judge: 5 of 5 pairs got a parseable verdict"),
        "{text}"
    );
    // The simulator's judge compares texts: `\frac{1}{2}` vs `0.5` is a "no" against the
    // rules' "equivalent".
    assert!(text.contains("rule/LLM disagreements:"), "{text}");
    assert!(text.contains("\"\\\\frac{1}{2}\" vs \"0.5\""), "{text}");
    let verdicts = std::fs::read_to_string(dir.path().join("v.jsonl")).expect("verdicts");
    let first: serde_json::Value =
        serde_json::from_str(verdicts.lines().next().expect("a line")).expect("JSON");
    assert_eq!(first["llm"], serde_json::json!([false, false]));
    assert_eq!(first["llm_disagrees"], true);

    let single = tmas(
        &[
            "judge",
            "--reference",
            "3",
            "--answer",
            "3",
            "--llm",
            "-c",
            "sim.toml",
        ],
        dir.path(),
    );
    assert!(single.status.success(), "{single:?}");
    let text = stdout(&single);
    assert!(text.contains("llm judge (2 runs): yes yes"), "{text}");
    assert!(!text.contains("disagreement"), "{text}");
}

#[test]
fn llm_without_config_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = tmas(
        &["judge", "--reference", "1", "--answer", "1", "--llm"],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--config"));
}

/// `tmas judge --run DIR` on a finished proof-mode run: every proof is graded again by
/// the proof grader (R from the run's config), the new table matches the stored one on
/// the same deterministic simulator, and the verdicts are written beside the run.
#[test]
fn judging_a_proof_run_again_uses_the_proof_grader() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/proof-sample.jsonl");
    let config = format!(
        "[run]\nseed = 3\ndataset = {data:?}\nlimit = 2\nmax_concurrent_problems = 2\n\n\
         [method]\nn = 2\nm = 1\niterations = 1\nno_proof = false\n{SIM_CONFIG}",
        data = data.display().to_string()
    );
    std::fs::write(dir.path().join("proof.toml"), config).expect("write config");
    let run = tmas(
        &[
            "run",
            "-c",
            "proof.toml",
            "--out",
            "run",
            "--progress-every",
            "0",
        ],
        dir.path(),
    );
    assert!(run.status.success(), "{run:?}");
    let out = tmas(&["judge", "--run", "run"], dir.path());
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("judged 2 finished problems"), "{text}");
    assert!(text.contains("proof grader"), "{text}");
    // 2 problems × 1 iteration × N = 2 candidates × R = 2.
    assert!(text.contains("8 judge calls, none failed"), "{text}");
    assert!(text.contains("0 of 4 candidates changed score"), "{text}");
    let verdicts =
        std::fs::read_to_string(dir.path().join("run/rejudged.jsonl")).expect("verdicts");
    assert_eq!(verdicts.lines().count(), 2);
    for line in verdicts.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
        for j in v["judgments"][0].as_array().expect("candidates") {
            assert_eq!(j["grades"].as_array().map(Vec::len), Some(2), "{line}");
        }
    }
    // A directory that is not a run is an error naming it.
    let bad = tmas(&["judge", "--run", "nowhere"], dir.path());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nowhere"));
}
