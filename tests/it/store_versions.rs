//! This build's store schema (version 5) against stores written by versions 3 and 4: every
//! read-only command (`tmas export`, `tmas report`, `tmas judge --run`, `tmas rl-data`)
//! gives the same output from either, an older store resumes under this build replaying
//! every stored call (a version-3 store's prompts were chunked whole, so their ids differ
//! and they are recognised by text), and once migrated it gives the same outputs again.

use std::path::Path;

use crate::support::cli::*;
use crate::support::store_v3;

/// Copies a run directory (files only; a run directory has no links).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn schema_version(run_dir: &Path) -> i64 {
    rusqlite::Connection::open(run_dir.join("run.sqlite"))
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Done problems whose record is stored without its calls' texts.
fn lean_records(run_dir: &Path) -> i64 {
    rusqlite::Connection::open(run_dir.join("run.sqlite"))
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM problems WHERE record_texts IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// What each read-only command prints or writes for a run. Each store is read from a copy
/// at the same path, so that paths the outputs quote (`rl-data` rows name their run, and
/// `report` its charts) are the same.
fn outputs(run_dir: &Path, scratch: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let copy = scratch.join("run");
    let _ = std::fs::remove_dir_all(&copy);
    copy_dir(run_dir, &copy);
    let dir = path_arg(&copy);
    let run = |what: &'static str, args: &[&str]| {
        let out = tmas(args);
        assert!(out.status.success(), "{what} on {dir}: {}", show(&out));
        (what, out.stdout)
    };
    let parquet = scratch.join("rl.parquet");
    let mut got = vec![
        run("export jsonl", &["export", dir]),
        run("export csv", &["export", dir, "--format", "csv"]),
        run("report", &["report", dir]),
        run("judge --run", &["judge", "--run", dir]),
        run(
            "rl-data",
            &[
                "rl-data",
                dir,
                "--out",
                path_arg(&parquet),
                "--normal",
                "2",
                "--experience",
                "2",
                "--guideline",
                "2",
            ],
        ),
    ];
    got.push((
        "rejudged.jsonl",
        std::fs::read(copy.join("rejudged.jsonl")).unwrap(),
    ));
    got.push(("rl-data parquet", std::fs::read(&parquet).unwrap()));
    got
}

fn assert_same_outputs(a: &Path, b: &Path, scratch: &Path, when: &str) {
    for ((what, x), (_, y)) in outputs(a, scratch).into_iter().zip(outputs(b, scratch)) {
        assert!(
            x == y,
            "{when}: `{what}` differs:\n--- this build's store\n{}\n--- the older store\n{}",
            String::from_utf8_lossy(&x),
            String::from_utf8_lossy(&y)
        );
    }
}

fn sent_and_replayed(stdout: &str) -> (u64, u64) {
    let tail = stdout
        .split(" s (")
        .nth(1)
        .unwrap_or_else(|| panic!("no call counts in {stdout}"));
    let mut numbers = tail
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>().unwrap());
    (numbers.next().unwrap(), numbers.next().unwrap())
}

#[test]
fn a_version_3_store_reads_resumes_and_migrates_to_the_same_results_as_this_build() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 3, 2);
    let v4 = tmp.path().join("v4");
    let v3 = tmp.path().join("v3");
    ok(run_fresh(&config, &v4), "2-iteration run");
    assert_eq!(lean_records(&v4), 3, "every record stored lean");
    copy_dir(&v4, &v3);
    store_v3::downgrade(&v3);
    assert_eq!(schema_version(&v3), 3);

    // Read-only commands do not migrate, and read either store the same.
    assert_same_outputs(&v4, &v3, tmp.path(), "before resuming");
    assert_eq!(
        schema_version(&v3),
        3,
        "read-only commands left version 3 alone"
    );

    // Extending both runs: every stored call is replayed from either store (version 3's
    // prompt ids are those of whole-text chunking), and the new iteration is the same.
    let stored = stored_calls(&v3);
    let mut counts = Vec::new();
    for dir in [&v4, &v3] {
        let out = ok(
            tmas(&[
                "run",
                "--resume",
                path_arg(dir),
                "--iterations",
                "3",
                "--progress-every",
                "0",
            ]),
            "extension to 3 iterations",
        );
        counts.push(sent_and_replayed(&out));
    }
    assert_eq!(counts[0], counts[1], "the same calls sent and replayed");
    assert_eq!(counts[1].1, stored, "every stored call replayed");
    assert_eq!(schema_version(&v3), 5, "resuming migrated the store");
    assert_eq!(lean_records(&v3), 3);
    assert_same_outputs(&v4, &v3, tmp.path(), "after resuming");
    for file in ["results.jsonl", "pass_at_1.csv"] {
        assert_eq!(
            std::fs::read(v4.join(file)).unwrap(),
            std::fs::read(v3.join(file)).unwrap(),
            "{file}"
        );
    }
}

