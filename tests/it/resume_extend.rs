//! Extending a finished run: 3 iterations resumed with `--iterations 5` equals a fresh
//! 5-iteration run with the same seed, and only the new iterations' calls are sent. Also:
//! a killed-and-restarted simulator process mid-run loses no problem.

use crate::support::cli::*;

fn sent_and_replayed(stdout: &str) -> (u64, u64) {
    // "… in 1.2 s (N calls sent, M replayed from the store); …"
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
fn extending_a_finished_run_to_more_iterations_equals_a_fresh_longer_run() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 3, 3);
    let config_s = config.display().to_string();
    let short = tmp.path().join("short");
    let long = tmp.path().join("long");
    let short_s = short.display().to_string();
    ok(run_fresh(&config, &short), "3-iteration run");
    let stored_before = stored_calls(&short);
    let out = ok(
        tmas(&[
            "run",
            "--resume",
            &short_s,
            "--iterations",
            "5",
            "--progress-every",
            "0",
        ]),
        "extension to 5 iterations",
    );
    let (sent, replayed) = sent_and_replayed(&out);
    ok(
        tmas(&[
            "run",
            "-c",
            &config_s,
            "--iterations",
            "5",
            "--out",
            &long.display().to_string(),
            "--progress-every",
            "0",
        ]),
        "fresh 5-iteration run",
    );
    assert_eq!(
        export(&short),
        export(&long),
        "extended run differs from a fresh one"
    );
    assert_eq!(export_csv(&short), export_csv(&long));
    assert_eq!(export_csv(&short).lines().count(), 1 + 5);
    // The first three iterations' calls came from the store. (Judge calls of iterations
    // 0-2 replay too; only iterations 3-4 and their judging are new.)
    assert_eq!(replayed, stored_before, "{out}");
    assert_eq!(sent, stored_calls(&long) - stored_before, "{out}");

    // Resuming a finished run with the same T sends nothing.
    let out = ok(
        tmas(&["run", "--resume", &short_s, "--progress-every", "0"]),
        "resume of a finished run",
    );
    assert_eq!(sent_and_replayed(&out), (0, 0), "{out}");
}

#[test]
fn a_simulator_killed_and_restarted_mid_run_loses_no_problem() {
    let mut sim = Sim::start(0, 100);
    let port = sim.port;
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), &sim.root, 4, 3);
    let base = baseline(&sim, &config, &tmp.path().join("uninterrupted"));

    let dir = tmp.path().join("restarted");
    let mut child = spawn_fresh(&config, &dir);
    wait_for_stored(&dir, base.requests / 3, &mut child);
    sim.kill();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _sim = Sim::start(port, 100);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["problems_done"], 4, "{summary}");
    assert_eq!(summary["problems_failed"], serde_json::json!([]));
    // Replies are seeded by call identity, so the restarted simulator answers re-sent
    // calls as the first one would have: the results match the uninterrupted run.
    assert_eq!(export(&dir), base.export);
}

/// Every file under `dir`, by path relative to it.
fn files_under(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// `problems/<id>.json` and the `banks/` files are not synced (the run store holds the
/// same content): what a power cut can leave of them (empty, garbled, missing) is restored
/// byte for byte by resuming, without a call.
#[test]
fn resuming_restores_damaged_problem_and_bank_files_from_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 3, 2);
    let run = tmp.path().join("run");
    let run_s = run.display().to_string();
    ok(run_fresh(&config, &run), "2-iteration run");
    let problems = files_under(&run.join("problems"));
    let banks = files_under(&run.join("banks"));
    assert_eq!(problems.len(), 3, "{:?}", problems.keys());
    // 3 problems × 2 banks × versions 0..=2.
    assert_eq!(banks.len(), 3 * 2 * 3, "{:?}", banks.keys());

    let mut bank_files = banks.keys();
    let emptied = run.join("banks").join(bank_files.next().unwrap());
    let removed = run.join("banks").join(bank_files.next().unwrap());
    std::fs::write(&emptied, b"").unwrap();
    std::fs::remove_file(&removed).unwrap();
    let (problem_file, bytes) = problems.iter().next().unwrap();
    let mut garbled = bytes.clone();
    garbled[1] ^= 0x20;
    std::fs::write(run.join("problems").join(problem_file), garbled).unwrap();

    let out = ok(
        tmas(&["run", "--resume", &run_s, "--progress-every", "0"]),
        "resume of a damaged finished run",
    );
    assert_eq!(sent_and_replayed(&out), (0, 0), "{out}");
    assert_eq!(files_under(&run.join("problems")), problems);
    assert_eq!(files_under(&run.join("banks")), banks);
}
