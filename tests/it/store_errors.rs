//! Bad conditions around the run store, through the `tmas` binary: a second process on
//! the same run directory, a store from a newer schema, a read-only directory, and a
//! resume with result-affecting config changes. Each gives a clear error and leaves what
//! is stored intact.

use crate::support::cli::*;

/// A finished small run on the embedded simulator.
fn finished_run(tmp: &std::path::Path) -> (std::path::PathBuf, String) {
    let config = write_config(tmp, "embedded-sim", 2, 2);
    let dir = tmp.join("run");
    ok(run_fresh(&config, &dir), "small run");
    let exported = export(&dir);
    (dir, exported)
}

#[test]
fn a_second_tmas_on_a_running_run_directory_is_refused_by_name() {
    let sim = Sim::start(0, 300);
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 2, 3);
    let dir = tmp.path().join("busy");
    let dir_s = dir.display().to_string();
    let mut first = spawn_fresh(&config, &dir);
    wait_for_stored(&dir, 1, &mut first);
    let second = tmas(&["run", "--resume", &dir_s, "--progress-every", "0"]);
    let stderr = text(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is in use by another tmas process")
            && stderr.contains(&format!("pid {}", first.id())),
        "{stderr}"
    );
    // The first run is unaffected and finishes.
    let output = first.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn a_store_written_by_a_newer_schema_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = finished_run(tmp.path());
    let db = dir.join("run.sqlite");
    let calls = stored_calls(&dir);
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let dir_s = dir.display().to_string();
    for args in [
        vec!["run", "--resume", &dir_s, "--progress-every", "0"],
        vec!["export", &dir_s],
    ] {
        let out = tmas(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("newer tmas") && stderr.contains("schema version 99"),
            "{args:?}: {stderr}"
        );
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 99, "the store was not rewritten");
    drop(conn);
    assert_eq!(stored_calls(&dir), calls);
}

#[test]
fn resume_with_result_affecting_changes_is_refused_naming_the_keys_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, exported) = finished_run(tmp.path());
    let dir_s = dir.display().to_string();
    let out = tmas(&[
        "run",
        "--resume",
        &dir_s,
        "--seed",
        "12",
        "--set",
        "method.epsilon=0.5",
        "--max-in-flight",
        "8",
        "--progress-every",
        "0",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("run.seed: 11 → 12"), "{stderr}");
    assert!(stderr.contains("method.epsilon"), "{stderr}");
    assert!(
        !stderr.contains("max_in_flight"),
        "an operational key is not a difference: {stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(export(&dir), exported, "a refused resume changes nothing");
    // Shrinking T is refused even with --force.
    let out = tmas(&["run", "--resume", &dir_s, "--iterations", "1", "--force"]);
    assert!(
        text(&out.stderr).contains("T can grow, not shrink"),
        "{}",
        text(&out.stderr)
    );
    // An operational change alone is accepted.
    ok(
        tmas(&[
            "run",
            "--resume",
            &dir_s,
            "--max-in-flight",
            "8",
            "--progress-every",
            "0",
        ]),
        "resume with an operational change",
    );
    assert_eq!(export(&dir), exported);
}

#[test]
fn a_run_directory_that_is_not_writable_gives_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 1, 1);
    let locked = tmp.path().join("read-only");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    // As root, permission bits do not apply; /proc is read-only for everyone.
    let dir = if std::fs::write(locked.join("probe"), b"x").is_ok() {
        std::path::PathBuf::from("/proc/tmas-store-test/run")
    } else {
        locked.join("run")
    };
    let out = run_fresh(&config, &dir);
    let stderr = text(&out.stderr);
    // A start-up check: exit 2, before anything is created.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&dir.display().to_string()) && stderr.contains("not writable"),
        "{stderr}"
    );
    assert!(!dir.exists());
}

#[test]
fn export_into_a_reader_that_stops_early_ends_quietly() {
    // `tmas export DIR | head -1`: the reader closes the pipe before the export is done.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, exported) = finished_run(tmp.path());
    assert!(!exported.is_empty());
    let mut child = std::process::Command::new(BIN)
        .args(["export", &dir.display().to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Closed before the export writes its first byte, so every write meets a closed pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.to_lowercase().contains("broken pipe"), "{stderr}");
}
