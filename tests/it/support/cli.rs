//! Shared by the resume/store tests: the `tmas` binary and a `tmas sim-server` process
//! over 127.0.0.1, a small config, and readers for the simulator's counters and the store.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_tmas");

/// The repository's 20-problem sample (answers for the simulator, questions for runs).
pub fn dataset() -> PathBuf {
    repo().join("data/imo-answerbench-sample.jsonl")
}

/// A `tmas sim-server` child process.
pub struct Sim {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub root: String,
    pub port: u16,
}

impl Sim {
    /// Starts a simulator on `port` (0: any) with a fixed latency; retries while the port
    /// is still held by a process that was just killed.
    pub fn start(port: u16, latency_ms: u64) -> Sim {
        Sim::start_with(port, latency_ms, &[])
    }

    /// [`Sim::start`] with more `tmas sim-server` flags (faults, …).
    pub fn start_with(port: u16, latency_ms: u64, flags: &[&str]) -> Sim {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut child = Command::new(BIN)
                .args(["sim-server", "--port", &port.to_string(), "--sim-seed", "7"])
                .args(["--latency", &format!("fixed:{latency_ms}ms")])
                .args(flags)
                .arg("--dataset")
                .arg(dataset())
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("tmas sim-server starts");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            if let Some(root) = line.trim().strip_prefix("tmas-sim listening on ") {
                let port = root
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .expect("a port in the listening line");
                return Sim {
                    child,
                    root: root.to_owned(),
                    port,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(
                Instant::now() < deadline,
                "simulator did not start on port {port}: {line:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn stats(&self) -> Value {
        let url = format!("{}/sim/stats", self.root);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match http::blocking_get(&url) {
                Some(v) => return v,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                None => panic!("cannot read {url}"),
            }
        }
    }

    pub fn requests(&self) -> u64 {
        self.stats()["requests_total"].as_u64().unwrap_or(0)
    }

    /// The requests received once their count has stopped rising (two reads 300 ms
    /// apart agree): with the orchestrator frozen, every request it sent has arrived.
    pub fn settled_requests(&self) -> u64 {
        let mut received = self.requests();
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = self.requests();
            if now == received {
                return received;
            }
            received = now;
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tiny blocking GET (tests run it off the async runtime).
mod http {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    pub fn blocking_get(url: &str) -> Option<serde_json::Value> {
        let rest = url.strip_prefix("http://")?;
        let (host, path) = rest.split_once('/')?;
        let mut stream = TcpStream::connect(host).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        write!(
            stream,
            "GET /{path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let body = text.split_once("\r\n\r\n")?.1;
        serde_json::from_str(body).ok()
    }
}

/// Writes a config for `problems` problems, N=2, M=2, T=`iterations`, judge R=2, against
/// `base_url` (a simulator root, or `embedded-sim`).
pub fn write_config(dir: &Path, base_url: &str, problems: usize, iterations: u32) -> PathBuf {
    let base_url = if base_url == "embedded-sim" {
        base_url.to_owned()
    } else {
        format!("{base_url}/v1")
    };
    let text = format!(
        r#"
[run]
seed = 11
dataset = "{dataset}"
limit = {problems}
max_concurrent_problems = {problems}
max_in_flight = 64
shutdown_grace_secs = 60

[method]
n = 2
m = 2
iterations = {iterations}

[judge]
repeats = 2

[endpoints.sim]
base_url = "{base_url}"
model = "tmas-sim"
max_in_flight = 64
request_timeout_secs = 60
stream_idle_timeout_secs = 30
context_window = 131072

[resilience]
backoff_min_ms = 20
backoff_max_ms = 300
probe_interval_secs = 1
outage_budget_secs = 120

[simulator]
seed = 7
model = "tmas-sim"
latency = "fixed:100ms"
"#,
        dataset = dataset().display()
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).expect("config written");
    path
}

/// The repository's 5 proof problems, with reference proofs and grading guidelines.
pub fn proof_dataset() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/proof-sample.jsonl")
}

/// [`write_config`] in proof mode (`method.no_proof = false`) over [`proof_dataset`].
pub fn write_proof_config(dir: &Path, base_url: &str, problems: usize, iterations: u32) -> PathBuf {
    let path = write_config(dir, base_url, problems, iterations);
    let text = std::fs::read_to_string(&path)
        .expect("config readable")
        .replace(
            &dataset().display().to_string(),
            &proof_dataset().display().to_string(),
        )
        .replace("[method]\n", "[method]\nno_proof = false\n");
    assert!(text.contains("no_proof = false") && text.contains("proof-sample"));
    std::fs::write(&path, text).expect("config written");
    path
}

/// The run store of `run_dir`, opened read-only (waiting up to 10 s for the run's writer).
pub fn read_store(run_dir: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open_with_flags(
        run_dir.join("run.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("run store opens");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout set");
    conn
}

/// Every stored `judge` call of a run: call key → prompt text.
pub fn judge_prompts(run_dir: &Path) -> std::collections::BTreeMap<String, String> {
    let conn = read_store(run_dir);
    conn.prepare(
        "SELECT c.call_key, p.text FROM calls AS c JOIN prompt_texts AS p ON p.id = c.prompt_id \
         WHERE c.role = 'judge'",
    )
    .expect("query prepares")
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
    .expect("query runs")
    .collect::<Result<_, _>>()
    .expect("rows read")
}

/// A child's stderr, read line by line on a thread of its own (the child never blocks on
/// a full pipe), so a test can wait for a line while the child runs.
pub struct StderrLines {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl StderrLines {
    /// Takes over `child`'s piped stderr.
    pub fn take_from(child: &mut Child) -> StderrLines {
        let pipe = child.stderr.take().expect("piped stderr");
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = text.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { return };
                let mut t = sink.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        StderrLines { text, reader }
    }

    /// The first line containing `needle`, once printed (the test fails if stderr closes
    /// first or after two minutes).
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(line) = self
                .text
                .lock()
                .unwrap()
                .lines()
                .find(|l| l.contains(needle))
            {
                return line.to_owned();
            }
            assert!(
                !self.reader.is_finished() && Instant::now() < deadline,
                "no line with {needle:?} on stderr:\n{}",
                self.text.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the child wrote, once it closed stderr.
    pub fn finish(self) -> String {
        let _ = self.reader.join();
        std::mem::take(&mut *self.text.lock().unwrap())
    }
}

/// The repository root: presets, prompt templates and sample datasets are read from it.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `tmas ARGS…` from the repository root, without any `TMAS_*` variable of the caller's
/// environment (they would override the config).
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(repo()).args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("TMAS_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// [`command`] to the end.
pub fn output(args: &[&str]) -> Output {
    command(args).output().expect("the tmas binary runs")
}

/// A temporary path as a command-line argument.
pub fn path_arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// A finished command's status, stdout and stderr, for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// [`command`] to the end, logging warnings only.
pub fn tmas(args: &[&str]) -> Output {
    command(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("tmas runs")
}

/// [`command`] in the background (stdout/stderr captured), logging warnings only.
pub fn spawn_tmas(args: &[&str]) -> Child {
    command(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tmas starts")
}

/// A fresh, quiet run: `tmas run -c CONFIG --out DIR --progress-every 0`.
fn fresh_run_args(config: &Path, dir: &Path) -> [String; 7] {
    [
        "run".into(),
        "-c".into(),
        config.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--progress-every".into(),
        "0".into(),
    ]
}

/// [`fresh_run_args`] to the end.
pub fn run_fresh(config: &Path, dir: &Path) -> Output {
    let args = fresh_run_args(config, dir);
    tmas(&args.each_ref().map(String::as_str))
}

/// [`fresh_run_args`] in the background.
pub fn spawn_fresh(config: &Path, dir: &Path) -> Child {
    let args = fresh_run_args(config, dir);
    spawn_tmas(&args.each_ref().map(String::as_str))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({:?}):\n{}\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Calls committed to the run store so far (0 while it does not exist yet).
pub fn stored_calls(run_dir: &Path) -> u64 {
    let path = run_dir.join("run.sqlite");
    if !path.is_file() {
        return 0;
    }
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_secs(10));
    conn.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
        .unwrap_or(0)
}

/// Answered calls of `role` committed to the run store so far.
pub fn stored_of_role(run_dir: &Path, role: &str) -> u64 {
    let path = run_dir.join("run.sqlite");
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_secs(10));
    conn.query_row(
        "SELECT COUNT(*) FROM calls WHERE role = ?1 AND ok = 1",
        [role],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
    .unwrap_or(0)
}

/// Polls until at least `n` calls are stored; panics if `child` exits first.
pub fn wait_for_stored(run_dir: &Path, n: u64, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if stored_calls(run_dir) >= n {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("tmas exited ({status}) before {n} calls were stored");
        }
        assert!(
            Instant::now() < deadline,
            "fewer than {n} calls stored after 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until an answered call of `role` is stored; panics if `child` exits first.
pub fn wait_for_stored_of_role(run_dir: &Path, role: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while stored_of_role(run_dir, role) == 0 {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("tmas exited ({status}) before a {role} call was stored");
        }
        assert!(
            Instant::now() < deadline,
            "no {role} call stored after 120 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The run's JSONL export (results, scores, judge verdicts, final banks).
pub fn export(run_dir: &Path) -> String {
    ok(
        tmas(&["export", &run_dir.display().to_string()]),
        "tmas export",
    )
}

/// The run's Pass@1 CSV from the store.
pub fn export_csv(run_dir: &Path) -> String {
    ok(
        tmas(&["export", &run_dir.display().to_string(), "--format", "csv"]),
        "tmas export --format csv",
    )
}

/// Sends a signal to a child process.
pub fn signal(child: &Child, sig: i32) {
    let pid = i32::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}) failed");
}

/// Everything an uninterrupted run against `sim` gives: export, CSV, requests at the sim.
pub struct Baseline {
    pub export: String,
    pub csv: String,
    pub requests: u64,
}

/// Runs `config` to the end in `dir` and measures its requests at `sim` (which is reset
/// first).
pub fn baseline(sim: &Sim, config: &Path, dir: &Path) -> Baseline {
    reset(sim);
    ok(run_fresh(config, dir), "baseline run");
    let requests = sim.requests();
    assert_eq!(
        requests,
        stored_calls(dir),
        "every request of a fault-free run is one stored call"
    );
    Baseline {
        export: export(dir),
        csv: export_csv(dir),
        requests,
    }
}

/// `POST /sim/reset`: zero the counters.
pub fn reset(sim: &Sim) {
    use std::io::{Read, Write};
    let host = sim.root.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).expect("simulator reachable");
    write!(
        stream,
        "POST /sim/reset HTTP/1.1\r\nhost: {host}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .expect("reset sent");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 2"), "reset failed: {text}");
}

/// The one JSON file under `dir/bench-results`: its name, text and value.
pub fn only_result(dir: &Path) -> (String, String, serde_json::Value) {
    let results: Vec<_> = std::fs::read_dir(dir.join("bench-results"))
        .expect("bench-results written")
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let name = results[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let text = std::fs::read_to_string(&results[0]).expect("read result");
    let value = serde_json::from_str(&text).expect("well-formed JSON");
    (name, text, value)
}