/// A finished version-3 run resumed with the same T sends and replays nothing, keeps its
/// files byte for byte, and is left migrated with lean records that read back whole.
#[test]
fn a_finished_version_3_run_resumes_to_nothing_and_keeps_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let run = tmp.path().join("run");
    ok(run_fresh(&config, &run), "1-iteration run");
    store_v3::downgrade(&run);
    let before: Vec<Vec<u8>> = ["results.jsonl", "pass_at_1.csv"]
        .iter()
        .map(|f| std::fs::read(run.join(f)).unwrap())
        .collect();
    let problems: Vec<(std::ffi::OsString, Vec<u8>)> = std::fs::read_dir(run.join("problems"))
        .unwrap()
        .flatten()
        .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
        .collect();
    let out = ok(
        tmas(&["run", "--resume", path_arg(&run), "--progress-every", "0"]),
        "resume of a finished version-3 run",
    );
    assert_eq!(sent_and_replayed(&out), (0, 0), "{out}");
    assert_eq!(schema_version(&run), 5);
    assert_eq!(lean_records(&run), 2);
    for (f, bytes) in ["results.jsonl", "pass_at_1.csv"].iter().zip(&before) {
        assert_eq!(&std::fs::read(run.join(f)).unwrap(), bytes, "{f}");
    }
    for (name, bytes) in &problems {
        assert_eq!(
            &std::fs::read(run.join("problems").join(name)).unwrap(),
            bytes,
            "{name:?}"
        );
    }
    // Damaged files are restored from the lean records, byte for byte.
    let (name, bytes) = &problems[0];
    std::fs::write(run.join("problems").join(name), b"{}").unwrap();
    std::fs::remove_file(run.join("results.jsonl")).unwrap();
    ok(
        tmas(&["run", "--resume", path_arg(&run), "--progress-every", "0"]),
        "resume of the damaged run",
    );
    assert_eq!(
        &std::fs::read(run.join("problems").join(name)).unwrap(),
        bytes
    );
    assert_eq!(std::fs::read(run.join("results.jsonl")).unwrap(), before[0]);
}

/// A version-4 store (no `calls.tokens_estimated`) reads as this build's, resumes
/// replaying every stored call, and is migrated with its calls' counts marked as the
/// server's.
#[test]
fn a_version_4_store_reads_resumes_and_migrates_to_the_same_results_as_version_5() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let v5 = tmp.path().join("v5");
    let v4 = tmp.path().join("v4");
    ok(run_fresh(&config, &v5), "1-iteration run");
    copy_dir(&v5, &v4);
    store_v3::downgrade_to_v4(&v4);
    assert_eq!(schema_version(&v4), 4);
    assert_same_outputs(&v5, &v4, tmp.path(), "before resuming");
    assert_eq!(
        schema_version(&v4),
        4,
        "read-only commands left version 4 alone"
    );
    let stored = stored_calls(&v4);
    let mut counts = Vec::new();
    for dir in [&v5, &v4] {
        let out = ok(
            tmas(&[
                "run",
                "--resume",
                path_arg(dir),
                "--iterations",
                "2",
                "--progress-every",
                "0",
            ]),
            "extension to 2 iterations",
        );
        counts.push(sent_and_replayed(&out));
    }
    assert_eq!(counts[0], counts[1], "the same calls sent and replayed");
    assert_eq!(counts[1].1, stored, "every stored call replayed");
    assert_eq!(schema_version(&v4), 5, "resuming migrated the store");
    let estimated: i64 = rusqlite::Connection::open(v4.join("run.sqlite"))
        .unwrap()
        .query_row("SELECT SUM(tokens_estimated) FROM calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(estimated, 0, "the simulator sends usage: nothing estimated");
    assert_same_outputs(&v5, &v4, tmp.path(), "after resuming");
}
