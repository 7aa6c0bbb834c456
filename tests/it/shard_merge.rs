//! Sharded runs: `tmas run --shard I/N` processes side by side, one of them SIGKILLed
//! mid-way and resumed, then `tmas merge`; the merged run equals the unsharded run with
//! the same seed (results, Pass@1 table, export, report), whatever N. And what merge
//! refuses: a shard given twice, a missing shard, an unfinished one, shards of another
//! run; `--partial` merges what is there, marked partial.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli::*;

/// `tmas run -c CONFIG --out DIR --progress-every 0 --shard SHARD` in the background.
fn spawn_shard(config: &Path, dir: &Path, shard: &str) -> std::process::Child {
    spawn_tmas(&[
        "run",
        "-c",
        path_arg(config),
        "--out",
        path_arg(dir),
        "--progress-every",
        "0",
        "--shard",
        shard,
    ])
}

fn merge(shards: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(|s| path_arg(s)));
    args.extend(["--out", path_arg(out)]);
    args.extend(extra);
    tmas(&args)
}

/// What must not depend on N: every result line, the export and the Pass@1 table.
fn results(dir: &Path) -> (String, String, String) {
    let results = std::fs::read_to_string(dir.join("results.jsonl")).expect("results.jsonl");
    (results, export(dir), export_csv(dir))
}

/// Runs `count` shards side by side into `root/shard-I`, each to the end; with `kill`, the
/// first is SIGKILLed once it stored some calls and then resumed.
fn run_shards(config: &Path, root: &Path, count: u32, kill: bool) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = (0..count)
        .map(|i| root.join(format!("shard-{i}")))
        .collect();
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| spawn_shard(config, dir, &format!("{i}/{count}")))
        .collect();
    if kill {
        wait_for_stored(&dirs[0], 20, &mut children[0]);
        signal(&children[0], libc::SIGKILL);
    }
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("shard ends");
        if kill && i == 0 {
            assert!(!out.status.success(), "the killed shard did not finish");
            continue;
        }
        assert!(out.status.success(), "shard {i}/{count}: {}", show(&out));
    }
    if kill {
        ok(
            tmas(&[
                "run",
                "--resume",
                path_arg(&dirs[0]),
                "--progress-every",
                "0",
            ]),
            "resuming the killed shard",
        );
    }
    dirs
}

#[test]
fn merged_shards_equal_the_unsharded_run_whatever_n() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 8, 2);
    let whole = tmp.path().join("whole");
    ok(run_fresh(&config, &whole), "the unsharded run");
    let expected = results(&whole);
    let report = |dir: &Path| {
        ok(tmas(&["report", path_arg(dir)]), "tmas report")
            .replace(&dir.display().to_string(), "DIR")
    };
    let expected_report = report(&whole);

    for (count, kill) in [(3, true), (1, false), (7, false)] {
        let root = tmp.path().join(format!("n{count}"));
        let shards = run_shards(&config, &root, count, kill);
        if count == 1 {
            // A shard written by a build without the additive `problem_traces` table.
            rusqlite::Connection::open(shards[0].join("run.sqlite"))
                .and_then(|c| c.execute_batch("DROP TABLE problem_traces"))
                .expect("table dropped");
        }
        let merged = root.join("merged");
        let out = merge(&shards, &merged, &[]);
        assert_eq!(out.status.code(), Some(0), "N = {count}: {}", show(&out));
        assert_eq!(
            results(&merged),
            expected,
            "N = {count}: merged ≠ unsharded"
        );
        assert_eq!(report(&merged), expected_report, "N = {count}: report");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(merged.join("run.json")).unwrap()).unwrap();
        assert_eq!(summary["status"], "completed", "{summary}");
        assert_eq!(
            summary["merge"]["shards"].as_array().unwrap().len(),
            count as usize
        );

        // Idempotent: merging again into the same directory gives the same run.
        let again = merge(&shards, &merged, &[]);
        assert_eq!(again.status.code(), Some(0), "{}", show(&again));
        assert_eq!(results(&merged), expected, "N = {count}: merged twice");
    }

    // The merged run is a run: a resume with more iterations continues it.
    let merged = tmp.path().join("n3").join("merged");
    ok(
        tmas(&[
            "run",
            "--resume",
            path_arg(&merged),
            "--iterations",
            "3",
            "--progress-every",
            "0",
        ]),
        "resuming the merged run to T = 3",
    );
}

