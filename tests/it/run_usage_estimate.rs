//! Streamed calls to a server that sends no usage (llama.cpp's server): the `tmas` binary
//! on its embedded simulator told not to send usage on streams. Every answered call's
//! tokens are the client's estimate, never 0 — bytes ÷ 4 without a tokenizer, the
//! configured `tokenizer.json`'s count with one — and marked as estimated in the run store
//! (`calls.tokens_estimated`), in `run.json` (`usage_by_role.*.estimated_calls`) and in
//! the problem records' call counts. With usage sent, nothing is marked.

use std::path::Path;

use tmas_client::TokenCounter;
use tmas_client::wire::ChatMessage;

use crate::support::cli::*;

/// Per answered chat call: role, prompt text, reply texts, stored tokens and flag.
struct Row {
    role: String,
    prompt: String,
    reply: String,
    reasoning: String,
    prompt_tokens: i64,
    completion_tokens: i64,
    estimated: i64,
    streamed: bool,
}

fn rows(dir: &Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(dir.join("run.sqlite")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT c.role, p.text, COALESCE(c.content, ''), COALESCE(c.reasoning, ''), \
             c.prompt_tokens, c.completion_tokens, c.tokens_estimated, \
             COALESCE(json_extract(c.request_json, '$.stream'), 0) \
             FROM calls AS c JOIN prompt_texts AS p ON p.id = c.prompt_id WHERE c.ok = 1",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok(Row {
            role: r.get(0)?,
            prompt: r.get(1)?,
            reply: r.get(2)?,
            reasoning: r.get(3)?,
            prompt_tokens: r.get(4)?,
            completion_tokens: r.get(5)?,
            estimated: r.get(6)?,
            streamed: r.get::<_, i64>(7)? != 0,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn run(config: &Path, dir: &Path, stream_usage: bool, extra: &[&str]) -> serde_json::Value {
    let usage = format!("simulator.stream_usage={stream_usage}");
    let mut args = vec![
        "run",
        "-c",
        path_arg(config),
        "--out",
        path_arg(dir),
        "--progress-every",
        "0",
        "--set",
        "endpoints.sim.stream=true",
        "--set",
        &usage,
    ];
    args.extend_from_slice(extra);
    ok(tmas(&args), "streamed run");
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// A word-level `tokenizer.json` (a token per word or punctuation run, unknown words
/// included), so its counts differ from bytes ÷ 4.
fn write_tokenizer(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tokenizer.json");
    std::fs::write(
        &path,
        r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}"#,
    )
    .unwrap();
    path
}

#[test]
fn streamed_calls_without_usage_get_estimated_marked_token_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), "embedded-sim", 2, 2);

    // With usage: the server's counts, nothing marked.
    let with = tmp.path().join("with-usage");
    let summary = run(&config, &with, true, &[]);
    let stored = rows(&with);
    assert!(!stored.is_empty());
    assert!(
        stored
            .iter()
            .all(|r| r.estimated == 0 && r.completion_tokens > 0)
    );
    assert!(
        summary["usage_by_role"]["solution"]
            .get("estimated_calls")
            .is_none(),
        "{summary}"
    );

    // Without usage, no tokenizer: bytes ÷ 4, marked everywhere.
    let bytes = tmp.path().join("bytes");
    let summary = run(&config, &bytes, false, &[]);
    let stored = rows(&bytes);
    assert!(
        stored.iter().any(|r| !r.streamed),
        "judge calls are not streamed"
    );
    for r in &stored {
        if !r.streamed {
            // Answered whole, with usage: the server's counts.
            assert_eq!(r.estimated, 0, "{}", r.role);
            continue;
        }
        assert_eq!(r.estimated, 1, "{} call not marked", r.role);
        assert_eq!(
            r.prompt_tokens,
            r.prompt.len().div_ceil(4) as i64,
            "{}",
            r.role
        );
        let reply = r.reply.len() + r.reasoning.len();
        assert_eq!(r.completion_tokens, reply.div_ceil(4) as i64, "{}", r.role);
        assert!(r.prompt_tokens > 0 && r.completion_tokens > 0, "{}", r.role);
    }
    let solution = &summary["usage_by_role"]["solution"];
    assert_eq!(solution["estimated_calls"], solution["calls"], "{summary}");
    assert!(solution["completion_tokens"].as_u64().unwrap() > 0);
    let record: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(bytes.join("results.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let calls = &record["outcome"]["iterations"][0]["calls"];
    assert!(calls["completion_tokens"].as_u64().unwrap() > 0, "{calls}");
    assert_eq!(
        calls["estimated_completion_tokens"], calls["completion_tokens"],
        "{calls}"
    );

    // Without usage, with the endpoint's tokenizer: its counts.
    let tokenizer = write_tokenizer(tmp.path());
    let setting = format!("endpoints.sim.tokenizer={}", tokenizer.display());
    let counted = tmp.path().join("tokenizer");
    run(&config, &counted, false, &["--set", &setting]);
    let counter = TokenCounter::from_estimate(&tmas_client::TokenEstimate::Tokenizer {
        path: tokenizer.clone(),
    })
    .unwrap();
    let words = |text: &str| -> i64 {
        if text.is_empty() {
            return 0;
        }
        // `count` of one message adds the template's 4 + 3 tokens.
        i64::from(counter.count(&[ChatMessage::user(text)])) - 7
    };
    let mut differs = false;
    for r in rows(&counted).iter().filter(|r| r.streamed) {
        assert_eq!(r.estimated, 1, "{} call not marked", r.role);
        assert_eq!(r.prompt_tokens, words(&r.prompt) + 7, "{}", r.role);
        let expected = words(&r.reply) + words(&r.reasoning);
        assert_eq!(r.completion_tokens, expected, "{}", r.role);
        differs |= expected != (r.reply.len() + r.reasoning.len()).div_ceil(4) as i64;
    }
    assert!(
        differs,
        "the tokenizer's counts equal bytes ÷ 4: the test shows nothing"
    );
}
