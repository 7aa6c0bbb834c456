//! The run store's SQL schema and its version check.
//!
//! The schema version lives in `PRAGMA user_version`. A store written by a newer `tmas`
//! (higher version) is refused rather than half-understood; an empty database gets the
//! current schema. The tables are documented for users in `docs/run-store.md` — keep the
//! two in step.

use rusqlite::Connection;

/// Version of the schema below; bump it (and add a migration) on any change.
pub const SCHEMA_VERSION: i64 = 1;

/// Every table, created in one transaction when the database is new.
pub const CREATE: &str = r#"
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

/// Why a database cannot be used with this build.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "{path} was written by a newer tmas (store schema version {found}; this build \
         understands up to {supported}); use that tmas version or a newer one"
    )]
    Newer {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("{path}: {context}: {source}")]
    Sql {
        path: String,
        context: &'static str,
        source: rusqlite::Error,
    },
}

/// Creates the schema in a new database or checks the version of an existing one.
pub fn ensure(conn: &mut Connection, path: &str) -> Result<(), SchemaError> {
    let sql = |context: &'static str| {
        move |source| SchemaError::Sql {
            path: path.to_owned(),
            context,
            source,
        }
    };
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql("reading the schema version"))?;
    if found > SCHEMA_VERSION {
        return Err(SchemaError::Newer {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction()
        .map_err(sql("starting the schema transaction"))?;
    tx.execute_batch(CREATE)
        .map_err(sql("creating the tables"))?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(sql("setting the schema version"))?;
    tx.commit().map_err(sql("committing the schema"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_gets_the_schema_and_a_newer_one_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        ensure(&mut conn, "mem").unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        // Idempotent.
        ensure(&mut conn, "mem").unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = ensure(&mut conn, "mem").unwrap_err();
        assert!(err.to_string().contains("newer tmas"), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("version {}", SCHEMA_VERSION + 1)),
            "{err}"
        );
    }
}
