//! The single writer: a dedicated thread that owns the read-write connection and commits
//! facts in batches (group commit).
//!
//! It blocks for the first fact, then sleeps for [`LINGER`], takes every fact that
//! arrived meanwhile (up to [`MAX_BATCH`]) and commits all of it in one transaction.
//! Without the linger, completions that arrive evenly spread (long-tailed latencies) were
//! committed a few at a time — ~38,000 transactions for 82,000 calls in `tmas bench eval`
//! with lognormal latency — each rewriting its B-tree pages into the WAL and waking this
//! thread. 1 ms cut the writer's share of CPU by ~7 % of the orchestrator's total while a
//! caller waiting for its acknowledgement waits at most 1 ms longer (no throughput loss
//! measurable in `tmas bench client --store`; 2 ms cost 1.5 %, 5 ms 4.5 %;
//! docs/performance-log.md). With WAL and `synchronous=NORMAL` a commit is a write to the WAL
//! file without fsync: it survives the process being killed (not a power cut), which is
//! what resume needs.

use std::borrow::Cow;
use std::sync::Arc;

use std::sync::mpsc::Receiver;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;
use tmas_client::wire::ModelRequest;

use super::by_allocation::ByAllocation;
use super::prompts::{self, PromptCache};
use super::record_texts;
use super::rows::now_ms;
use super::rows::{
    CallRow, CandidateRow, Envelope, Fact, JudgedIterationRows, ProblemRow, StatusRow, WriteResult,
};
use super::schema::EMBEDDINGS_KIND;
use crate::record::ProblemRecord;

/// Most facts in one transaction.
pub const MAX_BATCH: usize = 1000;

/// How long a batch stays open for more facts after its first one arrives (a `Close`
/// fact ends it at once).
pub const LINGER: Duration = Duration::from_millis(1);

/// Runs until a `Close` fact arrives or every sender is gone. `on_error` is told about
/// each failed batch (the first one stops the run). Returns the CPU seconds (user +
/// system) this thread used, where the platform can tell: what the run store cost, apart
/// from the callers' encoding.
pub fn run(conn: Connection, rx: Receiver<Envelope>, on_error: impl Fn(&str)) -> Option<f64> {
    let batches = write_batches(conn, rx, on_error);
    let cpu_s = crate::resources::this_thread_cpu_seconds();
    tracing::debug!(batches, cpu_s, "run store writer stopped");
    cpu_s
}

/// The writer's loop; returns how many batches it committed or tried to.
fn write_batches(mut conn: Connection, rx: Receiver<Envelope>, on_error: impl Fn(&str)) -> u64 {
    let mut cache = WriterCache::default();
    let mut batches: u64 = 0;
    loop {
        let Ok(first) = rx.recv() else { break };
        let mut batch = vec![first];
        take_queued(&rx, &mut batch);
        if batch.len() < MAX_BATCH && !ends_with_close(&batch) {
            // The linger is a sleep, not a wait on the channel: a thread waiting on the
            // channel is woken (a futex wake and a context switch) by every fact sent, a
            // sleeping one is not. With spread-out completions that was one wake-up per
            // call.
            std::thread::sleep(LINGER);
            take_queued(&rx, &mut batch);
        }
        batches += 1;
        let closing = ends_with_close(&batch);
        let result: WriteResult = commit(&mut conn, &batch, &mut cache).map_err(|e| {
            // The batch was rolled back: the cache may name rows it never committed.
            cache = WriterCache::default();
            let text: Arc<str> = describe(&e).into();
            on_error(&text);
            text
        });
        if closing && result.is_ok() {
            // Fold the WAL into the main file so `sqlite3 run.sqlite` sees one file.
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        for envelope in batch {
            if let Some(ack) = envelope.ack {
                let _ = ack.send(result.clone());
            }
        }
        if closing {
            break;
        }
    }
    batches
}

fn ends_with_close(batch: &[Envelope]) -> bool {
    batch.last().is_some_and(|e| matches!(e.fact, Fact::Close))
}

/// Moves the facts already queued into `batch`, up to [`MAX_BATCH`] and never past a
/// `Close`.
fn take_queued(rx: &Receiver<Envelope>, batch: &mut Vec<Envelope>) {
    while batch.len() < MAX_BATCH && !ends_with_close(batch) {
        match rx.try_recv() {
            Ok(next) => batch.push(next),
            Err(_) => break,
        }
    }
}

/// A message that says what to do about the common failures.
fn describe(err: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode;
    match err.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => format!(
            "the disk is full ({err}); everything committed before is kept — free space and \
             resume"
        ),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            format!("the run store is not writable ({err})")
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "the run store is locked by another process ({err}); is another tmas or a \
             sqlite3 write transaction using it?"
        ),
        _ => format!("writing the run store failed: {err}"),
    }
}

