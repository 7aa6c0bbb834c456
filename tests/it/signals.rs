//! Signals always work: SIGINT or SIGTERM during the start-up wait for an endpoint (a
//! loopback port nobody listens on) stops `tmas run` and `tmas experiment` at once, with
//! the signal's exit code and nothing created, and the wait prints one line per endpoint
//! (at most one a minute when stderr is not a terminal). An interrupt under `--quiet`
//! prints the summary and no warnings.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::*;

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Sends `sig` once the child waits for its endpoint and has printed its first waiting
/// line `waited` ago; returns the exit code, how long the exit took after the signal,
/// and stderr.
fn stop_while_waiting(
    mut child: Child,
    sig: i32,
    waited: Duration,
) -> (Option<i32>, Duration, String) {
    let lines = StderrLines::take_from(&mut child);
    lines.wait_for("waiting for endpoint sim");
    std::thread::sleep(waited);
    let sent = Instant::now();
    signal(&child, sig);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("still running 30 s after the signal:\n{}", lines.finish());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed();
    (status.code(), took, lines.finish())
}

#[test]
fn a_signal_during_the_start_up_wait_stops_the_run_at_once_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(
        tmp.path(),
        &format!("http://127.0.0.1:{}", closed_port()),
        2,
        1,
    );
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = tmp.path().join(format!("run-{sig}"));
        let child = spawn_fresh(&config, &dir);
        // Past the 5 s at which a second waiting line used to come.
        let (status, took, stderr) = stop_while_waiting(child, sig, Duration::from_secs(6));
        assert_eq!(status, Some(code), "{stderr}");
        assert!(
            took < Duration::from_secs(1),
            "exit took {took:?} after the signal:\n{stderr}"
        );
        assert!(
            stderr.contains("stopped before the run started; nothing was created"),
            "{stderr}"
        );
        assert!(!dir.exists(), "nothing created:\n{stderr}");
        let waiting = stderr
            .lines()
            .filter(|l| l.contains("waiting for endpoint"))
            .count();
        assert_eq!(waiting, 1, "one waiting line a minute in a log:\n{stderr}");
    }
}

#[test]
fn sigterm_during_an_experiments_start_up_wait_stops_it_at_once_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    write_config(
        tmp.path(),
        &format!("http://127.0.0.1:{}", closed_port()),
        2,
        1,
    );
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        r#"
name = "waits"
config = "config.toml"

[[variant]]
name = "TMAS"
set = { "method.name" = "tmas" }

[[variant]]
name = "V-R"
set = { "method.name" = "verify-refine" }
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    let child = spawn_tmas(&[
        "experiment",
        path_arg(&exp),
        "--out",
        path_arg(&out),
        "--progress-every",
        "0",
    ]);
    let (status, took, stderr) = stop_while_waiting(child, libc::SIGTERM, Duration::ZERO);
    assert_eq!(status, Some(143), "{stderr}");
    assert!(
        took < Duration::from_secs(1),
        "exit took {took:?}:\n{stderr}"
    );
    assert!(
        stderr.contains("stopped before the experiment started; nothing was created"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing created:\n{stderr}");
    // Both variants use the one endpoint: it is waited for (and shown) once.
    let waiting = stderr
        .lines()
        .filter(|l| l.contains("waiting for endpoint"))
        .count();
    assert_eq!(waiting, 1, "{stderr}");
}

/// `tmas run --quiet` (no log filter from the environment) in the background.
fn spawn_quiet(config: &Path, dir: &Path) -> Child {
    command(&[
        "run",
        "-c",
        path_arg(config),
        "--out",
        path_arg(dir),
        "--quiet",
    ])
    .env_remove("RUST_LOG")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("tmas starts")
}

#[test]
fn an_interrupt_under_quiet_prints_the_summary_and_no_warnings() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 6, 3);
    let whole = tmp.path().join("whole");
    ok(run_fresh(&config, &whole), "uninterrupted run");
    let total = stored_calls(&whole);
    let dir = tmp.path().join("stopped");
    let mut child = spawn_quiet(&config, &dir);
    wait_for_stored(&dir, total / 3, &mut child);
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    // Calls cut by the shutdown are no failures: only the signal and how to resume.
    for line in stderr.lines() {
        assert!(
            line.starts_with("SIGINT received") || line.starts_with("interrupted; resume with"),
            "unexpected line under --quiet: {line}\n{stderr}"
        );
    }
    assert!(stderr.contains("interrupted; resume with"), "{stderr}");
    assert!(
        stdout.contains("iteration  pass@1"),
        "the summary: {stdout}"
    );
}
