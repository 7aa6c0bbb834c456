//! The command line's vocabulary as a user meets it: an old flag spelling still works and
//! names its replacement on stderr; a config file's relative paths are read from the
//! file's directory, whatever the working directory (command-line paths from the working
//! directory); like failures exit alike (docs/cli.md).

use std::path::Path;

use crate::support::cli::{command, dataset, path_arg, show, text, write_config};

const SCHEDULE: &[&str] = &[
    "bench",
    "schedule",
    "--problems",
    "3",
    "--iterations",
    "1",
    "--no-write",
];

#[test]
fn an_old_spelling_does_what_the_new_one_does_and_says_so_in_one_line() {
    let run = |extra: &[&str]| {
        let mut args = SCHEDULE.to_vec();
        args.extend_from_slice(extra);
        let out = command(&args).output().expect("tmas runs");
        assert!(out.status.success(), "{}", show(&out));
        out
    };
    let new = run(&[
        "--candidates",
        "2",
        "--verifications",
        "2",
        "--max-in-flight",
        "8",
        "--latency-draws",
        "1",
    ]);
    let old = run(&["--n", "2", "--m=2", "--in-flight", "8", "--seeds", "1"]);
    assert_eq!(text(&old.stdout), text(&new.stdout), "the same figures");
    let stderr = text(&old.stderr);
    for (was, is) in [
        ("--n", "--candidates"),
        ("--m", "--verifications"),
        ("--in-flight", "--max-in-flight"),
        ("--seeds", "--latency-draws"),
    ] {
        let note = format!("note: `{was}` is deprecated in `tmas bench schedule`; use `{is}`");
        assert_eq!(
            stderr.lines().filter(|l| *l == note).count(),
            1,
            "one line `{note}`:\n{stderr}"
        );
    }
    assert!(!text(&new.stderr).contains("deprecated"), "{}", show(&new));
}

/// A copy of the test config in `dir/conf/`, naming its dataset relative to that directory.
fn config_with_relative_dataset(dir: &Path, dataset_line: &str) -> std::path::PathBuf {
    let conf = dir.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let written = write_config(&conf, "embedded-sim", 1, 1);
    let absolute = format!("dataset = \"{}\"", dataset().display());
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains(&absolute));
    std::fs::write(&written, text.replace(&absolute, dataset_line)).unwrap();
    written
}

#[test]
fn a_config_files_dataset_is_read_from_its_directory_from_any_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("data")).unwrap();
    std::fs::copy(dataset(), tmp.path().join("data/d.jsonl")).unwrap();
    let config = config_with_relative_dataset(tmp.path(), "dataset = \"../data/d.jsonl\"");
    // Started from the repository root, where `../data/d.jsonl` does not exist.
    let run_dir = tmp.path().join("run");
    let out = command(&[
        "run",
        "-c",
        path_arg(&config),
        "--out",
        path_arg(&run_dir),
        "--candidates",
        "1",
        "--verifications",
        "1",
        "--quiet",
    ])
    .env("RUST_LOG", "warn")
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let stored = std::fs::read_to_string(run_dir.join("config.toml")).unwrap();
    let expected = format!(
        "dataset = \"{}\"",
        tmp.path().join("data/d.jsonl").display()
    );
    assert!(
        stored.contains(&expected),
        "the resolved path is stored:\n{stored}"
    );

    // A command-line path is the working directory's: the repository's sample here.
    let out = command(&[
        "config",
        "check",
        path_arg(&config),
        "--set",
        "run.dataset=data/imo-answerbench-sample.jsonl",
    ])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        text(&out.stdout).contains("dataset = \"data/imo-answerbench-sample.jsonl\""),
        "{}",
        show(&out)
    );
}

#[test]
fn a_missing_config_path_names_the_directory_it_was_read_from_and_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config_with_relative_dataset(tmp.path(), "dataset = \"nope.jsonl\"");
    let out = command(&["run", "-c", path_arg(&config), "--progress-every", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    let conf = tmp.path().join("conf");
    assert!(
        stderr.contains(&format!(
            "dataset file {} not found",
            conf.join("nope.jsonl").display()
        )) && stderr.contains(&format!("that file's directory, {}/", conf.display())),
        "{stderr}"
    );
    assert!(stderr.contains("run.dataset"), "{stderr}");
}
