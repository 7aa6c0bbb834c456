//! Start-up checks, run before anything is created on disk: a run that cannot work
//! fails in seconds with one line per problem and exit code 2, and leaves no run
//! directory behind to block the same `--out`.
//!
//! Local checks ([`check_local`]): every API-key variable is set, the metrics address can
//! be bound, the output directory can be created and does not already hold a run.
//! Endpoint checks ([`check_endpoints`], skipped with `--no-preflight`): for every
//! endpoint some role of the run uses (the judge's included), `GET {base_url}/models` and
//! one chat completion with `max_tokens: 1` — or, for an endpoint of the `embedding`
//! role (RSE de-duplicating by embeddings), one embeddings request of one input, its reply
//! checked as the client checks it (an endpoint serving both gets both checks). A rejected
//! key, a URL without an OpenAI-compatible API, a model the server does not serve, a
//! server without an embeddings route and a reply that is not the expected JSON are each
//! named with the endpoint, the URL and what to do.
//!
//! HTTP statuses are classified as the model client classifies them
//! ([`is_retryable_status`]), so the check never refuses a start the client would have
//! carried through: what the client retries — a refused connection, a timeout, 408, 429
//! and every 5xx — means the server may still be loading its weights, or is busy or
//! briefly failing; the check waits (`resilience.preflight_wait_secs`), coming back no
//! sooner than a `Retry-After` asks, with one status line per endpoint naming the status
//! ([`WaitLines`]: redrawn in place on a terminal, at most once a minute in a log). The
//! caller ends the wait early by dropping the check (a signal,
//! [`super::shutdown::until_stopped`]). Any other status stops the start: the client would not retry it either, and
//! the permanent ones (a rejected key, a missing route or model) say what to fix.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use tmas_client::{is_retryable_status, retry_after};
use tmas_observability::WaitLines;

use crate::config::{Config, EndpointConfig};
use crate::role::Role;

/// A start-up check failed; nothing was created. `tmas run` prints it and exits 2.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("\nerror: "))]
pub struct StartupError {
    /// One line per problem found.
    pub problems: Vec<String>,
}

/// Bound on one request of the check (a server that takes longer is "not answering").
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts while the endpoint is not ready (longer when its `Retry-After`
/// asks for longer).
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Bytes of an unexpected reply shown in the error.
const SHOWN_BYTES: usize = 200;

/// The checks that need no network: API-key variables, the metrics address, the output.
pub fn check_local(
    config: &Config,
    env: &[(String, String)],
    metrics_addr: Option<SocketAddr>,
    out: Option<&Path>,
) -> Result<(), StartupError> {
    let mut problems = Vec::new();
    if let Err(errors) = config.client_config(env) {
        problems.extend(errors.iter().map(|issue| issue.to_string()));
    }
    if let Some(addr) = metrics_addr.or(config.observability.metrics_addr)
        && let Err(e) = std::net::TcpListener::bind(addr)
    {
        problems.push(format!(
            "metrics address {addr} cannot be bound: {e}; pick another with --metrics-addr"
        ));
    }
    if let Some(out) = out
        && let Err(problem) = check_output(out)
    {
        problems.push(problem);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StartupError { problems })
    }
}

/// `out` does not hold a run already, and its nearest existing ancestor is a writable
/// directory (probed by creating and removing a file there).
fn check_output(out: &Path) -> Result<(), String> {
    let db = out.join(crate::store::DB_FILE);
    if db.exists() {
        return Err(format!(
            "{} already holds a run; resume it with `tmas run --resume {}` or choose another --out",
            out.display(),
            out.display()
        ));
    }
    let mut existing = out;
    while !existing.exists() {
        existing = match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if existing == Path::new(".") {
            break;
        }
    }
    if !existing.is_dir() {
        return Err(format!(
            "output {}: {} is not a directory",
            out.display(),
            existing.display()
        ));
    }
    let probe = existing.join(format!(".tmas-write-test-{}", std::process::id()));
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "output {} is not writable: cannot write in {}: {e}",
            out.display(),
            existing.display()
        )),
    }
}

/// The roles `tmas run` sends calls for: the ones its method declares, then the answer
/// judge.
fn run_roles(config: &Config) -> impl Iterator<Item = Role> {
    config.method.roles().iter().copied().chain([Role::Judge])
}

