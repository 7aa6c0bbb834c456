//! Migrations of run stores written by older `tmas` versions.
//!
//! [`super::version::ensure`] runs them inside its transaction when a store is opened for
//! writing (`tmas run --resume`), so a migration either completes or leaves the store as
//! it was. `tmas export` opens stores read-only and does not migrate: the tables it reads
//! (`meta`, `problems`, `bank_versions`, `calls` usage columns) are the same in version 1.
//!
//! Version 1 → 2: prompts move into content-defined chunks. Every version-1 prompt is
//! chunked, `calls.prompt_sha256` becomes `calls.prompt_id` (the new id of the same text,
//! so resume still recognises unchanged prompts), `candidates.solution` is dropped (the
//! solution call's `calls.content` and `problems.record_json` hold it) and so is the
//! `calls_by_problem` index. The pages freed by the old `prompts` table are reused by
//! later writes; `sqlite3 run.sqlite VACUUM` gives them back to the file system.
//!
//! Version 2 → 3: `problems` gains `reference_solution` and `grading_guidelines`
//! (NULL in migrated rows: an older store never kept them, so its proof problems are
//! graded against the reference answer, as that `tmas` did).
//!
//! Version 3 → 4: `problems` gains `record_texts`, and each stored record loses the texts
//! its answered calls hold, as the version-4 writer stores it ([`super::record_texts`]).
//! A record is slimmed only if encoding it again gives back its stored bytes: one
//! written by an older `tmas` may encode differently today, and the run directory's
//! `problems/<id>.json` is compared with the record byte for byte, so such a record stays
//! whole. Prompts are not rewritten: their ids stay those of whole-text chunking, and
//! resume recognises them by text ([`super::read::StoreReader::prompt_matches`]).
//!
//! Version 4 → 5: `calls` gains `tokens_estimated` (0 in migrated rows: an older `tmas`
//! recorded the server's counts as they came, 0 for a server that sent none).

use std::sync::Arc;

use rusqlite::{Transaction, params};

use super::prompts::{self, PromptCache};
use super::schema::{CALLS, CANDIDATE_SOLUTIONS_VIEW, PROMPT_TABLES, PROMPT_TEXTS_VIEW};
use crate::record::ProblemRecord;

/// Columns of `calls` other than the prompt reference, the same in versions 1 and 2.
const CALL_COLUMNS: &str = "call_key, problem_id, iteration, role, candidate, idx, attempt, \
    request_json, ok, content, reasoning, finish_reason, prompt_tokens, completion_tokens, \
    latency_ms, endpoint, attempts, max_tokens_sent, error_kind, error_message, \
    completed_at_ms";

/// Rewrites a version-1 store as version 2 (the caller sets `user_version` and commits).
pub fn from_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE prompts RENAME TO prompts_v1;
         ALTER TABLE calls RENAME TO calls_v1;
         CREATE TEMP TABLE prompt_ids (sha256 TEXT PRIMARY KEY, id TEXT NOT NULL);",
    )?;
    for part in [PROMPT_TABLES, CALLS, PROMPT_TEXTS_VIEW] {
        tx.execute_batch(part)?;
    }
    let mut cache = PromptCache::default();
    {
        let mut old = tx.prepare("SELECT sha256, text FROM prompts_v1")?;
        let mut rows = old.query([])?;
        let mut map = tx.prepare("INSERT OR REPLACE INTO temp.prompt_ids VALUES (?1, ?2)")?;
        while let Some(row) = rows.next()? {
            let sha: String = row.get(0)?;
            let text: Arc<str> = row.get::<_, String>(1)?.into();
            let id = prompts::insert(tx, &text, &mut cache)?;
            map.execute(params![sha, id])?;
        }
    }
    // `tmas` enforces `calls.prompt_id → prompts`, so a call whose prompt is missing
    // (possible only if the store was edited by hand) is dropped: resume sends it again.
    tx.execute_batch(&format!(
        "INSERT INTO calls ({CALL_COLUMNS}, prompt_id)
         SELECT {c}, m.id
         FROM calls_v1 AS c JOIN temp.prompt_ids AS m ON m.sha256 = c.prompt_sha256;
         DROP TABLE calls_v1;
         DROP TABLE prompts_v1;
         DROP TABLE temp.prompt_ids;
         ALTER TABLE candidates DROP COLUMN solution;",
        c = CALL_COLUMNS
            .split(", ")
            .map(|col| format!("c.{}", col.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    ))?;
    tx.execute_batch(CANDIDATE_SOLUTIONS_VIEW)
}

/// Adds the proof columns of version 3 to a version-2 store.
pub fn from_v2(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE problems ADD COLUMN reference_solution TEXT;
         ALTER TABLE problems ADD COLUMN grading_guidelines TEXT;",
    )
}