/// What the writer remembers between batches, all of it about committed rows.
#[derive(Default)]
pub(super) struct WriterCache {
    prompts: PromptCache,
    /// The key of each answered call by the allocation of its reply, while the reply is
    /// in use: the strategy quotes a reply without think blocks as that same allocation
    /// ([`crate::method::answer::visible_text`]), so a record's text found here is that
    /// call's stored reply without reading it back (a call key is answered at most once
    /// in a session, so the entry cannot name a reply that was replaced).
    replies: ByAllocation<Arc<str>>,
}

fn commit(
    conn: &mut Connection,
    batch: &[Envelope],
    cache: &mut WriterCache,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for envelope in batch {
        match &envelope.fact {
            Fact::Call(row) => insert_call(&tx, row, cache)?,
            Fact::Bank {
                problem_id,
                iteration,
                version,
            } => {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO bank_versions \
                     (problem_id, bank, version, iteration, items_json, rejected_json) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    problem_id,
                    &*version.bank,
                    version.version,
                    iteration,
                    json(&version.items),
                    json(&version.rejected)
                ])?;
            }
            Fact::Problems(rows) => insert_problems(&tx, rows)?,
            Fact::Status(row) => update_status(&tx, row)?,
            Fact::Done { record, iterations } => {
                insert_done(&tx, record, *iterations, &cache.replies)?
            }
            Fact::Judged(rows) => insert_judged(&tx, rows)?,
            Fact::Meta(pairs) => {
                for (k, v) in pairs {
                    tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?
                        .execute(params![k, v])?;
                }
            }
            Fact::Trace {
                problem_id,
                trace_id,
                at_ms,
            } => super::traces::insert(&tx, problem_id, trace_id, *at_ms)?,
            Fact::DropFailedCalls(keys) => {
                let mut stmt =
                    tx.prepare_cached("DELETE FROM calls WHERE call_key = ?1 AND ok = 0")?;
                for key in keys {
                    stmt.execute([&**key])?;
                }
            }
            Fact::Flush | Fact::Close => {}
        }
    }
    tx.commit()
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("\"unencodable: {e}\""))
}

/// The JSON string of a unit enum variant (`"exploit"` → `exploit`).
pub fn variant_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => format!("unencodable: {e}"),
    }
}

fn insert_call(
    tx: &Transaction<'_>,
    row: &CallRow,
    cache: &mut WriterCache,
) -> rusqlite::Result<()> {
    let (prompt_id, request) = match &row.request {
        ModelRequest::Chat(r) => (
            prompts::insert_messages(tx, &r.messages, &mut cache.prompts)?,
            request_summary(&row.group, row.asked_at_ms, r),
        ),
        ModelRequest::Embeddings(r) => (
            prompts::insert(tx, &r.prompt_text(), &mut cache.prompts)?,
            embeddings_summary(&row.group, row.asked_at_ms, r),
        ),
    };
    if let Ok(r) = &row.outcome
        && r.embeddings.is_none()
    {
        cache.replies.insert(&r.content, row.key_text.clone());
    }
    let k = &row.key;
    let mut stmt = tx.prepare_cached(
        "INSERT OR REPLACE INTO calls (call_key, problem_id, iteration, role, candidate, idx, \
         attempt, prompt_id, request_json, ok, content, reasoning, finish_reason, \
         prompt_tokens, completion_tokens, latency_ms, endpoint, attempts, max_tokens_sent, \
         error_kind, error_message, completed_at_ms, tokens_estimated) VALUES (?1, ?2, ?3, ?4, \
         ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, \
         ?23)",
    )?;
    // An embeddings reply's vectors go in `content`, read back by `StoreReader::call`.
    let content: Option<Cow<'_, str>> = match &row.outcome {
        Ok(r) => Some(match &r.embeddings {
            Some(vectors) => Cow::Owned(json(vectors)),
            None => Cow::Borrowed(&r.content),
        }),
        Err(_) => None,
    };
    match &row.outcome {
        Ok(r) => stmt.execute(params![
            &*row.key_text,
            &*k.problem,
            k.iteration,
            &*k.role,
            k.candidate,
            k.index,
            k.attempt,
            prompt_id,
            request,
            1,
            content.as_deref(),
            r.reasoning.as_deref(),
            r.finish_reason.as_deref(),
            r.usage.prompt_tokens as i64,
            r.usage.completion_tokens as i64,
            r.latency_ms as i64,
            &*r.endpoint,
            r.attempts,
            r.max_tokens_sent,
            None::<String>,
            None::<String>,
            row.completed_at_ms,
            i64::from(r.usage.estimated),
        ])?,
        Err(f) => stmt.execute(params![
            &*row.key_text,
            &*k.problem,
            k.iteration,
            &*k.role,
            k.candidate,
            k.index,
            k.attempt,
            prompt_id,
            request,
            0,
            None::<String>,
            None::<String>,
            None::<String>,
            None::<i64>,
            None::<i64>,
            None::<i64>,
            f.endpoint.as_deref(),
            None::<u32>,
            None::<u32>,
            f.kind.as_str(),
            &f.message,
            row.completed_at_ms,
            0,
        ])?,
    };
    Ok(())
}