/// Which kinds of call the run sends to one endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Uses {
    chat: bool,
    embeddings: bool,
}

/// The endpoints some role of the run sends calls to (the judge's only when the LLM judge
/// is on), without the embedded simulator (started in-process), with the kinds of call.
fn endpoint_uses(config: &Config) -> BTreeMap<String, Uses> {
    let mut out: BTreeMap<String, Uses> = BTreeMap::new();
    for role in run_roles(config) {
        if role == Role::Judge && !config.judge.enabled {
            continue;
        }
        for name in config.role_endpoints(role) {
            if config
                .endpoints
                .get(&name)
                .is_none_or(|e| e.is_embedded_sim())
            {
                continue;
            }
            let uses = out.entry(name).or_default();
            if role.is_embedding() {
                uses.embeddings = true;
            } else {
                uses.chat = true;
            }
        }
    }
    out
}

/// Names of the endpoints the start-up check probes ([`endpoint_uses`]).
#[cfg(test)]
fn endpoints_in_use(config: &Config) -> Vec<String> {
    endpoint_uses(config).into_keys().collect()
}

/// Checks every endpoint in use (concurrently); every failure is one line.
pub async fn check_endpoints(
    config: &Config,
    env: &[(String, String)],
    lines: &WaitLines,
) -> Result<(), StartupError> {
    check_endpoints_of(&[config], env, lines).await
}

/// [`check_endpoints`] over the endpoints of several configs (the variants of an
/// experiment): each endpoint once, however many configs use it, with every kind of call
/// any of them sends to it; the longest `resilience.preflight_wait_secs` of the configs
/// applies.
pub async fn check_endpoints_of(
    configs: &[&Config],
    env: &[(String, String)],
    lines: &WaitLines,
) -> Result<(), StartupError> {
    let wait = Duration::from_secs(
        configs
            .iter()
            .map(|c| c.resilience.preflight_wait_secs)
            .max()
            .unwrap_or(0),
    );
    // One probe per distinct endpoint (name, URL, model), the uses of all configs merged.
    let mut probes: BTreeMap<(String, String, String), (EndpointConfig, Uses)> = BTreeMap::new();
    for config in configs {
        for (name, uses) in endpoint_uses(config) {
            let Some(e) = config.endpoints.get(&name) else {
                continue;
            };
            let id = (name, e.base_url.clone(), e.model.clone());
            let (_, merged) = probes.entry(id).or_insert_with(|| (e.clone(), uses));
            merged.chat |= uses.chat;
            merged.embeddings |= uses.embeddings;
        }
    }
    let checks = probes.into_iter().map(|((name, _, _), (e, uses))| {
        let key = e
            .api_key_env
            .as_ref()
            .and_then(|var| env.iter().rev().find(|(k, _)| k == var))
            .map(|(_, v)| v.clone());
        async move { Probe::new(name, e, key, uses).run(wait, lines).await }
    });
    let problems: Vec<String> = futures::future::join_all(checks)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StartupError { problems })
    }
}

/// Why one attempt of the check did not pass.
enum Outcome {
    /// The client would try again (the server may be starting, busy or briefly failing):
    /// so does the check, until the wait is over.
    NotReady(NotReady),
    /// Retrying will not help: the message says what to fix.
    Fatal(String),
}

/// Whether `GET /models` listed the configured model (an empty list says nothing).
enum Listed {
    Yes,
    /// Not listed; the models that were.
    No(Vec<String>),
}

/// An attempt the check tries again.
struct NotReady {
    /// For the waiting line: `connection refused`, `HTTP 503, retry after 2 s`, ….
    reason: String,
    /// For the error once the wait is over: what the endpoint answered last ...
    detail: String,
    /// ... and what to do.
    hint: String,
    /// The server's `Retry-After`: the next attempt comes no sooner.
    retry_after: Option<Duration>,
}

impl NotReady {
    /// No answer (refused, reset, timed out): the server is not up, or not there.
    fn unreachable(reason: String, name: &str) -> Outcome {
        Outcome::NotReady(NotReady {
            detail: reason.clone(),
            reason,
            hint: format!("start the server or fix endpoints.{name}.base_url"),
            retry_after: None,
        })
    }
}

struct Probe {
    name: String,
    e: EndpointConfig,
    key: Option<String>,
    uses: Uses,
    http: Option<reqwest::Client>,
}

