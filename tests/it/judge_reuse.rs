//! The LLM judge asks each distinct question of a problem R times and gives its verdicts
//! to every candidate that asks it (`judge.reuse`, on by default); a resumed run sends
//! none of those calls twice; `judge.reuse = false` asks R times per candidate.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::cli::*;

/// Per (problem, prompt, repeat): how many judge calls the store holds.
fn sends_per_question(run_dir: &Path) -> BTreeMap<(String, String, String), usize> {
    let mut out = BTreeMap::new();
    for (key, prompt) in judge_prompts(run_dir) {
        // PROBLEM/itT/judge/cC/vR/a0
        let parts: Vec<&str> = key.split('/').collect();
        let (problem, repeat) = (parts[0].to_string(), parts[4].to_string());
        *out.entry((problem, prompt, repeat)).or_default() += 1;
    }
    out
}

/// Verdicts stored with the candidates: R per candidate the judge was asked about.
fn verdicts(run_dir: &Path) -> usize {
    let conn = read_store(run_dir);
    let rows: Vec<String> = conn
        .prepare("SELECT llm_json FROM judge_verdicts")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.iter()
        .map(|j| {
            serde_json::from_str::<Vec<serde_json::Value>>(j)
                .unwrap()
                .len()
        })
        .sum()
}

#[test]
fn each_question_is_sent_r_times_and_its_verdicts_serve_every_asker() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 4, 3);

    let reused = tmp.path().join("reuse");
    ok(run_fresh(&config, &reused), "run with reuse");
    let sends = sends_per_question(&reused);
    assert!(
        sends.values().all(|&n| n == 1),
        "a question sent twice: {sends:?}"
    );
    let calls = judge_prompts(&reused).len();
    let given = verdicts(&reused);
    assert!(
        calls < given,
        "candidates of a problem agree, so verdicts ({given}) outnumber calls ({calls})"
    );
    let summary = ok(tmas(&["report", path_arg(&reused)]), "report");
    assert!(summary.contains("judge:"), "{summary}");

    let each = tmp.path().join("each");
    ok(
        tmas(&[
            "run",
            "-c",
            path_arg(&config),
            "--out",
            path_arg(&each),
            "--progress-every",
            "0",
            "--set",
            "judge.reuse=false",
        ]),
        "run without reuse",
    );
    assert_eq!(
        judge_prompts(&each).len(),
        verdicts(&each),
        "without reuse every verdict is a call of its own"
    );
    assert_eq!(verdicts(&each), given, "the same candidates were judged");
}

#[test]
fn a_resumed_run_sends_no_judge_question_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 6, 3);
    let dir = tmp.path().join("run");
    let mut child = spawn_fresh(&config, &dir);
    // Stop once some judge calls are stored, while others are still to come.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while judge_prompts_if_any(&dir) < 4 {
        assert!(std::time::Instant::now() < deadline, "no judge call stored");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before the kill"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    ok(
        tmas(&["run", "--resume", path_arg(&dir), "--progress-every", "0"]),
        "resume",
    );
    let sends = sends_per_question(&dir);
    let twice: Vec<_> = sends.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent again after the resume: {twice:?}");
}

/// Judge calls stored so far (0 while the store is being created).
fn judge_prompts_if_any(dir: &Path) -> usize {
    if !dir.join("run.sqlite").is_file() {
        return 0;
    }
    std::panic::catch_unwind(|| judge_prompts(dir).len()).unwrap_or(0)
}