#[test]
fn merge_refuses_what_is_not_one_complete_run_and_partial_merges_what_is_there() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 6, 1);
    let shards = run_shards(&config, &tmp.path().join("a"), 3, false);
    let out = tmp.path().join("merged");

    // A shard twice, and one missing: both named, nothing written.
    let twice = merge(
        &[shards[0].clone(), shards[0].clone(), shards[1].clone()],
        &out,
        &[],
    );
    assert_eq!(twice.status.code(), Some(2), "{}", show(&twice));
    assert!(
        text(&twice.stderr).contains("shard 0/3 given 2 times"),
        "{}",
        show(&twice)
    );
    let missing = merge(&shards[..2], &out, &[]);
    assert_eq!(missing.status.code(), Some(2), "{}", show(&missing));
    let stderr = text(&missing.stderr);
    assert!(
        stderr.contains("missing shards: 2/3") && stderr.contains("--partial"),
        "{stderr}"
    );
    assert!(!out.exists(), "a refused merge wrote {}", out.display());

    // Another run's shard (another seed): its config differs, named by key.
    let other_config = tmp.path().join("other.toml");
    std::fs::write(
        &other_config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("seed = 11", "seed = 12"),
    )
    .unwrap();
    let other = tmp.path().join("other-2");
    ok(
        tmas(&[
            "run",
            "-c",
            path_arg(&other_config),
            "--out",
            path_arg(&other),
            "--progress-every",
            "0",
            "--shard",
            "2/3",
        ]),
        "the other run's shard",
    );
    let mixed = merge(&[shards[0].clone(), shards[1].clone(), other], &out, &[]);
    assert_eq!(mixed.status.code(), Some(2), "{}", show(&mixed));
    assert!(text(&mixed.stderr).contains("run.seed"), "{}", show(&mixed));

    // --partial: merged and marked; its final Pass@1 stays null.
    let partial = merge(&shards[..2], &out, &["--partial"]);
    assert_eq!(partial.status.code(), Some(3), "{}", show(&partial));
    assert!(
        text(&partial.stdout).contains("partial: shards 2/3 missing"),
        "{}",
        show(&partial)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "partial", "{summary}");
    assert!(summary["final_pass_at_1"].is_null(), "{summary}");
    assert_eq!(summary["merge"]["missing"][0], "2/3", "{summary}");

    // Merging never modifies a shard, and never writes into a directory that holds
    // something else.
    let unrelated = tmp.path().join("unrelated");
    std::fs::create_dir(&unrelated).unwrap();
    std::fs::write(unrelated.join("notes.txt"), "mine").unwrap();
    let refused = merge(&shards, &unrelated, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", show(&refused));
    assert!(
        text(&refused.stderr).contains("is not empty"),
        "{}",
        show(&refused)
    );
}

#[test]
fn shard_auto_reads_the_cluster_environment_and_says_which() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 4, 1);
    let dir = tmp.path().join("slurm");
    let out = command(&[
        "run",
        "-c",
        path_arg(&config),
        "--out",
        path_arg(&dir),
        "--progress-every",
        "0",
        "--shard",
        "auto",
    ])
    .env("RUST_LOG", "warn")
    .env("SLURM_ARRAY_TASK_ID", "11")
    .env("SLURM_ARRAY_TASK_MIN", "10")
    .env("SLURM_ARRAY_TASK_COUNT", "2")
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("shard 1/2, from Slurm"),
        "{}",
        show(&out)
    );
    let config_text = std::fs::read_to_string(dir.join("run.json"))
        .map(|_| ())
        .ok();
    assert!(config_text.is_some());

    let none = command(&[
        "run",
        "-c",
        path_arg(&config),
        "--out",
        path_arg(&tmp.path().join("none")),
        "--shard",
        "auto",
    ])
    .env("RUST_LOG", "warn")
    .env_remove("SLURM_ARRAY_TASK_ID")
    .env_remove("JOB_COMPLETION_INDEX")
    .output()
    .unwrap();
    assert_eq!(none.status.code(), Some(2), "{}", show(&none));
    assert!(
        text(&none.stderr).contains("neither a Slurm array task"),
        "{}",
        show(&none)
    );
}

#[test]
fn experiment_shards_merge_into_the_same_comparison() {
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), "embedded-sim", 6, 2);
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        r#"
name = "sharded"
config = "config.toml"
report_iterations = [0, 1]

[[variant]]
name = "TMAS"
set = { "method.name" = "tmas" }

[[variant]]
name = "MV"
set = { "method.name" = "majority-vote", "method.k" = 4, "method.iterations" = 1 }
"#,
    )
    .unwrap();
    let experiment = |out: &Path, shard: Option<&str>| {
        let mut args = vec![
            "experiment",
            path_arg(&exp),
            "--out",
            path_arg(out),
            "--progress-every",
            "0",
        ];
        if let Some(shard) = shard {
            args.extend(["--shard", shard]);
        }
        ok(tmas(&args), "tmas experiment")
    };
    let whole = tmp.path().join("whole");
    experiment(&whole, None);
    let shards: Vec<PathBuf> = (0..2)
        .map(|i| {
            let dir = tmp.path().join(format!("shard-{i}"));
            experiment(&dir, Some(&format!("{i}/2")));
            dir
        })
        .collect();
    let merged = tmp.path().join("merged");
    let out = merge(&shards, &merged, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let read = |dir: &Path, f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    for f in ["comparison.csv", "comparison.md"] {
        assert_eq!(
            read(&merged, f),
            read(&whole, f),
            "{f}: merged shards ≠ one process"
        );
    }
    for variant in ["TMAS", "MV"] {
        assert_eq!(
            read(&merged.join(variant), "results.jsonl"),
            read(&whole.join(variant), "results.jsonl"),
            "{variant}"
        );
    }
}