impl Probe {
    fn new(name: String, e: EndpointConfig, key: Option<String>, uses: Uses) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(REQUEST_TIMEOUT)
            .build()
            .ok();
        Self {
            name,
            e,
            key,
            uses,
            http,
        }
    }

    fn base(&self) -> &str {
        self.e.base_url.trim_end_matches('/')
    }

    /// `endpoint `NAME` (URL): ` — how every message starts.
    fn at(&self, url: &str) -> String {
        format!("endpoint `{}` ({url})", self.name)
    }

    /// The check, waiting while the endpoint is not ready; its waiting line goes when
    /// the check ends (or is dropped).
    async fn run(self, wait: Duration, lines: &WaitLines) -> Result<(), String> {
        let _line = ClearOnDrop(lines, &self.name);
        self.wait_until_ready(wait, lines).await
    }

    async fn wait_until_ready(&self, wait: Duration, lines: &WaitLines) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let not_ready = match self.once().await {
                Ok(Listed::Yes) => return Ok(()),
                Ok(Listed::No(models)) => {
                    // Answered all the same: a server that serves any name it is given
                    // (or a router that maps names). Worth a line: a typo in `model` would
                    // otherwise go unnoticed until the replies look wrong.
                    tracing::warn!(
                        "endpoint {}: model `{}` is not among the models GET /models lists ({}), but the server answered it; check endpoints.{}.model",
                        self.name,
                        self.e.model,
                        models.join(", "),
                        self.name
                    );
                    return Ok(());
                }
                Err(Outcome::Fatal(message)) => return Err(message),
                Err(Outcome::NotReady(not_ready)) => not_ready,
            };
            let waited = started.elapsed();
            if waited >= wait {
                return Err(format!(
                    "{}: {}; waited {} s (resilience.preflight_wait_secs = {}); {}",
                    self.at(self.base()),
                    not_ready.detail,
                    waited.as_secs(),
                    wait.as_secs(),
                    not_ready.hint,
                ));
            }
            lines.update(
                &self.name,
                format!(
                    "waiting for endpoint {} ({}), {} s of at most {} s",
                    self.name,
                    not_ready.reason,
                    waited.as_secs(),
                    wait.as_secs()
                ),
            );
            tokio::time::sleep(pause(not_ready.retry_after, wait.saturating_sub(waited))).await;
        }
    }

    fn request(
        &self,
        method: reqwest::Method,
        url: &str,
    ) -> Result<reqwest::RequestBuilder, Outcome> {
        let http = self.http.as_ref().ok_or_else(|| {
            Outcome::Fatal(format!("{}: cannot build an HTTP client", self.at(url)))
        })?;
        let mut req = http.request(method, url).timeout(REQUEST_TIMEOUT);
        if let Some(key) = &self.key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        Ok(req)
    }

    /// One pass: the model list, then a one-token completion and/or a one-input
    /// embeddings request; whether the model was on the list.
    async fn once(&self) -> Result<Listed, Outcome> {
        let models_url = format!("{}/models", self.base());
        let models = self.models(&models_url).await?;
        let served = models.contains(&self.e.model);
        if self.uses.chat {
            let chat_url = format!("{}/chat/completions", self.base());
            self.chat(&chat_url, &models, served).await?;
        }
        if self.uses.embeddings {
            let url = format!("{}/embeddings", self.base());
            self.embeddings(&url, &models, served).await?;
        }
        Ok(if served || models.is_empty() {
            Listed::Yes
        } else {
            Listed::No(models)
        })
    }

    /// The model is not served there (HTTP `status`): the served ones are listed.
    fn not_served(&self, models: &[String], status: u16) -> Outcome {
        let list = if models.is_empty() {
            "none".to_owned()
        } else {
            models.join(", ")
        };
        Outcome::Fatal(format!(
            "{}: model `{}` is not served there (HTTP {status}); it serves: {list}; set \
             endpoints.{}.model to one of them",
            self.at(self.base()),
            self.e.model,
            self.name
        ))
    }

    /// One embeddings request of one input, its reply checked as the model client checks
    /// every embeddings reply.
    async fn embeddings(&self, url: &str, models: &[String], served: bool) -> Result<(), Outcome> {
        let body = serde_json::json!({
            "model": self.e.model,
            "input": ["Reply with OK."],
            "encoding_format": "float",
        });
        let req = self
            .request(reqwest::Method::POST, url)?
            .header(CONTENT_TYPE, "application/json")
            .header(crate::sim::PREFLIGHT_HEADER, "1")
            .body(body.to_string());
        let reply = self.send(req, url).await?;
        let hint = "the embedding role (roles.embedding.group) needs a server of an \
                    embeddings model, e.g. `vllm serve BAAI/bge-m3 --runner pooling`";
        match reply.status {
            200..=299 => {}
            401 | 403 => return Err(self.key_rejected(url, reply.status)),
            400 | 404 | 422 if !served => return Err(self.not_served(models, reply.status)),
            _ => {
                return Err(Outcome::Fatal(format!(
                    "{}: a one-input embeddings request answered HTTP {}: {}; {hint}",
                    self.at(url),
                    reply.status,
                    shown(&reply.body)
                )));
            }
        }
        match tmas_client::parse_embeddings_response(&reply.body, 1) {
            Ok(_) => Ok(()),
            Err(problem) => Err(Outcome::Fatal(format!(
                "{}: POST /embeddings did not answer a usable embeddings reply ({problem}; \
                 HTTP {}, content type {}): {}; {hint}",
                self.at(url),
                reply.status,
                reply.content_type,
                shown(&reply.body)
            ))),
        }
    }

    async fn models(&self, url: &str) -> Result<Vec<String>, Outcome> {
        let reply = self
            .send(self.request(reqwest::Method::GET, url)?, url)
            .await?;
        match reply.status {
            200..=299 => {}
            401 | 403 => return Err(self.key_rejected(url, reply.status)),
            404 => {
                let hint = if self.base().ends_with("/v1") {
                    format!("check endpoints.{}.base_url", self.name)
                } else {
                    format!(
                        "did you mean base_url = \"{}/v1\"? (endpoints.{}.base_url)",
                        self.base(),
                        self.name
                    )
                };
                return Err(Outcome::Fatal(format!(
                    "{}: no OpenAI-compatible API there (GET /models answered HTTP 404); {hint}",
                    self.at(url)
                )));
            }
            _ => return Err(self.bad_status("GET /models", url, &reply)),
        }
        let list: Option<Vec<String>> = serde_json::from_slice::<serde_json::Value>(&reply.body)
            .ok()
            .and_then(|v| {
                v.get("data")?.as_array().map(|items| {
                    items
                        .iter()
                        .filter_map(|m| m.get("id")?.as_str().map(str::to_owned))
                        .collect()
                })
            });
        list.ok_or_else(|| self.unexpected("GET /models", url, &reply, "a JSON model list"))
    }

    async fn chat(&self, url: &str, models: &[String], served: bool) -> Result<(), Outcome> {
        let body = serde_json::json!({
            "model": self.e.model,
            "messages": [{"role": "user", "content": "Reply with OK."}],
            "max_tokens": 1,
            "stream": false,
        });
        let req = self
            .request(reqwest::Method::POST, url)?
            .header(CONTENT_TYPE, "application/json")
            .header(crate::sim::PREFLIGHT_HEADER, "1")
            .body(body.to_string());
        let reply = self.send(req, url).await?;
        match reply.status {
            200..=299 => {}
            401 | 403 => return Err(self.key_rejected(url, reply.status)),
            400 | 404 | 422 if !served => return Err(self.not_served(models, reply.status)),
            _ => return Err(self.bad_status("a one-token chat completion", url, &reply)),
        }
        let ok = serde_json::from_slice::<serde_json::Value>(&reply.body)
            .ok()
            .is_some_and(|v| v.get("choices").is_some_and(serde_json::Value::is_array));
        if ok {
            Ok(())
        } else {
            Err(self.unexpected(
                "POST /chat/completions",
                url,
                &reply,
                "a JSON chat completion",
            ))
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder, url: &str) -> Result<Reply, Outcome> {
        let no_answer = || {
            NotReady::unreachable(
                format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
                &self.name,
            )
        };
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return Err(no_answer()),
            Err(e) if e.is_connect() => {
                return Err(NotReady::unreachable(connect_reason(&e), &self.name));
            }
            Err(e) if e.is_builder() => {
                return Err(Outcome::Fatal(format!(
                    "{}: not a usable URL ({e}); fix endpoints.{}.base_url",
                    self.at(url),
                    self.name
                )));
            }
            Err(e) => return Err(NotReady::unreachable(connect_reason(&e), &self.name)),
        };
        let status = resp.status().as_u16();
        let asked_wait = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        let body = match tokio::time::timeout(REQUEST_TIMEOUT, resp.bytes()).await {
            Ok(Ok(b)) => b.to_vec(),
            Ok(Err(e)) => return Err(NotReady::unreachable(connect_reason(&e), &self.name)),
            Err(_) => return Err(no_answer()),
        };
        if !(200..300).contains(&status) && is_retryable_status(status) {
            let reason = match asked_wait {
                Some(after) => format!("HTTP {status}, retry after {}", seconds(after)),
                None => format!("HTTP {status}"),
            };
            return Err(Outcome::NotReady(NotReady {
                reason,
                detail: format!("{url} still answered HTTP {status}: {}", shown(&body)),
                hint: "see the server's log, or wait longer".to_owned(),
                retry_after: asked_wait,
            }));
        }
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }

    fn key_rejected(&self, url: &str, status: u16) -> Outcome {
        let what = match &self.e.api_key_env {
            Some(var) => format!(
                "the API key in {var} was rejected (HTTP {status}); put a valid key in {var}"
            ),
            None => format!(
                "the server wants an API key (HTTP {status}); name the variable that holds it \
                 with endpoints.{}.api_key_env",
                self.name
            ),
        };
        Outcome::Fatal(format!("{}: {what}", self.at(url)))
    }

    fn bad_status(&self, what: &str, url: &str, reply: &Reply) -> Outcome {
        Outcome::Fatal(format!(
            "{}: {what} answered HTTP {}: {}",
            self.at(url),
            reply.status,
            shown(&reply.body)
        ))
    }

    fn unexpected(&self, what: &str, url: &str, reply: &Reply, expected: &str) -> Outcome {
        Outcome::Fatal(format!(
            "{}: {what} did not answer {expected} (HTTP {}, content type {}): {}; is this \
             an OpenAI-compatible server (not a proxy's or a web server's page)?",
            self.at(url),
            reply.status,
            reply.content_type,
            shown(&reply.body)
        ))
    }
}