/// `calls.request_json`: when the call was asked (`asked_at_ms`, ms since the epoch),
/// group, sampling, stream and, per message, its role, length and first 160 characters.
/// Keys in alphabetical order and the sampling values widened to f64, as the
/// `serde_json::Value` this once was printed them; written straight from the row instead
/// of through a `Value` tree (one map and a few strings per call).
fn request_summary(group: &str, asked_at_ms: i64, r: &tmas_client::wire::ChatRequest) -> String {
    #[derive(Serialize)]
    struct Message<'a> {
        bytes: usize,
        head: std::borrow::Cow<'a, str>,
        role: &'a str,
    }
    #[derive(Serialize)]
    struct Request<'a> {
        asked_at_ms: i64,
        group: &'a str,
        max_tokens: u32,
        messages: Vec<Message<'a>>,
        stream: bool,
        temperature: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        top_k: Option<u32>,
        top_p: f64,
    }
    const HEAD_CHARS: usize = 160;
    fn head(text: &tmas_client::wire::PromptText) -> std::borrow::Cow<'_, str> {
        // Usually the first segment holds the head: borrow it.
        if let Some(first) = text.segments().first()
            && let Some((end, _)) = first.char_indices().nth(HEAD_CHARS)
        {
            return first[..end].into();
        }
        text.chars().take(HEAD_CHARS).collect::<String>().into()
    }
    json(&Request {
        asked_at_ms,
        group,
        max_tokens: r.sampling.max_tokens,
        messages: r
            .messages
            .iter()
            .map(|m| Message {
                bytes: m.content.len(),
                head: head(&m.content),
                role: &m.role,
            })
            .collect(),
        stream: r.stream,
        temperature: f64::from(r.sampling.temperature),
        top_k: r.sampling.top_k,
        top_p: f64::from(r.sampling.top_p),
    })
}

/// `calls.request_json` of an embeddings call: when it was asked, group, the kind (which
/// replay reads) and, per input, its length and first 160 characters. Keys in
/// alphabetical order, as for a chat call.
fn embeddings_summary(
    group: &str,
    asked_at_ms: i64,
    r: &tmas_client::wire::EmbeddingRequest,
) -> String {
    #[derive(Serialize)]
    struct Input<'a> {
        bytes: usize,
        head: std::borrow::Cow<'a, str>,
    }
    #[derive(Serialize)]
    struct Request<'a> {
        asked_at_ms: i64,
        group: &'a str,
        inputs: Vec<Input<'a>>,
        kind: &'a str,
    }
    const HEAD_CHARS: usize = 160;
    json(&Request {
        asked_at_ms,
        group,
        inputs: r
            .inputs
            .iter()
            .map(|i| Input {
                bytes: i.len(),
                head: match i.char_indices().nth(HEAD_CHARS) {
                    Some((end, _)) => i[..end].into(),
                    None => (&**i).into(),
                },
            })
            .collect(),
        kind: EMBEDDINGS_KIND,
    })
}

fn insert_problems(tx: &Transaction<'_>, rows: &[ProblemRow]) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO problems (problem_id, ordinal, question, reference_answer, \
         reference_solution, grading_guidelines, status, updated_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7)",
    )?;
    let now = now_ms();
    for r in rows {
        stmt.execute(params![
            r.problem_id,
            r.ordinal,
            r.question,
            r.reference_answer,
            r.reference_solution,
            r.grading_guidelines,
            now
        ])?;
    }
    Ok(())
}

fn update_status(tx: &Transaction<'_>, row: &StatusRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE problems SET status = ?2, error = ?3, updated_at_ms = ?4 WHERE problem_id = ?1",
    )?
    .execute(params![row.problem_id, row.status, row.error, now_ms()])?;
    Ok(())
}

