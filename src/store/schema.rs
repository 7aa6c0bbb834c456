//! The run store's SQL schema and its version check.
//!
//! The schema version lives in `PRAGMA user_version`. A store written by a newer `tmas`
//! (higher version) is refused rather than half-understood; an empty database gets the
//! current schema. The tables are documented for users in `docs/run-store.md` — keep the
//! two in step.

/// Keys of the `meta` table written at the start of a run.
pub const META_CONFIG: &str = "config_toml";
pub const META_PROMPTS: &str = "prompts_sha256";
pub const META_DATASET: &str = "dataset";
pub const META_CONFIG_SOURCE: &str = "config_source";
pub const META_STATUS: &str = "status";
pub const META_SEED: &str = "seed";

/// Digest of the whole selection of problems (ids and reference answers, in dataset order,
/// before any shard is taken): the shards of one run agree on it (`tmas merge`).
pub const META_SELECTION: &str = "selection_sha256";
/// The shard directories a merged run was made from (a JSON array), written by `tmas merge`.
pub const META_MERGED_FROM: &str = "merged_from";

/// Meta key holding the run's iteration count T.
pub const META_ITERATIONS: &str = "iterations";

/// Version of the schema below; bump it (and add a migration to [`super::migrate`]) on
/// any change. 2: prompts as content-defined chunks (`prompt_chunks`, `prompts.chunks`,
/// view `prompt_texts`), `calls.prompt_id` instead of `calls.prompt_sha256`, no
/// `candidates.solution`, no `calls_by_problem` index. 3: `problems.reference_solution`
/// and `problems.grading_guidelines` (proof mode's grading material, for resume). 4:
/// `problems.record_texts` (`record_json` without the replies `calls` holds:
/// [`super::record_texts`]) and prompts chunked by segment ([`super::chunks`]). 5:
/// `calls.tokens_estimated` (1: the server sent no usage and the token counts are the
/// client's estimate).
pub const SCHEMA_VERSION: i64 = 5;

/// Page size of a new store, set explicitly because it was measured (docs/run-store.md):
/// on `tmas bench eval --problems 40 --iterations 3`, 8 KiB and 16 KiB pages made a larger
/// file (4-8 KB prompt chunks pack badly into 8 KiB pages) and more bytes written (each
/// small commit rewrites whole partly-filled leaf pages), so SQLite's default 4 KiB
/// stays. It can only be chosen before the first table exists.
pub const PAGE_SIZE: i64 = 4096;

/// The view that reassembles prompts from their chunks, for `sqlite3` users. No
/// `group_concat(… ORDER BY …)` (SQLite 3.44+): the chunks are ordered in a subquery,
/// which older shells (Debian 12's 3.40) also accept.
pub const PROMPT_TEXTS_VIEW: &str = r#"
CREATE VIEW IF NOT EXISTS prompt_texts AS
SELECT p.id AS id, p.bytes AS bytes,
       COALESCE((SELECT group_concat(part, '') FROM
                   (SELECT c.text AS part FROM json_each(p.chunks) AS j
                    JOIN prompt_chunks AS c ON c.hash = j.value
                    ORDER BY j.key)), '') AS text
FROM prompts AS p;
"#;

/// Each candidate's solution reply: the `content` of its solution call (the solution the
/// method used is that text without `<think>` blocks, trimmed).
pub const CANDIDATE_SOLUTIONS_VIEW: &str = r#"
CREATE VIEW IF NOT EXISTS candidate_solutions AS
SELECT d.problem_id AS problem_id, d.iteration AS iteration, d.candidate AS candidate,
       c.call_key AS call_key, c.content AS reply
FROM candidates AS d
JOIN calls AS c ON c.call_key =
     d.problem_id || '/it' || d.iteration || '/solution/c' || d.candidate || '/a0';
"#;

/// The prompt tables: chunks stored once (`prompt_chunks`), and per distinct prompt its
/// byte length and chunk list, a JSON array of `prompt_chunks.hash` in order
/// (`prompts.chunks`); see [`super::chunks`].
pub const PROMPT_TABLES: &str = r#"
CREATE TABLE IF NOT EXISTS prompt_chunks (
    hash TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS prompts (
    id     TEXT PRIMARY KEY,
    bytes  INTEGER NOT NULL,
    chunks TEXT NOT NULL
);
"#;

/// `calls.request_json`'s `kind` for an embeddings call (a chat call's has none). Such a
/// row's `content` is the JSON array of its vectors, one per input in input order, and its
/// prompt is the JSON array of its inputs.
pub const EMBEDDINGS_KIND: &str = "embeddings";

/// Every finished model call; `prompt_id` is [`super::chunks::prompt_id`] of its prompt.
pub const CALLS: &str = r#"
CREATE TABLE IF NOT EXISTS calls (
    call_key          TEXT PRIMARY KEY,
    problem_id        TEXT NOT NULL,
    iteration         INTEGER NOT NULL,
    role              TEXT NOT NULL,
    candidate         INTEGER,
    idx               INTEGER,
    attempt           INTEGER NOT NULL,
    prompt_id         TEXT NOT NULL REFERENCES prompts(id),
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
    completed_at_ms   INTEGER NOT NULL,
    tokens_estimated  INTEGER NOT NULL DEFAULT 0
);
"#;

/// The other tables (the schema is `CREATE`, `PROMPT_TABLES`, `CALLS` and the views).
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
    reference_solution TEXT,
    grading_guidelines TEXT,
    status           TEXT NOT NULL DEFAULT 'pending',
    iterations       INTEGER,
    error            TEXT,
    record_json      TEXT,
    record_texts     TEXT,
    updated_at_ms    INTEGER NOT NULL
);
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
    #[error("{path} has store schema version {found}, which no tmas wrote; it is not a run store")]
    Unknown { path: String, found: i64 },
    #[error("{path}: {context}: {source}")]
    Sql {
        path: String,
        context: &'static str,
        source: rusqlite::Error,
    },
}