/// Removes an endpoint's waiting line however its check ends.
struct ClearOnDrop<'a>(&'a WaitLines, &'a str);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.clear(self.1);
    }
}

struct Reply {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// The first [`SHOWN_BYTES`] bytes of a body on one line, quoted.
fn shown(body: &[u8]) -> String {
    let head = &body[..body.len().min(SHOWN_BYTES)];
    let text: String = String::from_utf8_lossy(head)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let more = if body.len() > SHOWN_BYTES { "…" } else { "" };
    if text.trim().is_empty() {
        "<empty body>".to_owned()
    } else {
        format!("{:?}{more}", text)
    }
}

/// The pause before the next attempt: [`RETRY_EVERY`], or as long as the server's
/// `Retry-After` asks when that is longer, but never past the end of the wait (`left`).
fn pause(retry_after: Option<Duration>, left: Duration) -> Duration {
    retry_after
        .map_or(RETRY_EVERY, |asked| asked.max(RETRY_EVERY))
        .min(left)
}

/// `2 s`, `0.5 s`: a wait as a server's `Retry-After` gave it.
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// "connection refused" and the like, from the error's innermost cause.
fn connect_reason(e: &reqwest::Error) -> String {
    let mut last = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    let lower = last.to_ascii_lowercase();
    if lower.contains("refused") {
        "connection refused".to_owned()
    } else if lower.contains("timed out") {
        "connection timed out".to_owned()
    } else {
        format!("cannot connect: {last}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_attempt_comes_no_sooner_than_retry_after_asks() {
        let s = Duration::from_secs_f64;
        let long = s(900.0);
        assert_eq!(pause(None, long), RETRY_EVERY);
        assert_eq!(pause(Some(s(3.0)), long), s(3.0));
        assert_eq!(pause(Some(s(0.2)), long), RETRY_EVERY, "never a busy loop");
        assert_eq!(pause(Some(s(3.0)), s(0.5)), s(0.5), "the wait ends first");
    }

    #[test]
    fn shown_bodies_are_bounded_and_on_one_line() {
        let html = format!("<html>\n<body>{}</body></html>", "x".repeat(500));
        let text = shown(html.as_bytes());
        assert!(!text.contains('\n'));
        assert!(
            text.starts_with("\"<html> <body>") && text.ends_with('…'),
            "{text}"
        );
        assert_eq!(shown(b" \n"), "<empty body>");
    }

    #[test]
    fn endpoints_in_use_follow_the_roles_and_skip_the_embedded_simulator() {
        let text = r#"
[endpoints.gpu]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
[endpoints.judge-gpu]
base_url = "http://127.0.0.1:8001/v1"
model = "small"
[endpoints.sim]
base_url = "embedded-sim"
model = "tmas-sim"
[groups]
main = ["gpu", "sim"]
judging = ["judge-gpu"]
spare = ["gpu"]
[roles.solution]
group = "main"
[roles.verification]
group = "main"
[roles.summary]
group = "main"
[roles.experience]
group = "main"
[roles.guideline]
group = "main"
[roles.judge]
group = "judging"
"#;
        let mut config = Config::from_toml_str(text, "t").expect("valid");
        assert_eq!(endpoints_in_use(&config), ["gpu", "judge-gpu"]);
        config.judge.enabled = false;
        assert_eq!(endpoints_in_use(&config), ["gpu"]);
        // RSE's extractor (default group: every endpoint) is checked only for RSE.
        config.method.name = crate::config::MethodName::Rse;
        assert_eq!(endpoints_in_use(&config), ["gpu", "judge-gpu"]);
        // With embeddings, the embedding role's endpoint gets the embeddings check only;
        // one serving chat roles too gets both.
        config.method.rse_dedup = crate::config::BankDedup::Embeddings;
        config.roles[Role::Embedding].group = "spare".into();
        let uses = endpoint_uses(&config);
        let both = Uses {
            chat: true,
            embeddings: true,
        };
        assert_eq!(uses["gpu"], both);
        config.endpoints.insert(
            "emb".into(),
            EndpointConfig::new("http://127.0.0.1:8002/v1", "bge-m3"),
        );
        config.groups.insert("embed".into(), vec!["emb".into()]);
        config.roles[Role::Embedding].group = "embed".into();
        // (The extractor's default group would now hold `emb` too.)
        config.roles[Role::Extraction].group = "main".into();
        let uses = endpoint_uses(&config);
        assert_eq!(
            uses["emb"],
            Uses {
                chat: false,
                embeddings: true
            }
        );
        assert!(!uses["gpu"].embeddings);
        // Not without embeddings.
        config.method.rse_dedup = crate::config::BankDedup::Jaccard;
        assert!(!endpoint_uses(&config).contains_key("emb"));
    }

    /// The roles probed are the ones the configured method declares (and the judge's).
    #[test]
    fn endpoints_of_roles_the_method_never_calls_are_not_checked() {
        let text = r#"
[endpoints.gen]
base_url = "http://127.0.0.1:8000/v1"
model = "big"
[endpoints.check]
base_url = "http://127.0.0.1:8001/v1"
model = "small"
[groups]
gen = ["gen"]
check = ["check"]
[roles.solution]
group = "gen"
[roles.verification]
group = "check"
[roles.summary]
group = "gen"
[roles.experience]
group = "gen"
[roles.guideline]
group = "gen"
[roles.judge]
group = "gen"
[roles.critique]
group = "gen"
"#;
        let mut config = Config::from_toml_str(text, "t").expect("valid");
        assert_eq!(endpoints_in_use(&config), ["check", "gen"]);
        config.method.name = crate::config::MethodName::SelfRefine;
        assert_eq!(endpoints_in_use(&config), ["gen"]);
        config.method.name = crate::config::MethodName::VerifyRefine;
        assert_eq!(endpoints_in_use(&config), ["check", "gen"]);
    }

    #[test]
    fn output_that_holds_a_run_is_refused_and_a_new_one_creates_nothing() {
        let dir = std::env::temp_dir().join(format!("tmas-preflight-{}", std::process::id()));
        let out = dir.join("a/b/run");
        std::fs::create_dir_all(&dir).unwrap();
        check_output(&out).unwrap();
        assert!(!dir.join("a").exists(), "the check creates nothing");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(crate::store::DB_FILE), b"").unwrap();
        let e = check_output(&out).unwrap_err();
        assert!(
            e.contains("already holds a run") && e.contains("--resume"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
