//! Queries over a run store: what resume, the final outputs and `tmas export` read.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tmas_actors::strategy::{BankVersion, CallFailure, CallOutcome};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatMessage, ChatResponse, Usage, prompt_text};

use super::StoreError;
use super::record_texts;
use super::schema::EMBEDDINGS_KIND;
use crate::eval::dataset::Problem;
use crate::method::TmasOutcome;
use crate::method::result::TextRef;
use crate::record::ProblemRecord;

/// A problem of the stored dataset selection with its state.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredProblem {
    pub problem_id: String,
    pub ordinal: i64,
    pub question: String,
    pub reference_answer: String,
    /// Proof problems: the dataset's reference proof and grading guidelines (`None` when
    /// the row had none, and in stores written before schema version 3).
    pub reference_solution: Option<String>,
    pub grading_guidelines: Option<String>,
    /// `pending`, `done` or `failed`.
    pub status: String,
    /// T of the run that finished it (`done` only).
    pub iterations: Option<u32>,
    pub error: Option<String>,
}

/// A stored verdict's numbers (a `judge_verdicts` row without its texts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredVerdict {
    pub score: f64,
    pub undecided: bool,
    pub disagreement: bool,
    /// The candidate had a boxed answer.
    pub has_answer: bool,
}

impl StoredProblem {
    /// Whether the problem has a reference answer ([`crate::record::has_reference`]).
    pub fn has_reference(&self) -> bool {
        crate::record::has_reference(&self.reference_answer)
    }

    /// The problem as the dataset gave it (what a resumed or re-judged run works on).
    pub fn problem(&self) -> Problem {
        Problem {
            id: self.problem_id.clone(),
            question: self.question.clone(),
            answer: self.reference_answer.clone(),
            reference_solution: self.reference_solution.clone(),
            grading_guidelines: self.grading_guidelines.clone(),
        }
    }
}

/// A stored call outcome and the id of the prompt it answered.
#[derive(Debug, Clone)]
pub struct StoredCall {
    /// [`super::chunks::prompt_id`] of the prompt.
    pub prompt_id: String,
    pub outcome: CallOutcome,
}

/// An answered judge call: whose key it is stored under and the prompt it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredJudgeCall {
    pub problem: String,
    pub iteration: u32,
    pub candidate: u32,
    pub repeat: u32,
    /// [`super::prompts::id_of_messages`] of its messages.
    pub prompt_id: String,
}

/// Usage of one role over every stored call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleUsageRow {
    pub role: String,
    pub calls: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Answered calls whose token counts are the client's estimate (the server sent no
    /// usage).
    pub estimated_calls: u64,
}

/// Failed calls stored for one (problem, iteration, role, endpoint, kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostCallsRow {
    pub problem_id: String,
    pub iteration: u32,
    pub role: String,
    /// The endpoint that gave the last failed answer (none: an outage, or no endpoint
    /// answered at all).
    pub endpoint: Option<String>,
    /// Why they failed (a name this build does not know reads as `unknown`).
    pub kind: FailureKind,
    pub calls: u64,
    /// One of their error messages (the server's status and body when there was one).
    pub example: String,
}

/// A read connection (the writer has its own).
pub struct StoreReader {
    conn: Connection,
    path: PathBuf,
    /// Whether `problems` has `record_texts` (schema version 4; a store opened read-only
    /// is not migrated), looked up once.
    record_texts: OnceCell<bool>,
    /// Whether `calls` has `tokens_estimated` (schema version 5), looked up once.
    tokens_estimated: OnceCell<bool>,
}

