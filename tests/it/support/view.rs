//! `tmas view` as a child process over 127.0.0.1, raw GETs against it, and headless
//! Chromium driven from the command line (`--dump-dom`, `--screenshot`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::cli::{command, path_arg};

/// A `tmas view` child process; killed when dropped.
pub struct Viewer {
    pub child: Child,
    /// `http://127.0.0.1:PORT/`
    pub root: String,
}

impl Viewer {
    /// `tmas view DIR… --addr 127.0.0.1:0`, once it printed its address.
    pub fn start(dirs: &[&Path]) -> Viewer {
        Self::start_with(dirs, &[])
    }

    /// [`Viewer::start`] with more arguments (`--jaeger-url URL`).
    pub fn start_with(dirs: &[&Path], more: &[&str]) -> Viewer {
        Self::start_with_env(dirs, more, &[])
    }

    /// [`Viewer::start_with`] with environment variables set for the child alone.
    pub fn start_with_env(dirs: &[&Path], more: &[&str], env: &[(&str, &str)]) -> Viewer {
        let mut args = vec!["view", "--addr", "127.0.0.1:0"];
        args.extend_from_slice(more);
        args.extend(dirs.iter().map(|d| path_arg(d)));
        let mut child = command(&args)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tmas view starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let root = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no loopback address in `{line}`"))
            .to_string();
        assert!(line.contains("loopback only"), "{line}");
        Viewer { child, root }
    }

    /// (status, body) of GET `path` (sent as written: nothing is normalised).
    pub fn get(&self, path: &str) -> (u16, String) {
        raw_get(&self.root, path)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (status, body) of `GET path` on the server at `root`, the path sent byte for byte.
pub fn raw_get(root: &str, path: &str) -> (u16, String) {
    let host = root
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = TcpStream::connect(&host).expect("the viewer accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout set");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .expect("request sent");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("response read");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:.200}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// The environment variable that makes a missing Chromium a failure, not a skip (set by
/// `.ci/run`, which installs it).
pub const BROWSER_REQUIRED: &str = "TMAS_REQUIRE_BROWSER";

/// Names the browser binary instead of Debian's paths.
pub const CHROMIUM_PATH: &str = "TMAS_CHROMIUM";

/// Debian's Chromium (or the one [`CHROMIUM_PATH`] names), or `None` after saying loudly
/// that the browser tests are skipped (a panic instead when [`BROWSER_REQUIRED`] is
/// `1`).
pub fn chromium() -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os(CHROMIUM_PATH) {
        Some(path) => vec![PathBuf::from(path)],
        None => vec![
            "/usr/bin/chromium".into(),
            "/usr/bin/chromium-browser".into(),
        ],
    };
    let found = candidates.into_iter().find(|p| p.is_file());
    if found.is_none() {
        let required = std::env::var(BROWSER_REQUIRED).is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{BROWSER_REQUIRED}=1 but Chromium is not installed (apt-get install chromium)"
        );
        // Straight to the process's stderr: the test harness captures `eprintln!` of a
        // passing test, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "\n**************************************************************\n\
             SKIPPED: browser tests of tmas view need Chromium\n\
             (apt-get install -y chromium; .ci/run installs it and sets\n\
             {BROWSER_REQUIRED}=1)\n\
             **************************************************************\n"
        );
    }
    found
}

/// Headless Chromium with the flags a closed network and a root user need, and a
/// fresh profile.
fn browser(chromium: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null())
    .stderr(Stdio::null());
    cmd
}

/// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
pub fn dump_dom(chromium: &Path, url: &str, budget_ms: u64) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = browser(chromium, profile.path())
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {:?}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A screenshot of `url` (1280 × `height`) written to `png`.
pub fn screenshot(chromium: &Path, url: &str, png: &Path, height: u32) {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = browser(chromium, profile.path())
        .arg("--virtual-time-budget=3000")
        .arg(format!("--window-size=1280,{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success() && png.is_file(),
        "chromium took no screenshot of {url}: {:?}",
        out.status
    );
}

/// A screenshot of each `(page, name, height)` under `root` into the artefact directory as
/// `name.png`.
pub fn screenshots(chromium: &Path, root: &str, pages: &[(&str, &str, u32)]) {
    let shots = artefacts();
    for (page, name, height) in pages {
        screenshot(
            chromium,
            &format!("{root}{page}"),
            &shots.join(format!("{name}.png")),
            *height,
        );
    }
}

/// Where a test keeps its artefacts: `target/view-screenshots/`.
pub fn artefacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::cli::repo().join("target"));
    let dir = target.join("view-screenshots");
    std::fs::create_dir_all(&dir).expect("artefact dir");
    dir
}
