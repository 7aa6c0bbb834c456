//! Commands that write a directory check before they create it: `tmas experiment`
//! checks every variant (config, dataset, endpoints) and says `nothing was created`, so
//! the corrected command is not refused; `tmas select-hard` keeps its sampling run beside
//! its output, not in the working directory; a non-empty directory that holds no run is
//! refused as `--out`; a lock file left by a process that ended is taken over with a
//! note.

use std::path::Path;

use crate::support::cli::*;

/// An experiment over `config.toml` in `dir` with a variant per `(name, overrides)`.
fn write_experiment(dir: &Path, variants: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = String::from("name = \"checked\"\nconfig = \"config.toml\"\n");
    for (name, set) in variants {
        text.push_str(&format!(
            "\n[[variant]]\nname = \"{name}\"\nset = {{ {set} }}\n"
        ));
    }
    let path = dir.join("exp.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn experiment(exp: &Path, out: &Path) -> std::process::Output {
    tmas(&[
        "experiment",
        path_arg(exp),
        "--out",
        path_arg(out),
        "--progress-every",
        "0",
    ])
}

#[test]
fn an_experiment_with_a_bad_variant_creates_nothing_and_the_corrected_one_runs() {
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), "embedded-sim", 2, 1);
    let out = tmp.path().join("out");
    let missing = tmp.path().join("missing.jsonl");
    let bad = write_experiment(
        tmp.path(),
        &[
            ("good", "\"method.name\" = \"tmas\""),
            (
                "no-data",
                &format!("\"run.dataset\" = {:?}", missing.display().to_string()),
            ),
        ],
    );
    let o = experiment(&bad, &out);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr.contains("variant no-data:"), "{stderr}");
    assert!(stderr.contains("missing.jsonl"), "{stderr}");
    assert!(stderr.contains("nothing was created"), "{stderr}");
    assert!(!out.exists(), "nothing created: {}", show(&o));

    let fixed = write_experiment(tmp.path(), &[("good", "\"method.name\" = \"tmas\"")]);
    ok(experiment(&fixed, &out), "the corrected experiment");
    assert!(out.join("experiment.json").is_file());
}

#[test]
fn an_experiment_whose_endpoint_does_not_answer_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    write_config(tmp.path(), &format!("http://127.0.0.1:{closed}"), 2, 1);
    let exp = write_experiment(tmp.path(), &[("a", "\"method.name\" = \"tmas\"")]);
    let out = tmp.path().join("out");
    let o = tmas(&[
        "experiment",
        path_arg(&exp),
        "--out",
        path_arg(&out),
        "--progress-every",
        "0",
        "--set",
        "resilience.preflight_wait_secs=1",
    ]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(stderr.contains("nothing was created"), "{stderr}");
    assert!(!out.exists(), "nothing created: {}", show(&o));
}

#[test]
fn a_non_empty_directory_without_a_run_is_refused_as_out() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let taken = tmp.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();

    let o = run_fresh(&config, &taken);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr.contains("is not empty (notes.txt) and holds no tmas run"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was created"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&taken).unwrap().collect();
    assert_eq!(left.len(), 1, "the directory is as it was");

    let exp = write_experiment(tmp.path(), &[("a", "\"method.name\" = \"tmas\"")]);
    let o = experiment(&exp, &taken);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("is not empty"), "{}", show(&o));

    // An empty directory is fine.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(run_fresh(&config, &empty), "a run into an empty directory");
}

#[test]
fn select_hard_keeps_its_sampling_run_beside_its_output_not_in_the_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let work = tmp.path().join("work");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let out = data.join("hard.jsonl");
    let o = command(&[
        "select-hard",
        "-c",
        path_arg(&config),
        "-k",
        "2",
        "--take",
        "1",
        "--output",
        path_arg(&out),
    ])
    .current_dir(&work)
    .env("RUST_LOG", "warn")
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let run = data.join("hard.sampling-run");
    assert!(run.join("run.sqlite").is_file(), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(path_arg(&run)),
        "named: {}",
        show(&o)
    );
    let in_work: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
    assert!(
        in_work.is_empty(),
        "nothing in the working directory: {in_work:?}"
    );

    // An output that cannot be written is refused before any sample is drawn.
    let nowhere = tmp.path().join("no/such/dir/hard.jsonl");
    let o = tmas(&[
        "select-hard",
        "-c",
        path_arg(&config),
        "-k",
        "2",
        "--output",
        path_arg(&nowhere),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("does not exist"), "{}", show(&o));
    assert!(!tmp.path().join("no").exists());
}

#[test]
fn a_lock_left_by_a_process_that_ended_is_taken_over_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 1);
    let dir = tmp.path().join("run");
    ok(run_fresh(&config, &dir), "a run");
    let mut ended = std::process::Command::new("true").spawn().unwrap();
    let pid = ended.id();
    ended.wait().unwrap();
    std::fs::write(dir.join(".tmas.lock"), pid.to_string()).unwrap();
    let o = command(&[
        "run",
        "--resume",
        path_arg(&dir),
        "--progress-every",
        "0",
        "--iterations",
        "2",
    ])
    .env("RUST_LOG", "info")
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("took over the lock") && stderr.contains(&format!("pid {pid}")),
        "{stderr}"
    );
}