/// Adds `problems.record_texts` to a version-3 store and slims its records.
/// Version 4 → 5 (see the module docs). A store migrated from version 1 already has the
/// column: that migration rebuilds `calls` with this build's definition.
pub fn from_v4(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let has: i64 = tx.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('calls') WHERE name = 'tokens_estimated'",
        [],
        |r| r.get(0),
    )?;
    if has == 0 {
        tx.execute_batch(
            "ALTER TABLE calls ADD COLUMN tokens_estimated INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    Ok(())
}

pub fn from_v3(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE problems ADD COLUMN record_texts TEXT;")?;
    let ids: Vec<String> = tx
        .prepare("SELECT problem_id FROM problems WHERE record_json IS NOT NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    // One record in memory at a time (~2 MB each with 40 KB solutions at T = 5).
    for id in ids {
        let json: String = tx.query_row(
            "SELECT record_json FROM problems WHERE problem_id = ?1",
            [&id],
            |r| r.get(0),
        )?;
        // A record that does not parse stays as it is: reading it reports it.
        let Ok(record) = serde_json::from_str::<ProblemRecord>(&json) else {
            continue;
        };
        if serde_json::to_string(&record).ok().as_deref() != Some(json.as_str()) {
            continue;
        }
        drop(json);
        if let (lean, Some(texts)) = super::writer::lean_record(tx, &record, &Default::default())? {
            tx.execute(
                "UPDATE problems SET record_json = ?2, record_texts = ?3 WHERE problem_id = ?1",
                params![id, lean, texts],
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::store::chunks;
    use crate::store::schema::SCHEMA_VERSION;

    /// The version-1 schema, as `tmas` wrote it (to build old stores in tests).
    pub const V1_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS problems (
    problem_id       TEXT PRIMARY KEY,
    ordinal          INTEGER NOT NULL,
    question         TEXT NOT NULL,
    reference_answer TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    iterations       INTEGER,
    error            TEXT,
    record_json      TEXT,
    updated_at_ms    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS prompts (
    sha256 TEXT PRIMARY KEY,
    bytes  INTEGER NOT NULL,
    text   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS calls (
    call_key          TEXT PRIMARY KEY,
    problem_id        TEXT NOT NULL,
    iteration         INTEGER NOT NULL,
    role              TEXT NOT NULL,
    candidate         INTEGER,
    idx               INTEGER,
    attempt           INTEGER NOT NULL,
    prompt_sha256     TEXT NOT NULL REFERENCES prompts(sha256),
    request_json      TEXT NOT NULL,
    ok                INTEGER NOT NULL,
    content           TEXT,
    reasoning         TEXT,
    finish_reason     TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    latency_ms        INTEGER,
    endpoint          TEXT,
    attempts          INTEGER,
    max_tokens_sent   INTEGER,
    error_kind        TEXT,
    error_message     TEXT,
    completed_at_ms   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_by_problem ON calls(problem_id, iteration, role);
CREATE TABLE IF NOT EXISTS bank_versions (
    problem_id    TEXT NOT NULL,
    bank          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    iteration     INTEGER,
    items_json    TEXT NOT NULL,
    rejected_json TEXT NOT NULL,
    PRIMARY KEY (problem_id, bank, version)
);
CREATE TABLE IF NOT EXISTS candidates (
    problem_id     TEXT NOT NULL,
    iteration      INTEGER NOT NULL,
    candidate      INTEGER NOT NULL,
    branch         TEXT NOT NULL,
    mode           TEXT NOT NULL,
    status         TEXT NOT NULL,
    solution       TEXT,
    scores_json    TEXT NOT NULL,
    average_score  REAL,
    fully_verified INTEGER NOT NULL,
    PRIMARY KEY (problem_id, iteration, candidate)
);
CREATE TABLE IF NOT EXISTS verifications (
    problem_id TEXT NOT NULL,
    iteration  INTEGER NOT NULL,
    candidate  INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    status     TEXT NOT NULL,
    score      REAL,
    attempts   INTEGER NOT NULL,
    text       TEXT,
    PRIMARY KEY (problem_id, iteration, candidate, idx)
);
CREATE TABLE IF NOT EXISTS summaries (
    problem_id TEXT NOT NULL,
    iteration  INTEGER NOT NULL,
    candidate  INTEGER NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (problem_id, iteration, candidate)
);
CREATE TABLE IF NOT EXISTS judge_verdicts (
    problem_id    TEXT NOT NULL,
    iteration     INTEGER NOT NULL,
    candidate     INTEGER NOT NULL,
    answer        TEXT,
    rule_outcome  TEXT NOT NULL,
    llm_json      TEXT NOT NULL,
    score         REAL NOT NULL,
    undecided     INTEGER NOT NULL,
    disagreement  INTEGER NOT NULL,
    PRIMARY KEY (problem_id, iteration, candidate)
);
"#;

    /// A version-1 store with two prompts (one long, shared by two calls), four calls (one
    /// pointing at a prompt that is missing, as a hand-edited store could) and a candidate
    /// with its solution.
    pub(crate) fn v1_store(conn: &Connection, long: &str) {
        conn.execute_batch(V1_SCHEMA).unwrap();
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let sha = crate::store::rows::sha256_hex;
        for text in [long, "short prompt"] {
            conn.execute(
                "INSERT INTO prompts (sha256, bytes, text) VALUES (?1, ?2, ?3)",
                params![sha(text), text.len() as i64, text],
            )
            .unwrap();
        }
        for (key, prompt) in [
            ("p/it0/verification/c0/v0/a0", sha(long)),
            ("p/it0/verification/c0/v1/a0", sha(long)),
            ("p/it0/solution/c0/a0", sha("short prompt")),
            ("p/it0/summary/c0/a0", "f".repeat(64)),
        ] {
            conn.execute(
                "INSERT INTO calls (call_key, problem_id, iteration, role, attempt, \
                 prompt_sha256, request_json, ok, content, prompt_tokens, completion_tokens, \
                 latency_ms, endpoint, attempts, max_tokens_sent, completed_at_ms) \
                 VALUES (?1, 'p', 0, 'r', 0, ?2, '{}', 1, ?3, 10, 5, 7, 'sim', 1, 100, 5)",
                params![key, prompt, format!("reply to {key}")],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO candidates VALUES ('p', 0, 0, 'exploit', 'initial', 'verified', \
             'the solution', '[1.0]', 1.0, 1)",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
    }

    /// A version-3 store as that `tmas` left it: the version-1 store migrated to exactly
    /// version 3, with a done problem whose record is stored whole.
    fn v3_store(conn: &mut Connection, record_json: &str) {
        v1_store(conn, "a prompt");
        let tx = conn.transaction().unwrap();
        from_v1(&tx).unwrap();
        from_v2(&tx).unwrap();
        tx.pragma_update(None, "user_version", 3).unwrap();
        tx.commit().unwrap();
        conn.execute(
            "INSERT INTO problems (problem_id, ordinal, question, reference_answer, status, \
             iterations, record_json, updated_at_ms) VALUES ('p', 0, 'q?', '42', 'done', 1, ?1, 1)",
            [record_json],
        )
        .unwrap();
    }

    fn stored_record(conn: &Connection) -> (String, Option<String>) {
        conn.query_row(
            "SELECT record_json, record_texts FROM problems WHERE problem_id = 'p'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }

    #[test]
    fn a_version_3_record_loses_the_texts_its_calls_hold_and_reads_back_the_same() {
        // The calls of `v1_store` answered "reply to KEY"; its summary call is dropped by
        // the migration to version 2 (its prompt was missing), so the summary stays.
        let record = crate::store::record_texts::tests::small_record(
            "p",
            "reply to p/it0/solution/c0/a0",
            &[
                "reply to p/it0/verification/c0/v0/a0",
                "reply to p/it0/verification/c0/v1/a0",
            ],
            "reply to p/it0/summary/c0/a0",
        );
        let json = serde_json::to_string(&record).unwrap();
        let mut conn = Connection::open_in_memory().unwrap();
        v3_store(&mut conn, &json);
        crate::store::ensure_schema_for_tests(&mut conn);
        let (lean, texts) = stored_record(&conn);
        let texts = texts.expect("texts taken out");
        assert_eq!(
            crate::store::record_texts::decode(&texts).unwrap().len(),
            3,
            "{texts}"
        );
        assert!(!lean.contains("reply to p/it0/solution"), "{lean}");
        assert!(lean.contains("reply to p/it0/summary/c0/a0"), "{lean}");
        let reader =
            crate::store::StoreReader::from_conn(conn, std::path::Path::new("mem")).unwrap();
        assert_eq!(
            reader.record_json("p").unwrap().as_deref(),
            Some(json.as_str())
        );
        let back = reader.done_record("p").unwrap().unwrap();
        assert_eq!(back.outcome, record.outcome);
    }

    #[test]
    fn a_version_3_record_that_encodes_differently_today_stays_whole() {
        let record = crate::store::record_texts::tests::small_record(
            "p",
            "reply to p/it0/solution/c0/a0",
            &[],
            "s",
        );
        // As an older tmas may have written it: same content, other bytes.
        let json = serde_json::to_string_pretty(&record).unwrap();
        let mut conn = Connection::open_in_memory().unwrap();
        v3_store(&mut conn, &json);
        crate::store::ensure_schema_for_tests(&mut conn);
        assert_eq!(stored_record(&conn), (json, None));
    }

    fn long_text() -> String {
        (0..4000)
            .map(|i| format!("step {i}: x{} ∑\n", i * 37 % 101))
            .collect()
    }

    #[test]
    fn a_version_4_store_gains_tokens_estimated_as_the_servers_counts() {
        let mut conn = Connection::open_in_memory().unwrap();
        v3_store(&mut conn, "{}");
        {
            let tx = conn.transaction().unwrap();
            from_v3(&tx).unwrap();
            // Version 4's `calls` (the version-1 migration builds this build's table).
            tx.execute_batch("ALTER TABLE calls DROP COLUMN tokens_estimated;")
                .unwrap();
            tx.pragma_update(None, "user_version", 4).unwrap();
            tx.commit().unwrap();
        }
        let calls: i64 = conn
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
            .unwrap();
        crate::store::ensure_schema_for_tests(&mut conn);
        let (version, marked, rows): (i64, i64, i64) = conn
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version), \
                 SUM(tokens_estimated), COUNT(*) FROM calls",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((version, marked, rows), (SCHEMA_VERSION, 0, calls));
        assert!(calls > 0);
        // Idempotent: a store that has the column keeps it.
        let tx = conn.transaction().unwrap();
        from_v4(&tx).unwrap();
    }

    #[test]
    fn a_version_1_store_is_migrated_keeping_every_prompt_and_call() {
        let mut conn = Connection::open_in_memory().unwrap();
        let long = long_text();
        v1_store(&conn, &long);
        crate::store::ensure_schema_for_tests(&mut conn);
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let calls: Vec<(String, String, String)> = conn
            .prepare("SELECT call_key, prompt_id, content FROM calls ORDER BY call_key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // The call without a prompt is gone (resume sends it again).
        assert_eq!(calls.len(), 3, "{calls:?}");
        for (key, id, content) in &calls {
            assert_eq!(*content, format!("reply to {key}"));
            let expected = if key.contains("verification") {
                chunks::prompt_id(&long)
            } else {
                chunks::prompt_id("short prompt")
            };
            assert_eq!(*id, expected, "{key}");
        }
        let long_id = chunks::prompt_id(&long);
        assert_eq!(
            prompts::read(&conn, &long_id).unwrap().as_deref(),
            Some(long.as_str())
        );
        let via_view: String = conn
            .query_row(
                "SELECT text FROM prompt_texts WHERE id = ?1",
                [&long_id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(via_view, long);
        let leftovers: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name IN \
                 ('prompts_v1', 'calls_v1', 'calls_by_problem')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(leftovers, 0);
        let columns: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info('candidates')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(columns.contains(&"average_score".to_owned()), "{columns:?}");
        assert!(!columns.contains(&"solution".to_owned()), "{columns:?}");
        let reply: String = conn
            .query_row(
                "SELECT reply FROM candidate_solutions WHERE problem_id = 'p' \
                 AND iteration = 0 AND candidate = 0",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(reply, "reply to p/it0/solution/c0/a0");
    }
}