impl StoreReader {
    /// Opens `path` read-only (for `tmas export` and reports; works while a run writes).
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::sql(path, "opening read-only", e))?;
        let reader = Self::from_conn(conn, path)?;
        let version = reader.schema_version()?;
        if version > super::schema::SCHEMA_VERSION {
            return Err(StoreError::Schema(super::schema::SchemaError::Newer {
                path: path.display().to_string(),
                found: version,
                supported: super::schema::SCHEMA_VERSION,
            }));
        }
        Ok(reader)
    }

    /// The store's schema version (`PRAGMA user_version`; a read-only store is never
    /// migrated, so it may be older than this build's).
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err("reading the schema version", e))
    }

    pub(crate) fn from_conn(conn: Connection, path: &Path) -> Result<Self, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| StoreError::sql(path, "setting the busy timeout", e))?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
            record_texts: OnceCell::new(),
            tokens_estimated: OnceCell::new(),
        })
    }

    #[cfg(test)]
    pub(crate) fn conn_for_tests(&self) -> &Connection {
        &self.conn
    }

    /// The connection, for readers in this module's siblings that stream whole tables.
    pub(super) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The store's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn sql_error(&self, context: &'static str, e: rusqlite::Error) -> StoreError {
        self.err(context, e)
    }

    fn err(&self, context: &'static str, e: rusqlite::Error) -> StoreError {
        StoreError::sql(&self.path, context, e)
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err("reading meta", e))
    }

    /// Every problem of the selection, in dataset order.
    pub fn problems(&self) -> Result<Vec<StoredProblem>, StoreError> {
        // A store opened read-only is not migrated: before version 3 it has no proof
        // material, which reads as none.
        let proof_columns: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('problems') \
                 WHERE name IN ('reference_solution', 'grading_guidelines')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err("inspecting the problems table", e))?;
        let proof = if proof_columns == 2 {
            "reference_solution, grading_guidelines"
        } else {
            "NULL, NULL"
        };
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT problem_id, ordinal, question, reference_answer, status, iterations, \
                 error, {proof} FROM problems ORDER BY ordinal"
            ))
            .map_err(|e| self.err("listing problems", e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(StoredProblem {
                    problem_id: r.get(0)?,
                    ordinal: r.get(1)?,
                    question: r.get(2)?,
                    reference_answer: r.get(3)?,
                    status: r.get(4)?,
                    iterations: r.get(5)?,
                    error: r.get(6)?,
                    reference_solution: r.get(7)?,
                    grading_guidelines: r.get(8)?,
                })
            })
            .map_err(|e| self.err("listing problems", e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err("listing problems", e))
    }

    /// The column holding the text references of a record, or `NULL` in a store from
    /// before schema version 4 (whose records are whole).
    fn record_texts_column(&self) -> Result<&'static str, StoreError> {
        if let Some(has) = self.record_texts.get() {
            return Ok(if *has { "record_texts" } else { "NULL" });
        }
        let has = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('problems') WHERE name = 'record_texts'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(|e| self.err("inspecting the problems table", e))?
            > 0;
        let _ = self.record_texts.set(has);
        Ok(if has { "record_texts" } else { "NULL" })
    }

    /// The column saying whether a call's token counts are estimates, or `0` in a store
    /// from before schema version 5 (which recorded the server's counts only).
    pub(super) fn tokens_estimated_column(&self) -> Result<&'static str, StoreError> {
        let has = match self.tokens_estimated.get() {
            Some(has) => *has,
            None => {
                let has = self
                    .conn
                    .query_row(
                        "SELECT COUNT(*) FROM pragma_table_info('calls') \
                         WHERE name = 'tokens_estimated'",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                    .map_err(|e| self.err("inspecting the calls table", e))?
                    > 0;
                let _ = self.tokens_estimated.set(has);
                has
            }
        };
        Ok(if has { "tokens_estimated" } else { "0" })
    }

    /// The judged records of every `done` problem, in dataset order.
    pub fn records(&self) -> Result<Vec<ProblemRecord>, StoreError> {
        let what = "reading problem records";
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT problem_id, record_json, {} FROM problems \
                 WHERE status = 'done' AND record_json IS NOT NULL ORDER BY ordinal",
                self.record_texts_column()?
            ))
            .map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            })
            .map_err(|e| self.err(what, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, text, texts) = row.map_err(|e| self.err(what, e))?;
            out.push(self.parse_record(&id, &text, texts.as_deref())?);
        }
        Ok(out)
    }

    /// The judged record of one problem if it is `done` (what [`StoreReader::records`]
    /// would return for it), read alone: exports walk a long run's records one at a time
    /// instead of holding hundreds of MB of them.
    pub fn done_record(&self, problem_id: &str) -> Result<Option<ProblemRecord>, StoreError> {
        let row = self
            .conn
            .prepare_cached(&format!(
                "SELECT record_json, {} FROM problems \
                 WHERE problem_id = ?1 AND status = 'done' AND record_json IS NOT NULL",
                self.record_texts_column()?
            ))
            .and_then(|mut stmt| {
                stmt.query_row([problem_id], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
                })
                .optional()
            })
            .map_err(|e| self.err("reading a problem record", e))?;
        row.map(|(text, texts)| self.parse_record(problem_id, &text, texts.as_deref()))
            .transpose()
    }

    /// The judged record of one problem if it is `done`, without the texts the store
    /// keeps in `calls` (solutions, verification texts and summaries read as `None` in a
    /// store of schema version 4; older stores' records are whole): for tables of scores
    /// and verdicts, which then skip reading every reply of the problem.
    pub fn done_record_without_texts(
        &self,
        problem_id: &str,
    ) -> Result<Option<ProblemRecord>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT record_json FROM problems \
                 WHERE problem_id = ?1 AND status = 'done' AND record_json IS NOT NULL",
            )
            .and_then(|mut stmt| {
                stmt.query_row([problem_id], |r| r.get::<_, String>(0))
                    .optional()
            })
            .map_err(|e| self.err("reading a problem record", e))?;
        row.map(|text| self.parse_record(problem_id, &text, None))
            .transpose()
    }

    /// A stored record, with the texts `record_texts` names put back from the calls.
    fn parse_record(
        &self,
        problem_id: &str,
        text: &str,
        texts: Option<&str>,
    ) -> Result<ProblemRecord, StoreError> {
        let mut record: ProblemRecord =
            serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("problems.record_json of `{problem_id}`"),
                reason: e.to_string(),
            })?;
        if let Some(texts) = texts {
            record_texts::decode(texts)
                .and_then(|refs| {
                    record_texts::restore(&mut record.outcome, &refs, |key| {
                        self.answered_reply(key)
                    })
                })
                .map_err(|e| StoreError::Corrupt {
                    path: self.path.clone(),
                    what: format!("problems.record_texts of `{problem_id}`"),
                    reason: e.to_string(),
                })?;
        }
        Ok(record)
    }

    /// Puts back into `outcome` the texts `refs` name, from the answered calls' replies.
    pub fn restore_texts(
        &self,
        outcome: &mut TmasOutcome,
        refs: &[TextRef],
    ) -> Result<(), StoreError> {
        record_texts::restore(outcome, refs, |key| self.answered_reply(key)).map_err(|e| {
            StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("the calls of `{}`", outcome.problem.id),
                reason: e.to_string(),
            }
        })
    }

    /// `calls.content` of an answered call.
    fn answered_reply(&self, key: &str) -> rusqlite::Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT content FROM calls WHERE call_key = ?1 AND ok = 1")?
            .query_row([key], |r| r.get(0))
            .optional()
    }

    /// Ids of the problems [`StoreReader::records`] returns, in the same (dataset) order,
    /// without reading the records themselves.
    pub fn done_problem_ids(&self) -> Result<Vec<String>, StoreError> {
        self.strings(
            "SELECT problem_id FROM problems \
             WHERE status = 'done' AND record_json IS NOT NULL ORDER BY ordinal",
            "listing done problems",
        )
    }

    /// The stored record of one problem as its compact JSON text (`None`: no such problem
    /// or no record): the bytes the run directory's files hold. A record stored whole is
    /// returned as it is; one stored without its calls' texts is rebuilt and encoded
    /// again, which gives the bytes it was stored from (the texts are put back exactly,
    /// and encoding a decoded record is a fixed point).
    pub fn record_json(&self, problem_id: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .conn
            .prepare_cached(&format!(
                "SELECT record_json, {} FROM problems WHERE problem_id = ?1",
                self.record_texts_column()?
            ))
            .and_then(|mut stmt| {
                stmt.query_row([problem_id], |r| {
                    Ok((
                        r.get::<_, Option<String>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                    ))
                })
                .optional()
            })
            .map_err(|e| self.err("reading a problem record", e))?;
        let Some((Some(text), texts)) = row else {
            return Ok(None);
        };
        let Some(texts) = texts else {
            return Ok(Some(text));
        };
        let record = self.parse_record(problem_id, &text, Some(&texts))?;
        serde_json::to_string(&record)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("the record of `{problem_id}`"),
                reason: format!("cannot be encoded again: {e}"),
            })
    }

    /// The judged iterations of `problem` the store holds: its `candidates` rows (written
    /// as each iteration is judged, and for every iteration once it is done), each with its
    /// verdict (`None`: no `judge_verdicts` row, its solution call failed), by iteration,
    /// candidates by index.
    pub fn judged_iterations(
        &self,
        problem: &str,
    ) -> Result<BTreeMap<u32, Vec<Option<StoredVerdict>>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.iteration, j.score, j.undecided, j.disagreement, j.answer IS NOT NULL \
                 FROM candidates AS c LEFT JOIN judge_verdicts AS j \
                 ON j.problem_id = c.problem_id AND j.iteration = c.iteration \
                 AND j.candidate = c.candidate \
                 WHERE c.problem_id = ?1 ORDER BY c.iteration, c.candidate",
            )
            .map_err(|e| self.err("reading judged iterations", e))?;
        let rows = stmt
            .query_map([problem], |r| {
                let verdict = match r.get::<_, Option<f64>>(1)? {
                    Some(score) => Some(StoredVerdict {
                        score,
                        undecided: r.get(2)?,
                        disagreement: r.get(3)?,
                        has_answer: r.get(4)?,
                    }),
                    None => None,
                };
                Ok((r.get::<_, u32>(0)?, verdict))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err("reading judged iterations", e))?;
        let mut out: BTreeMap<u32, Vec<Option<StoredVerdict>>> = BTreeMap::new();
        for (iteration, verdict) in rows {
            out.entry(iteration).or_default().push(verdict);
        }
        Ok(out)
    }

    /// The `candidates` rows of `problem` from iteration `from` on, each with its
    /// `judge_verdicts` row, as JSON objects by iteration (`tmas export --partial`'s
    /// `judged_iterations`): `iteration` and `candidates`, each with `candidate`,
    /// `branch`, `mode`, `status`, `scores`, `average_score`, `fully_verified` and
    /// `verdict` (`answer`, `rule_outcome`, `llm`, `score`, `undecided`, `disagreement`;
    /// null when its solution call failed).
    pub fn judged_iteration_rows(
        &self,
        problem: &str,
        from: u32,
    ) -> Result<Vec<serde_json::Value>, StoreError> {
        use serde_json::{Value, json};
        let parse = |text: String| serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.iteration, c.candidate, c.branch, c.mode, c.status, c.scores_json, \
                 c.average_score, c.fully_verified, j.problem_id IS NOT NULL, j.answer, \
                 j.rule_outcome, j.llm_json, j.score, j.undecided, j.disagreement \
                 FROM candidates AS c LEFT JOIN judge_verdicts AS j \
                 ON j.problem_id = c.problem_id AND j.iteration = c.iteration \
                 AND j.candidate = c.candidate \
                 WHERE c.problem_id = ?1 AND c.iteration >= ?2 ORDER BY c.iteration, c.candidate",
            )
            .map_err(|e| self.err("reading judged iterations", e))?;
        let rows = stmt
            .query_map(params![problem, from], |r| {
                let verdict = if r.get::<_, bool>(8)? {
                    json!({
                        "answer": r.get::<_, Option<String>>(9)?,
                        "rule_outcome": r.get::<_, String>(10)?,
                        "llm": parse(r.get(11)?),
                        "score": r.get::<_, f64>(12)?,
                        "undecided": r.get::<_, bool>(13)?,
                        "disagreement": r.get::<_, bool>(14)?,
                    })
                } else {
                    Value::Null
                };
                let candidate = json!({
                    "candidate": r.get::<_, u32>(1)?,
                    "branch": r.get::<_, String>(2)?,
                    "mode": r.get::<_, String>(3)?,
                    "status": r.get::<_, String>(4)?,
                    "scores": parse(r.get(5)?),
                    "average_score": r.get::<_, Option<f64>>(6)?,
                    "fully_verified": r.get::<_, bool>(7)?,
                    "verdict": verdict,
                });
                Ok((r.get::<_, u32>(0)?, candidate))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err("reading judged iterations", e))?;
        let mut out: Vec<(u32, Vec<Value>)> = Vec::new();
        for (iteration, candidate) in rows {
            match out.last_mut() {
                Some((t, candidates)) if *t == iteration => candidates.push(candidate),
                _ => out.push((iteration, vec![candidate])),
            }
        }
        Ok(out
            .into_iter()
            .map(
                |(iteration, candidates)| json!({"iteration": iteration, "candidates": candidates}),
            )
            .collect())
    }

    /// Keys of every stored call (to skip the lookup for calls never made).
    pub fn call_keys(&self) -> Result<HashSet<String>, StoreError> {
        self.strings("SELECT call_key FROM calls", "listing calls")
    }

    /// The first column of every row of `sql`, as text; `what` names the step in errors.
    fn strings<C: FromIterator<String>>(
        &self,
        sql: &str,
        what: &'static str,
    ) -> Result<C, StoreError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err(what, e))
    }

    /// Keys of every stored call that was answered (a resume sends the failed ones again).
    pub fn answered_call_keys(&self) -> Result<HashSet<String>, StoreError> {
        self.strings(
            "SELECT call_key FROM calls WHERE ok = 1",
            "listing answered calls",
        )
    }

    /// Every answered judge call (role `judge`, first attempt) with the id of its prompt:
    /// what lets a resumed run find a stored verdict by (problem, prompt, repeat) whichever
    /// candidate's key it was stored under, so a question answered before is never sent
    /// again.
    pub fn answered_judge_calls(&self) -> Result<Vec<StoredJudgeCall>, StoreError> {
        let what = "listing answered judge calls";
        let mut stmt = self
            .conn
            .prepare(
                "SELECT problem_id, iteration, candidate, idx, prompt_id FROM calls \
                 WHERE ok = 1 AND role = 'judge' AND attempt = 0 \
                 AND candidate IS NOT NULL AND idx IS NOT NULL",
            )
            .map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(StoredJudgeCall {
                    problem: r.get(0)?,
                    iteration: r.get(1)?,
                    candidate: r.get(2)?,
                    repeat: r.get(3)?,
                    prompt_id: r.get(4)?,
                })
            })
            .map_err(|e| self.err(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err(what, e))
    }

    /// (key, problem) of every call stored as a failure.
    pub fn failed_calls(&self) -> Result<Vec<(String, String)>, StoreError> {
        let what = "listing failed calls";
        let mut stmt = self
            .conn
            .prepare("SELECT call_key, problem_id FROM calls WHERE ok = 0")
            .map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err(what, e))
    }

    pub fn call_count(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.err("counting calls", e))
    }

    /// The stored outcome of one call (an embeddings call's with its vectors, read back
    /// bit for bit: they were written as the shortest decimals that round to them).
    pub fn call(&self, key: &str) -> Result<Option<StoredCall>, StoreError> {
        let estimated = self.tokens_estimated_column()?;
        self.conn
            .prepare_cached(&format!(
                "SELECT prompt_id, ok, content, reasoning, finish_reason, prompt_tokens, \
                 completion_tokens, latency_ms, endpoint, attempts, max_tokens_sent, \
                 error_kind, error_message, json_extract(request_json, '$.kind'), {estimated} \
                 FROM calls WHERE call_key = ?1",
            ))
            .and_then(|mut stmt| {
                stmt.query_row(params![key], |r| {
                    let ok: bool = r.get(1)?;
                    let outcome = if ok {
                        let content: String = r.get(2)?;
                        let kind: Option<String> = r.get(13)?;
                        // An embeddings call's content is its vectors (`EMBEDDINGS_KIND`).
                        let embeddings = match kind.as_deref() {
                            Some(EMBEDDINGS_KIND) => {
                                let vectors: Vec<Vec<f32>> = serde_json::from_str(&content)
                                    .map_err(|e| {
                                        rusqlite::Error::FromSqlConversionFailure(
                                            2,
                                            rusqlite::types::Type::Text,
                                            Box::new(e),
                                        )
                                    })?;
                                Some(vectors.into())
                            }
                            _ => None,
                        };
                        let content = if embeddings.is_some() {
                            String::new()
                        } else {
                            content
                        };
                        Ok(ChatResponse {
                            content: content.into(),
                            reasoning: r.get::<_, Option<String>>(3)?.map(Into::into),
                            usage: Usage {
                                prompt_tokens: r.get::<_, i64>(5)?.max(0) as u64,
                                completion_tokens: r.get::<_, i64>(6)?.max(0) as u64,
                                estimated: r.get::<_, i64>(14)? != 0,
                            },
                            finish_reason: r.get(4)?,
                            latency_ms: r.get::<_, i64>(7)?.max(0) as u64,
                            endpoint: r.get::<_, String>(8)?.into(),
                            attempts: r.get(9)?,
                            max_tokens_sent: r.get(10)?,
                            embeddings,
                        })
                    } else {
                        Err(CallFailure {
                            kind: FailureKind::from_name(
                                r.get::<_, Option<String>>(11)?.as_deref().unwrap_or(""),
                            ),
                            message: r.get(12)?,
                            endpoint: r.get::<_, Option<String>>(8)?.map(Into::into),
                        })
                    };
                    Ok(StoredCall {
                        prompt_id: r.get(0)?,
                        outcome,
                    })
                })
                .optional()
            })
            .map_err(|e| self.err("reading a stored call", e))
    }

    /// The full text of a stored prompt (`calls.prompt_id`), reassembled from its chunks.
    pub fn prompt_text(&self, id: &str) -> Result<Option<String>, StoreError> {
        super::prompts::read(&self.conn, id).map_err(|e| match e {
            super::prompts::PromptReadError::Sql(e) => self.err("reading a prompt", e),
            corrupt => StoreError::Corrupt {
                path: self.path.clone(),
                what: "prompt text".into(),
                reason: corrupt.to_string(),
            },
        })
    }

    /// Whether the stored prompt `id` is the prompt of `messages`, byte for byte. The ids
    /// are compared first; when they differ the texts are, because equal texts can have
    /// different ids: a version 2–3 store chunked each prompt whole, version 4 chunks it
    /// by segments ([`super::chunks`]), so a migrated store's multi-segment prompts (and a
    /// prompt whose segmentation changed between builds) only match by text.
    pub fn prompt_matches(&self, id: &str, messages: &[ChatMessage]) -> Result<bool, StoreError> {
        if super::prompts::id_of_messages(messages) == id {
            return Ok(true);
        }
        let Some(stored) = self.prompt_text(id)? else {
            return Ok(false);
        };
        Ok(match messages {
            [only] => only.content == *stored,
            many => *prompt_text(many) == *stored,
        })
    }

    /// The LLM judge's stored calls, and the verdicts the stored candidates hold (one per
    /// repeat of every candidate the judge was asked about, its own call or a reused one).
    pub fn judge_use(&self) -> Result<(u64, u64), StoreError> {
        let calls: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM calls WHERE role = ?1",
                [crate::role::Role::Judge.as_str()],
                |r| r.get(0),
            )
            .map_err(|e| self.err("counting judge calls", e))?;
        Ok((calls.max(0) as u64, self.judge_verdicts()?))
    }

    /// The verdicts the stored candidates hold (the second half of
    /// [`StoreReader::judge_use`]; a small table, not the calls).
    pub fn judge_verdicts(&self) -> Result<u64, StoreError> {
        let verdicts: i64 = self
            .conn
            .query_row(
                "SELECT COALESCE(SUM(json_array_length(llm_json)), 0) FROM judge_verdicts",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err("counting judge verdicts", e))?;
        Ok(verdicts.max(0) as u64)
    }

    /// Calls, failed calls, prompt and completion tokens per role, over every stored call.
    pub fn usage_by_role(&self) -> Result<Vec<RoleUsageRow>, StoreError> {
        let estimated = self.tokens_estimated_column()?;
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT role, COUNT(*), SUM(ok = 0), COALESCE(SUM(prompt_tokens), 0), \
                 COALESCE(SUM(completion_tokens), 0), COALESCE(SUM({estimated} = 1), 0) \
                 FROM calls GROUP BY role ORDER BY role",
            ))
            .map_err(|e| self.err("summing usage", e))?;
        let n = |v: i64| v.max(0) as u64;
        let rows = stmt
            .query_map([], |r| {
                Ok(RoleUsageRow {
                    role: r.get(0)?,
                    calls: n(r.get(1)?),
                    failed: n(r.get(2)?),
                    prompt_tokens: n(r.get(3)?),
                    completion_tokens: n(r.get(4)?),
                    estimated_calls: n(r.get(5)?),
                })
            })
            .map_err(|e| self.err("summing usage", e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err("summing usage", e))
    }

    /// Failed calls, grouped by problem, iteration, role, endpoint and kind.
    pub fn lost_calls(&self) -> Result<Vec<LostCallsRow>, StoreError> {
        let what = "counting failed calls";
        let mut stmt = self
            .conn
            .prepare(
                "SELECT problem_id, iteration, role, endpoint, COALESCE(error_kind, ''),                  COUNT(*), COALESCE(MAX(error_message), '') FROM calls WHERE ok = 0                  GROUP BY problem_id, iteration, role, endpoint, error_kind                  ORDER BY problem_id, iteration, role, endpoint, error_kind",
            )
            .map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(LostCallsRow {
                    problem_id: r.get(0)?,
                    iteration: r.get(1)?,
                    role: r.get(2)?,
                    endpoint: r.get(3)?,
                    kind: FailureKind::from_name(&r.get::<_, String>(4)?),
                    calls: r.get::<_, i64>(5)?.max(0) as u64,
                    example: r.get(6)?,
                })
            })
            .map_err(|e| self.err(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err(what, e))
    }

    /// Answered calls per problem (problems without any answered call are absent).
    pub fn answered_calls(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        let what = "counting answered calls";
        let mut stmt = self
            .conn
            .prepare("SELECT problem_id, COUNT(*) FROM calls WHERE ok = 1 GROUP BY problem_id")
            .map_err(|e| self.err(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })
            .map_err(|e| self.err(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.err(what, e))
    }

    /// Every stored version of every bank of `problem`, with the iteration that made it,
    /// by bank and version.
    pub fn bank_versions(
        &self,
        problem: &str,
    ) -> Result<Vec<(Option<u32>, BankVersion)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT bank, version, iteration, items_json, rejected_json FROM bank_versions \
                 WHERE problem_id = ?1 ORDER BY bank, version",
            )
            .map_err(|e| self.err("reading bank versions", e))?;
        let rows = stmt
            .query_map([problem], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(|e| self.err("reading bank versions", e))?;
        let mut out = Vec::new();
        for row in rows {
            let (bank, version, iteration, items, rejected) =
                row.map_err(|e| self.err("reading bank versions", e))?;
            let corrupt = |column: &str, e: serde_json::Error| StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("bank_versions.{column} of `{problem}`/{bank} v{version}"),
                reason: e.to_string(),
            };
            let items: Vec<String> =
                serde_json::from_str(&items).map_err(|e| corrupt("items_json", e))?;
            let rejected =
                serde_json::from_str(&rejected).map_err(|e| corrupt("rejected_json", e))?;
            out.push((
                iteration,
                BankVersion {
                    bank: bank.as_str().into(),
                    version,
                    items: items.into(),
                    rejected,
                },
            ));
        }
        Ok(out)
    }

    /// The last version of each bank of `problem` (bank → items).
    pub fn final_banks(&self, problem: &str) -> Result<BTreeMap<String, Vec<String>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT bank, items_json FROM bank_versions b WHERE problem_id = ?1 AND \
                 version = (SELECT MAX(version) FROM bank_versions \
                            WHERE problem_id = b.problem_id AND bank = b.bank) ORDER BY bank",
            )
            .map_err(|e| self.err("reading banks", e))?;
        let rows = stmt
            .query_map([problem], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err("reading banks", e))?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (bank, items) = row.map_err(|e| self.err("reading banks", e))?;
            let items = serde_json::from_str(&items).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                what: format!("bank_versions.items_json of `{problem}`/{bank}"),
                reason: e.to_string(),
            })?;
            out.insert(bank, items);
        }
        Ok(out)
    }
}
