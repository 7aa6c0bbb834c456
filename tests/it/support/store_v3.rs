//! Run stores as `tmas` with store schema versions 4 and 3 wrote them, made from a run of
//! this build (a version-5 store) by undoing exactly what each later version changed.
//!
//! Version 4 ([`downgrade_to_v4`]): `calls` has no `tokens_estimated` column;
//! `PRAGMA user_version = 4`.
//!
//! Version 3 ([`downgrade`]), from version 4:
//!
//! - `problems.record_json` holds the whole record: the bytes of the run directory's
//!   `problems/<id>.json`, which the engine wrote from the same single encoding that
//!   version 3 stored; there is no `record_texts` column;
//! - every prompt is chunked as one text (FastCDC over the whole prompt, as version 3's
//!   writer did) and keyed by the id of that chunking, and every call points at it;
//! - `PRAGMA user_version = 3`.
//!
//! Everything else (calls, banks, candidates, verdicts, meta) is written identically by
//! both versions.

use std::path::Path;

use rusqlite::{Connection, params};

/// Rewrites the store of `run_dir` (this build's) as version 4 left it.
pub fn downgrade_to_v4(run_dir: &Path) {
    let conn = Connection::open(run_dir.join("run.sqlite")).expect("run store opens");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version read");
    assert_eq!(version, 5, "a store of this build");
    conn.execute_batch(
        "ALTER TABLE calls DROP COLUMN tokens_estimated;
         PRAGMA user_version = 4;",
    )
    .expect("version-5 column dropped");
}

/// Rewrites the store of `run_dir` (this build's) as version 3 left it (see the module
/// docs).
pub fn downgrade(run_dir: &Path) {
    downgrade_to_v4(run_dir);
    let mut conn = Connection::open(run_dir.join("run.sqlite")).expect("run store opens");
    let tx = conn.transaction().expect("transaction");
    let done: Vec<String> = tx
        .prepare("SELECT problem_id FROM problems WHERE record_json IS NOT NULL")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    for id in &done {
        let file = run_dir.join("problems").join(format!("{id}.json"));
        let whole =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        tx.execute(
            "UPDATE problems SET record_json = ?2 WHERE problem_id = ?1",
            params![id, whole],
        )
        .expect("record restored");
    }
    let prompts: Vec<(String, String)> = tx
        .prepare("SELECT id, text FROM prompt_texts")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    tx.execute_batch(
        "ALTER TABLE problems DROP COLUMN record_texts;
         DELETE FROM prompt_chunks;
         CREATE TEMP TABLE new_ids (old TEXT PRIMARY KEY, new TEXT NOT NULL);",
    )
    .expect("version-4 parts dropped");
    let mut rows = Vec::new();
    for (old, text) in &prompts {
        let whole = tmas::store::chunks::split(text);
        for chunk in &whole.chunks {
            tx.execute(
                "INSERT OR IGNORE INTO prompt_chunks (hash, text) VALUES (?1, ?2)",
                params![chunk.hash_hex(), chunk.text],
            )
            .expect("chunk");
        }
        tx.execute(
            "INSERT INTO temp.new_ids VALUES (?1, ?2)",
            params![old, whole.id_hex()],
        )
        .expect("id");
        rows.push((whole.id_hex(), text.len() as i64, whole.chunk_list_json()));
    }
    // New rows first: `calls.prompt_id` must always name a prompt. A one-segment prompt
    // keeps its id and its row (version 4 cuts it as version 3 did).
    for (id, bytes, chunks) in rows {
        tx.execute(
            "INSERT OR IGNORE INTO prompts (id, bytes, chunks) VALUES (?1, ?2, ?3)",
            params![id, bytes, chunks],
        )
        .expect("prompt");
    }
    tx.execute_batch(
        "UPDATE calls SET prompt_id = (SELECT new FROM temp.new_ids WHERE old = calls.prompt_id);
         DELETE FROM prompts WHERE id NOT IN (SELECT new FROM temp.new_ids);
         DROP TABLE temp.new_ids;
         PRAGMA user_version = 3;",
    )
    .expect("calls repointed");
    tx.commit().expect("committed");
    conn.execute_batch("VACUUM").expect("vacuum");
}
