//! The official `openai` Python client against `tmas serve` (`scripts/serve_openai_client.py`):
//! models, an answer with usage, a stream with progress and usage, and a refused request,
//! as that client parses them.
//!
//! Needs a Python with `openai` (`support::python`: `$TMAS_PYTHON`, which `.ci/run` points
//! at a virtual environment with the client, or `python3`); skipped loudly without one,
//! unless `TMAS_REQUIRE_PYTHON=1` (set by `.ci/run`) makes that a failure.

use std::process::Command;

use serde_json::Value;

use crate::support::cli::{Sim, repo};
use crate::support::python::python_with;
use crate::support::serve::{Server, write_serve_config};

#[test]
fn the_official_openai_client_reads_answers_streams_usage_and_errors() {
    let Some(python) = python_with(&["openai"], "the openai client test of tmas serve") else {
        return;
    };
    let sim = Sim::start(0, 2);
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(
        dir.path(),
        &sim.root,
        "[serve]\napi_key_envs = [\"SERVE_OPENAI_TEST_KEY\"]\n",
    );
    let server = Server::start(&config, &[("SERVE_OPENAI_TEST_KEY", "k-123")]);
    let out = Command::new(&python)
        .current_dir(repo())
        .arg("scripts/serve_openai_client.py")
        .arg(format!("http://{}/v1", server.addr))
        .arg("tmas/tmas-sim")
        .arg("k-123")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let models = got["models"].as_array().unwrap();
    assert!(models.iter().any(|m| m == "tmas/tmas-sim"), "{got}");
    assert!(models.iter().any(|m| m == "tmas-sim"), "{got}");

    // N=2, M=1, T=2: 2 × (2 × 3 + 2) = 16 calls.
    assert!(
        got["answer"].as_str().unwrap().contains("\\boxed{"),
        "{got}"
    );
    assert_eq!(got["finish_reason"], "stop");
    let usage = &got["usage"];
    assert_eq!(
        usage["tmas"]["calls"], 16,
        "the extension survives the client: {usage}"
    );
    let (p, c) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    );
    assert!(p > 0 && c > 0);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), p + c);

    let reasoning = got["stream_reasoning"].as_str().unwrap();
    assert!(reasoning.contains("Iteration 1 started."), "{got}");
    assert!(reasoning.contains("Iteration 2 done:"), "{got}");
    assert!(got["stream_answer"].as_str().unwrap().contains("\\boxed{"));
    assert_eq!(got["stream_usage"]["tmas"]["calls"], 16, "{got}");

    let bad = &got["bad_request"];
    assert_eq!(bad["status"], 400, "{got}");
    assert_eq!(bad["body"]["param"], "tmas.n", "{got}");
    assert_eq!(
        sim.requests(),
        32,
        "two answered requests, the refused one made none"
    );
}