fn insert_done(
    tx: &Transaction<'_>,
    record: &ProblemRecord,
    iterations: u32,
    replies: &ByAllocation<Arc<str>>,
) -> rusqlite::Result<()> {
    let p = record.problem_id.as_str();
    for table in ["candidates", "verifications", "summaries", "judge_verdicts"] {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE problem_id = ?1"))?
            .execute([p])?;
    }
    for (t, it) in record.outcome.iterations.iter().enumerate() {
        for c in &it.candidates {
            insert_candidate(tx, p, it.iteration, &CandidateRow::of(c))?;
            for v in &c.verifications {
                tx.prepare_cached(
                    "INSERT INTO verifications (problem_id, iteration, candidate, idx, status, \
                     score, attempts, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?
                .execute(params![
                    p,
                    it.iteration,
                    c.index,
                    v.index,
                    variant_name(&v.status),
                    v.score,
                    v.attempts,
                    v.text.as_deref()
                ])?;
            }
            if let Some(summary) = &c.summary {
                tx.prepare_cached(
                    "INSERT INTO summaries (problem_id, iteration, candidate, text) \
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![p, it.iteration, c.index, &**summary])?;
            }
            let judged = record
                .judgments
                .get(t)
                .and_then(|row| row.get(c.index as usize))
                .and_then(Option::as_ref);
            if let Some(j) = judged {
                insert_verdict(tx, p, it.iteration, c.index, j)?;
            }
        }
    }
    let (record_json, record_texts) = lean_record(tx, record, replies)?;
    tx.prepare_cached(
        "UPDATE problems SET status = 'done', error = NULL, iterations = ?2, \
         record_json = ?3, record_texts = ?4, updated_at_ms = ?5 WHERE problem_id = ?1",
    )?
    .execute(params![p, iterations, record_json, record_texts, now_ms()])?;
    Ok(())
}

/// One judged iteration of a problem not done yet: its `candidates` and `judge_verdicts`
/// rows replace the iteration's earlier ones (a resume judging it again, or a session
/// that ran the problem with other settings).
fn insert_judged(tx: &Transaction<'_>, rows: &JudgedIterationRows) -> rusqlite::Result<()> {
    let p = &*rows.problem_id;
    for table in ["candidates", "judge_verdicts"] {
        tx.prepare_cached(&format!(
            "DELETE FROM {table} WHERE problem_id = ?1 AND iteration = ?2"
        ))?
        .execute(params![p, rows.iteration])?;
    }
    for (c, judged) in rows.candidates.iter().zip(&rows.judgments) {
        insert_candidate(tx, p, rows.iteration, c)?;
        if let Some(j) = judged {
            insert_verdict(tx, p, rows.iteration, c.index, j)?;
        }
    }
    Ok(())
}

fn insert_candidate(
    tx: &Transaction<'_>,
    p: &str,
    iteration: u32,
    c: &CandidateRow,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        // No solution column: the solution call's `calls.content` holds it (view
        // `candidate_solutions`), and so does `record_json`.
        "INSERT INTO candidates (problem_id, iteration, candidate, branch, mode, status, \
         scores_json, average_score, fully_verified) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        p,
        iteration,
        c.index,
        variant_name(&c.branch),
        variant_name(&c.mode),
        variant_name(&c.status),
        json(&c.scores),
        c.average_score,
        c.fully_verified
    ])?;
    Ok(())
}

fn insert_verdict(
    tx: &Transaction<'_>,
    p: &str,
    iteration: u32,
    candidate: u32,
    j: &crate::eval::judge::JudgeRecord,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO judge_verdicts (problem_id, iteration, candidate, answer, \
         rule_outcome, llm_json, score, undecided, disagreement) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        p,
        iteration,
        candidate,
        j.answer,
        variant_name(&j.rule.outcome),
        json(&j.llm),
        j.score,
        j.undecided,
        j.disagreement
    ])?;
    Ok(())
}

/// `record` as `problems.record_json` holds it: without the texts its answered calls hold
/// (`record_texts`, NULL when none was taken out; [`record_texts`]). A text that is a
/// reply `replies` knows is taken as that call's; any other is compared with the stored
/// reply.
pub(super) fn lean_record(
    tx: &Transaction<'_>,
    record: &ProblemRecord,
    replies: &ByAllocation<Arc<str>>,
) -> rusqlite::Result<(String, Option<String>)> {
    let mut lean = record.clone();
    let refs = record_texts::strip(&mut lean, |key, text| {
        if replies.get(text).is_some_and(|k| **k == *key) {
            return Ok(true);
        }
        stored_reply_is(tx, key, text)
    })?;
    let encode_failed = |e: serde_json::Error| rusqlite::Error::ToSqlConversionFailure(e.into());
    let texts = if refs.is_empty() {
        None
    } else {
        Some(record_texts::encode(&refs).map_err(encode_failed)?)
    };
    let json = serde_json::to_string(&lean).map_err(encode_failed)?;
    Ok((json, texts))
}

