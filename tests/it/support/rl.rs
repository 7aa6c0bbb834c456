//! Shared by the Hybrid-RL tests: a small demo run and `tmas rl-serve` on loopback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use super::cli::{command, output as tmas, path_arg, show};

/// The demo config, from the repository root.
pub const DEMO: &str = "config/demo.toml";

/// A small demo run: 6 problems, 3 iterations.
pub fn demo_run(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    let out = tmas(&[
        "run",
        "--config",
        DEMO,
        "--out",
        path_arg(&run),
        "--quiet",
        "--progress-every",
        "0",
        "--set",
        "method.iterations=3",
        "--ids",
        "imo-bench-algebra-001,imo-bench-algebra-021,imo-bench-algebra-041,\
         imo-bench-combinatorics-001,imo-bench-geometry-001,imo-bench-number_theory-001",
    ]);
    assert!(out.status.success(), "tmas run: {}", show(&out));
    run
}

/// Kills the service when the test ends, also when an assertion fails first.
pub struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tmas rl-serve` on a free loopback port; returns the child and its address.
pub fn start_serve(extra: &[&str]) -> (Serve, String) {
    let mut args = vec!["rl-serve", "--addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("rl-serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("rl-serve prints its address");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("address in {line:?}"))
        .to_owned();
    (Serve(child), addr)
}
