//! `tmas serve` as a child process over 127.0.0.1, its config, and a raw HTTP/1.1 client
//! (requests, whole replies, server-sent events as they arrive).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cli::{StderrLines, command};

/// A `tmas serve` child process.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// Everything it printed on stdout before serving (banner, models).
    pub banner: String,
    stderr: Option<StderrLines>,
}

impl Server {
    /// Starts `tmas serve -c CONFIG --addr 127.0.0.1:0` with `env` added to its
    /// environment; returns once it listens.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Server {
        Server::start_with(config, &[], env)
    }

    /// [`Server::start`] with more `tmas serve` flags (`--out DIR`, …).
    pub fn start_with(config: &Path, flags: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = command(&[
            "serve",
            "-c",
            config.to_str().expect("UTF-8 path"),
            "--addr",
            "127.0.0.1:0",
        ]);
        cmd.args(flags);
        cmd.env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("tmas serve starts");
        let stderr = StderrLines::take_from(&mut child);
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut banner = String::new();
        for _ in 0..3 {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            banner.push_str(&line);
        }
        let addr = banner
            .lines()
            .find_map(|l| l.strip_prefix("tmas serve listening on http://"))
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("tmas serve did not start: {banner}")
            })
            .trim()
            .to_owned();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = out.read_to_string(&mut sink);
        });
        Server {
            child,
            addr,
            banner,
            stderr: Some(stderr),
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        request(&self.addr, "GET", path, &[], "")
    }

    pub fn post(&self, body: &Value) -> Reply {
        self.post_with(&[], &body.to_string())
    }

    pub fn post_with(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        request(&self.addr, "POST", "/v1/chat/completions", headers, body)
    }

    /// Stops the server; everything it wrote on stderr.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .map(StderrLines::finish)
            .unwrap_or_default()
    }

    /// Stops the server as Ctrl-C does (the requests in progress finish, spans are
    /// flushed); its exit status and everything it wrote on stderr.
    pub fn interrupt(self) -> (std::process::ExitStatus, String) {
        self.stop_with(libc::SIGINT)
    }

    /// Stops the server as a service manager does (SIGTERM); its exit status and
    /// everything it wrote on stderr.
    pub fn terminate(self) -> (std::process::ExitStatus, String) {
        self.stop_with(libc::SIGTERM)
    }

    fn stop_with(mut self, signal: i32) -> (std::process::ExitStatus, String) {
        super::cli::signal(&self.child, signal);
        let status = self.child.wait().expect("tmas serve exits");
        let stderr = self
            .stderr
            .take()
            .map(StderrLines::finish)
            .unwrap_or_default();
        (status, stderr)
    }

    /// The server's `/health` body.
    pub fn health(&self) -> Value {
        self.get("/health").json()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A whole reply.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// A request line, headers and body written to a fresh connection.
fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connects to tmas serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .expect("request head sent");
    // A body over the server's limit may be refused before it is all read.
    let _ = stream.write_all(body.as_bytes());
    stream
}

/// One request to the end (a reply within two minutes, or the test fails).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let stream = send(addr, method, path, headers, body);
    let mut reader = BufReader::new(stream);
    let (status, head) = read_head(&mut reader);
    let mut raw = Vec::new();
    reader.read_to_end(&mut raw).expect("reply read");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = Vec::new();
        let mut r = BufReader::new(&raw[..]);
        while let Some(chunk) = read_chunk(&mut r) {
            out.extend(chunk);
        }
        out
    } else {
        raw
    };
    Reply {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn read_head(reader: &mut impl BufRead) -> (u16, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("reply head read");
        if n == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    (status, head)
}

/// One chunk of a chunked body (`None` at the last one).
fn read_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
    let mut chunk = vec![0; size];
    reader.read_exact(&mut chunk).ok()?;
    let mut crlf = [0; 2];
    reader.read_exact(&mut crlf).ok()?;
    if size == 0 { None } else { Some(chunk) }
}

/// A streamed reply read as it arrives.
pub struct Events {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pending: String,
}

/// One `data:` event and when it arrived.
#[derive(Debug, Clone)]
pub struct Event {
    pub data: String,
    pub at: Instant,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

impl Events {
    /// Posts `body` and reads the reply's head.
    pub fn open(addr: &str, body: &Value) -> Events {
        let stream = send(addr, "POST", "/v1/chat/completions", &[], &body.to_string());
        let mut reader = BufReader::new(stream);
        let (status, _) = read_head(&mut reader);
        Events {
            reader,
            status,
            pending: String::new(),
        }
    }

    /// The next `data:` event (`None` once the stream ends).
    pub fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(Event {
                    data: data.join("\n"),
                    at: Instant::now(),
                });
            }
            let chunk = read_chunk(&mut self.reader)?;
            self.pending.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Every remaining event.
    pub fn rest(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.next()).collect()
    }

    /// Closes the connection (the client going away).
    pub fn drop_connection(self) {
        let _ = self.reader.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

/// Posts `body` and closes the connection once the request is sent, before any reply.
pub fn post_then_leave(addr: &str, body: &Value) -> TcpStream {
    send(addr, "POST", "/v1/chat/completions", &[], &body.to_string())
}

/// A serve config against `base_url` (a simulator root `http://127.0.0.1:PORT`, or
/// `embedded-sim`), N=2, M=2, T=2 by default; `extra` is appended (more TOML tables).
pub fn write_serve_config(dir: &Path, base_url: &str, extra: &str) -> PathBuf {
    let base_url = if base_url == "embedded-sim" {
        base_url.to_owned()
    } else {
        format!("{base_url}/v1")
    };
    let text = format!(
        r#"
[run]
seed = 3
max_concurrent_problems = 16
max_in_flight = 64

[method]
n = 2
m = 2
iterations = 2

[endpoints.sim]
base_url = "{base_url}"
model = "tmas-sim"
max_in_flight = 64
request_timeout_secs = 60
stream_idle_timeout_secs = 30
context_window = 131072

[simulator]
seed = 7
model = "tmas-sim"
latency = "fixed:5ms"
{extra}
"#
    );
    let path = dir.join("serve.toml");
    std::fs::write(&path, text).expect("config written");
    path
}

/// Polls `check` every 20 ms until it holds or `within` passes; whether it held.
pub fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `tmas serve --out` store in `dir/served` (the server on the embedded simulator,
/// stopped by SIGTERM once answered) holding two requests that ran different methods:
/// `req-0-c0` TMAS with N = 2, M = 1, T = 1, ε = 0.5, `req-1-c0` MV@3, and `req-2-c0` the
/// plain model (passed through).
pub fn served_store(dir: &Path) -> PathBuf {
    let out = dir.join("served");
    let config = write_serve_config(dir, "embedded-sim", "");
    let server = Server::start_with(&config, &["--out", super::cli::path_arg(&out)], &[]);
    for (model, ext) in [
        (
            "tmas/tmas-sim",
            serde_json::json!({"n": 2, "m": 1, "iterations": 1, "epsilon": 0.5}),
        ),
        ("majority-vote/tmas-sim", serde_json::json!({"k": 3})),
        ("tmas-sim", Value::Null),
    ] {
        let mut body = serde_json::json!({
            "model": model,
            "messages": [{"role": "user", "content": "What is 6 times 7?"}],
        });
        if !ext.is_null() {
            body["tmas"] = ext;
        }
        let reply = server.post(&body);
        assert_eq!(reply.status, 200, "{model}: {}", reply.body);
    }
    let (status, stderr) = server.terminate();
    assert!(status.success(), "{status:?}\n{stderr}");
    out
}