/// Whether the answered call `key` is stored with a reply that, think-stripped, is `text`
/// (read in place: the reply is not copied out of SQLite).
fn stored_reply_is(tx: &Transaction<'_>, key: &str, text: &str) -> rusqlite::Result<bool> {
    tx.prepare_cached("SELECT content FROM calls WHERE call_key = ?1 AND ok = 1")?
        .query_row([key], |r| {
            Ok(match r.get_ref(0)? {
                ValueRef::Text(bytes) => {
                    std::str::from_utf8(bytes).is_ok_and(|c| record_texts::reply_is(c, text))
                }
                _ => false,
            })
        })
        .optional()
        .map(|found| found.unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::{Envelope, Fact};

    fn meta(k: &str, v: String) -> Envelope {
        Envelope {
            fact: Fact::Meta(vec![(k.into(), v)]),
            ack: None,
        }
    }

    /// What `calls.request_json` was when it was built as a `serde_json::Value`.
    fn request_as_value(group: &str, r: &tmas_client::wire::ChatRequest) -> String {
        serde_json::json!({
            "asked_at_ms": 1_700_000_000_123i64,
            "group": group,
            "messages": r.messages.iter().map(|m| serde_json::json!({
                "role": &*m.role,
                "bytes": m.content.len(),
                "head": m.content.chars().take(160).collect::<String>(),
            })).collect::<Vec<_>>(),
            "temperature": r.sampling.temperature,
            "top_p": r.sampling.top_p,
            "max_tokens": r.sampling.max_tokens,
            "stream": r.stream,
        })
        .to_string()
    }

    #[test]
    fn the_request_summary_is_what_the_value_tree_printed() {
        use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, PromptText, Sampling};
        let long = "ü\"\\ line\n".repeat(40);
        let texts: Vec<PromptText> = vec![
            "".into(),
            "short \"quoted\"".into(),
            long.as_str().into(),
            PromptText::from_segments(vec!["é".repeat(100).into(), long.clone().into()]),
        ];
        for (i, text) in texts.into_iter().enumerate() {
            for messages in [
                vec![ChatMessage::user(text.clone())],
                vec![ChatMessage::system("sys"), ChatMessage::user(text.clone())],
            ] {
                let request = ChatRequest {
                    messages,
                    sampling: Sampling {
                        temperature: 0.7 + i as f32 / 10.0,
                        top_p: 0.95,
                        max_tokens: 65_536,
                        top_k: None,
                    },
                    tags: CallTags::default(),
                    stream: i % 2 == 0,
                };
                assert_eq!(
                    request_summary("default", 1_700_000_000_123, &request),
                    request_as_value("default", &request),
                    "text {i}"
                );
            }
        }
    }

    #[test]
    fn the_embeddings_summary_is_what_the_value_tree_printed() {
        use tmas_client::wire::{CallTags, EmbeddingRequest};
        let long = "ü\"\\ line\n".repeat(40);
        let request = EmbeddingRequest {
            inputs: vec!["".into(), "short".into(), long.as_str().into()],
            tags: CallTags::default(),
        };
        let as_value = serde_json::json!({
            "asked_at_ms": 7,
            "group": "emb",
            "kind": EMBEDDINGS_KIND,
            "inputs": request.inputs.iter().map(|i| serde_json::json!({
                "bytes": i.len(),
                "head": i.chars().take(160).collect::<String>(),
            })).collect::<Vec<_>>(),
        })
        .to_string();
        assert_eq!(embeddings_summary("emb", 7, &request), as_value);
    }

    #[test]
    fn a_full_disk_fails_the_batch_with_a_clear_message_and_keeps_earlier_commits() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::ensure_schema_for_tests(&mut conn);
        let mut cache = WriterCache::default();
        commit(&mut conn, &[meta("kept", "yes".into())], &mut cache).unwrap();
        // A page limit makes SQLite report SQLITE_FULL, as a full disk does.
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
            .unwrap();
        let big = meta("big", "x".repeat(1 << 20));
        let err = commit(&mut conn, &[big], &mut cache).unwrap_err();
        let text = describe(&err);
        assert!(text.contains("disk is full"), "{text}");
        let kept: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'kept'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kept, "yes");
        let big: i64 = conn
            .query_row("SELECT COUNT(*) FROM meta WHERE key = 'big'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(big, 0, "the failed batch left nothing behind");
    }
}
