//! Read-only queries behind `tmas view`'s pages. Each one is bounded: it reads one
//! problem's rows (by primary key), one candidate's calls (a range of `calls.call_key`),
//! a page of calls (a range of `calls.rowid`), or the small per-candidate tables; none
//! reads every call's text. Each statement is its own short read transaction, so a run
//! writing the store is never held up.

use rusqlite::{OptionalExtension, params};
use serde::Deserialize;
use serde::de::IntoDeserializer;

use super::StoreError;
use super::read::StoreReader;
use crate::method::result::{Branch, CandidateStatus, VerificationStatus};
use crate::record::ProblemRecord;

/// Changes whenever something is committed that a page shows: the last call's rowid,
/// the problems' latest update and the number of bank versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChangeToken {
    pub last_call: i64,
    pub problems_updated: i64,
    pub bank_versions: i64,
}

/// Which judged records the store holds: how many problems are `done` with a record and
/// the latest update among them. Everything computed from the judged records alone (the
/// paper's analyses) is the same while this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordsToken {
    pub done: i64,
    pub updated: i64,
}

/// A judged candidate's score (one `judge_verdicts` row, without its texts).
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictScore {
    pub problem_id: String,
    pub iteration: u32,
    pub candidate: u32,
    pub score: f64,
}

/// Which way a stored candidate went and whether its solution call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateMark {
    pub problem_id: String,
    pub iteration: u32,
    pub branch: Branch,
    pub status: CandidateStatus,
}

/// How the judge saw one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictView {
    pub answer: Option<String>,
    /// The rule check's verdict as stored (`equivalent`, `not_equivalent`, …).
    pub rule_outcome: String,
    /// One entry per judge repeat (`null`: unparseable), as stored.
    pub llm_json: String,
    pub score: f64,
    pub undecided: bool,
    pub disagreement: bool,
}

/// One stored candidate of a judged problem, with its summary and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateView {
    pub iteration: u32,
    pub candidate: u32,
    pub branch: Branch,
    /// The solution prompt it got (`fresh`, `refine`, `explore`).
    pub mode: String,
    pub status: CandidateStatus,
    pub scores: Vec<f64>,
    pub average_score: Option<f64>,
    pub fully_verified: bool,
    pub summary: Option<String>,
    pub verdict: Option<VerdictView>,
}

/// One of a candidate's M verification slots.
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationView {
    pub idx: u32,
    pub status: VerificationStatus,
    pub score: Option<f64>,
    pub attempts: u32,
    pub text: Option<String>,
}

/// A stored call without its texts (a row of the calls table).
#[derive(Debug, Clone, PartialEq)]
pub struct CallSummary {
    pub rowid: i64,
    pub call_key: String,
    pub problem_id: String,
    pub iteration: u32,
    pub role: String,
    pub candidate: Option<u32>,
    pub idx: Option<u32>,
    pub attempt: u32,
    pub ok: bool,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub latency_ms: Option<i64>,
    pub endpoint: Option<String>,
    /// HTTP attempts of the client (retries + 1).
    pub attempts: Option<i64>,
    pub finish_reason: Option<String>,
    pub error_kind: Option<String>,
    pub error_message: Option<String>,
    pub completed_at_ms: i64,
}

/// A stored call's texts: its prompt's id, the reply and the reasoning text.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTexts {
    pub prompt_id: String,
    pub content: Option<String>,
    pub reasoning: Option<String>,
}

/// Calls of one (problem, iteration, role, endpoint, answered or not, error kind):
/// how many, their tokens, and one of their error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGroup {
    pub problem_id: String,
    pub iteration: u32,
    pub role: String,
    pub endpoint: Option<String>,
    pub ok: bool,
    pub error_kind: Option<String>,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Answered calls whose token counts are the client's estimate.
    pub estimated_calls: u64,
    /// The largest of their error messages by text order (empty when answered).
    pub example: String,
}

/// Which calls a page of the calls table shows (`None`: any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallFilter {
    /// A role's stored name ([`crate::role::Role::as_str`]).
    pub role: Option<&'static str>,
    pub ok: Option<bool>,
    pub endpoint: Option<String>,
    pub problem_id: Option<String>,
    /// Latency bounds in ms, both included (a call without a latency passes neither).
    pub min_latency_ms: Option<i64>,
    pub max_latency_ms: Option<i64>,
    /// Least prompt + completion tokens (a missing count is 0).
    pub min_tokens: Option<i64>,
    /// Only calls the client sent more than once (HTTP attempts > 1).
    pub retried: bool,
}

/// The statement of [`StoreReader::calls_page`]. Without a problem, the rowid window
/// (`?1`, `?13`] bounds the rows read (a range of the table's own b-tree, in rowid
/// order). With one, the key range [`?7`, `?8`) of the key's index does; the `+` keeps
/// the planner off the rowid whatever its estimates (a shorter statement of the same
/// shape is planned as a rowid scan from `?1` to the table's end, sparing the sort of the
/// problem's few calls).
fn calls_page_sql(one_problem: bool) -> String {
    let (start, range, order) = if one_problem {
        (
            "+rowid > ?1",
            "AND call_key >= ?7 AND call_key < ?8 AND ?13 IS NULL",
            "+rowid",
        )
    } else {
        (
            "rowid > ?1",
            "AND ?7 IS NULL AND ?8 IS NULL AND rowid <= ?13",
            "rowid",
        )
    };
    format!(
        "SELECT {CALL_COLUMNS} FROM calls WHERE {start} \
         AND (?2 IS NULL OR role = ?2) AND (?3 IS NULL OR ok = ?3) \
         AND (?4 IS NULL OR endpoint = ?4) AND (?5 IS NULL OR problem_id = ?5) \
         AND (?9 IS NULL OR latency_ms >= ?9) AND (?10 IS NULL OR latency_ms <= ?10) \
         AND (?11 IS NULL \
              OR COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0) >= ?11) \
         AND (?12 = 0 OR attempts > 1) \
         {range} ORDER BY {order} LIMIT ?6"
    )
}

/// A page of the calls table and how far it looked: what it may say about the calls it
/// did not show.
#[derive(Debug, Clone, PartialEq)]
pub struct CallsScan {
    /// The calls found that pass the filter, in rowid order (up to the limit asked for).
    pub calls: Vec<CallSummary>,
    pub end: ScanEnd,
}

/// Where a page of the calls table stopped looking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanEnd {
    /// The page is full: more calls may pass the filter after its last row.
    Full,
    /// The page looked at the rows up to this rowid and no further, and calls are stored
    /// after it: whether any of them passes is not known yet.
    Stopped { upto: i64 },
    /// Every call stored after the page's start was looked at: the page holds all of
    /// them that pass.
    Complete,
}

impl CallsScan {
    /// The rule: `found` rows passing the filter (`limit` at most) in a window ending at
    /// rowid `upto` (`None`: no window, every row after the start was read) of a table
    /// whose last rowid is `last_stored`.
    fn of(found: Vec<CallSummary>, limit: usize, upto: Option<i64>, last_stored: i64) -> Self {
        let end = if found.len() >= limit {
            ScanEnd::Full
        } else {
            match upto {
                Some(upto) if last_stored > upto => ScanEnd::Stopped { upto },
                _ => ScanEnd::Complete,
            }
        };
        Self { calls: found, end }
    }
}

const CALL_COLUMNS: &str = "rowid, call_key, problem_id, iteration, role, candidate, idx, \
     attempt, ok, prompt_tokens, completion_tokens, latency_ms, endpoint, attempts, \
     finish_reason, error_kind, error_message, completed_at_ms";

fn call_summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<CallSummary> {
    Ok(CallSummary {
        rowid: r.get(0)?,
        call_key: r.get(1)?,
        problem_id: r.get(2)?,
        iteration: r.get(3)?,
        role: r.get(4)?,
        candidate: r.get(5)?,
        idx: r.get(6)?,
        attempt: r.get(7)?,
        ok: r.get(8)?,
        prompt_tokens: r.get(9)?,
        completion_tokens: r.get(10)?,
        latency_ms: r.get(11)?,
        endpoint: r.get(12)?,
        attempts: r.get(13)?,
        finish_reason: r.get(14)?,
        error_kind: r.get(15)?,
        error_message: r.get(16)?,
        completed_at_ms: r.get(17)?,
    })
}

/// A stored enum name (`explore`, `complete`, …) read as the type it was written from.
fn stored_name<T: for<'de> Deserialize<'de>>(column: usize, text: String) -> rusqlite::Result<T> {
    let de: serde::de::value::StringDeserializer<serde::de::value::Error> =
        text.into_deserializer();
    T::deserialize(de).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// The first and last-plus-one `call_key` of the calls of `problem`'s iteration `t`
/// (`PROBLEM/itT/…`): a range of the key's index.
fn iteration_key_range(problem: &str, t: u32) -> (String, String) {
    // '0' is the character after '/', so every key starting with the prefix sorts
    // before the prefix with its '/' replaced by '0'.
    (format!("{problem}/it{t}/"), format!("{problem}/it{t}0"))
}

impl StoreReader {
    /// See [`ChangeToken`]; three lookups that read an index's end or a small table.
    pub fn change_token(&self) -> Result<ChangeToken, StoreError> {
        let what = "reading the store's change token";
        let conn = self.connection();
        let last_call = conn
            .query_row("SELECT COALESCE(MAX(rowid), 0) FROM calls", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.sql_error(what, e))?;
        let problems_updated = conn
            .query_row(
                "SELECT COALESCE(MAX(updated_at_ms), 0) + COUNT(*) FROM problems",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.sql_error(what, e))?;
        let bank_versions = conn
            .query_row("SELECT COUNT(*) FROM bank_versions", [], |r| r.get(0))
            .map_err(|e| self.sql_error(what, e))?;
        Ok(ChangeToken {
            last_call,
            problems_updated,
            bank_versions,
        })
    }

    /// See [`RecordsToken`]: one pass over the small problems table.
    pub fn records_token(&self) -> Result<RecordsToken, StoreError> {
        self.connection()
            .query_row(
                "SELECT COUNT(*), COALESCE(MAX(updated_at_ms), 0) FROM problems \
                 WHERE status = 'done' AND record_json IS NOT NULL",
                [],
                |r| {
                    Ok(RecordsToken {
                        done: r.get(0)?,
                        updated: r.get(1)?,
                    })
                },
            )
            .map_err(|e| self.sql_error("reading the judged records' token", e))
    }

    /// The judged records of every `done` problem in dataset order, without the texts the
    /// store keeps in `calls` ([`StoreReader::done_record_without_texts`]), and the
    /// [`RecordsToken`] they are: both read in one read transaction, so the token names
    /// exactly these records.
    pub fn records_without_texts(&self) -> Result<(RecordsToken, Vec<ProblemRecord>), StoreError> {
        let what = "reading the judged records";
        let tx = self
            .connection()
            .unchecked_transaction()
            .map_err(|e| self.sql_error(what, e))?;
        let token = self.records_token()?;
        let mut records = Vec::new();
        for problem in self.problems()? {
            if let Some(record) = self.done_record_without_texts(&problem.problem_id)? {
                records.push(record);
            }
        }
        tx.commit().map_err(|e| self.sql_error(what, e))?;
        Ok((token, records))
    }

    /// Every judged candidate's score (one small row per candidate of a judged problem).
    pub fn verdict_scores(&self) -> Result<Vec<VerdictScore>, StoreError> {
        let what = "reading judge scores";
        let mut stmt = self
            .connection()
            .prepare("SELECT problem_id, iteration, candidate, score FROM judge_verdicts")
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(VerdictScore {
                    problem_id: r.get(0)?,
                    iteration: r.get(1)?,
                    candidate: r.get(2)?,
                    score: r.get(3)?,
                })
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// Every stored candidate's branch and status.
    pub fn candidate_marks(&self) -> Result<Vec<CandidateMark>, StoreError> {
        let what = "reading candidates";
        let mut stmt = self
            .connection()
            .prepare("SELECT problem_id, iteration, branch, status FROM candidates")
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(CandidateMark {
                    problem_id: r.get(0)?,
                    iteration: r.get(1)?,
                    branch: stored_name(2, r.get(2)?)?,
                    status: stored_name(3, r.get(3)?)?,
                })
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// The stored candidates of one judged problem, by iteration and candidate (`only`:
    /// just the one of that iteration and index).
    pub fn problem_candidates(
        &self,
        problem: &str,
        only: Option<(u32, u32)>,
    ) -> Result<Vec<CandidateView>, StoreError> {
        let what = "reading a problem's candidates";
        let mut stmt = self
            .connection()
            .prepare_cached(
                "SELECT c.iteration, c.candidate, c.branch, c.mode, c.status, c.scores_json, \
                 c.average_score, c.fully_verified, s.text, j.answer, j.rule_outcome, \
                 j.llm_json, j.score, j.undecided, j.disagreement \
                 FROM candidates c \
                 LEFT JOIN summaries s ON s.problem_id = c.problem_id \
                   AND s.iteration = c.iteration AND s.candidate = c.candidate \
                 LEFT JOIN judge_verdicts j ON j.problem_id = c.problem_id \
                   AND j.iteration = c.iteration AND j.candidate = c.candidate \
                 WHERE c.problem_id = ?1 AND (?2 IS NULL OR c.iteration = ?2) \
                 AND (?3 IS NULL OR c.candidate = ?3) ORDER BY c.iteration, c.candidate",
            )
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(
                params![problem, only.map(|o| o.0), only.map(|o| o.1)],
                |r| {
                    let scores: String = r.get(5)?;
                    let scores: Vec<f64> = serde_json::from_str(&scores).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            5,
                            rusqlite::types::Type::Text,
                            Box::new(e),
                        )
                    })?;
                    let verdict = match r.get::<_, Option<String>>(10)? {
                        Some(rule_outcome) => Some(VerdictView {
                            answer: r.get(9)?,
                            rule_outcome,
                            llm_json: r.get(11)?,
                            score: r.get(12)?,
                            undecided: r.get(13)?,
                            disagreement: r.get(14)?,
                        }),
                        None => None,
                    };
                    Ok(CandidateView {
                        iteration: r.get(0)?,
                        candidate: r.get(1)?,
                        branch: stored_name(2, r.get(2)?)?,
                        mode: r.get(3)?,
                        status: stored_name(4, r.get(4)?)?,
                        scores,
                        average_score: r.get(6)?,
                        fully_verified: r.get(7)?,
                        summary: r.get(8)?,
                        verdict,
                    })
                },
            )
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// The M verification slots of one candidate, with their texts.
    pub fn candidate_verifications(
        &self,
        problem: &str,
        iteration: u32,
        candidate: u32,
    ) -> Result<Vec<VerificationView>, StoreError> {
        let what = "reading a candidate's verifications";
        let mut stmt = self
            .connection()
            .prepare_cached(
                "SELECT idx, status, score, attempts, text FROM verifications \
                 WHERE problem_id = ?1 AND iteration = ?2 AND candidate = ?3 ORDER BY idx",
            )
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(params![problem, iteration, candidate], |r| {
                Ok(VerificationView {
                    idx: r.get(0)?,
                    status: stored_name(1, r.get(1)?)?,
                    score: r.get(2)?,
                    attempts: r.get(3)?,
                    text: r.get(4)?,
                })
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// The calls of `problem`'s iteration `iteration` (all of them, or one candidate's),
    /// in key order: a range of the key's index, not a scan of the table.
    pub fn iteration_calls(
        &self,
        problem: &str,
        iteration: u32,
        candidate: Option<u32>,
    ) -> Result<Vec<CallSummary>, StoreError> {
        let what = "reading an iteration's calls";
        let (from, to) = iteration_key_range(problem, iteration);
        let mut stmt = self
            .connection()
            .prepare_cached(&format!(
                "SELECT {CALL_COLUMNS} FROM calls WHERE call_key >= ?1 AND call_key < ?2 \
                 AND problem_id = ?3 AND iteration = ?4 \
                 AND (?5 IS NULL OR candidate = ?5) ORDER BY call_key"
            ))
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(
                params![from, to, problem, iteration, candidate],
                call_summary,
            )
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// One call by key, with its texts.
    pub fn call_with_texts(
        &self,
        key: &str,
    ) -> Result<Option<(CallSummary, CallTexts)>, StoreError> {
        self.connection()
            .prepare_cached(&format!(
                "SELECT {CALL_COLUMNS}, prompt_id, content, reasoning FROM calls \
                 WHERE call_key = ?1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row([key], |r| {
                    Ok((
                        call_summary(r)?,
                        CallTexts {
                            prompt_id: r.get(18)?,
                            content: r.get(19)?,
                            reasoning: r.get(20)?,
                        },
                    ))
                })
                .optional()
            })
            .map_err(|e| self.sql_error("reading a call", e))
    }

    /// Up to `limit` calls after rowid `after` that pass `filter`, in the order they were
    /// stored, looking at `scan` rows at most (see [`CallsScan`]): one problem's calls
    /// are a range of the key's index and are all looked at (a problem has a bounded
    /// number of calls); otherwise only the rows `after + 1 ..= after + scan`, so that a
    /// filter no call passes costs `scan` rows, not the whole table.
    pub fn calls_page(
        &self,
        filter: &CallFilter,
        after: i64,
        limit: usize,
        scan: i64,
    ) -> Result<CallsScan, StoreError> {
        let what = "listing calls";
        let (from, to, upto) = match &filter.problem_id {
            Some(p) => (Some(format!("{p}/")), Some(format!("{p}0")), None),
            None => (None, None, Some(after.saturating_add(scan.max(1)))),
        };
        let mut stmt = self
            .connection()
            .prepare_cached(&calls_page_sql(filter.problem_id.is_some()))
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(
                params![
                    after,
                    filter.role,
                    filter.ok,
                    filter.endpoint,
                    filter.problem_id,
                    limit as i64,
                    from,
                    to,
                    filter.min_latency_ms,
                    filter.max_latency_ms,
                    filter.min_tokens,
                    filter.retried,
                    upto,
                ],
                call_summary,
            )
            .map_err(|e| self.sql_error(what, e))?;
        let calls: Vec<CallSummary> = rows
            .collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))?;
        let last_stored = match upto {
            // A full page needs no more: the next one starts after its last row.
            Some(_) if calls.len() < limit => self.change_token()?.last_call,
            _ => 0,
        };
        Ok(CallsScan::of(calls, limit, upto, last_stored))
    }

    /// (rowid, problem, iteration) of up to `limit` calls stored after rowid `after`: what
    /// a live view reads to follow a run's progress without reading a call twice.
    pub fn call_progress_since(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String, u32)>, StoreError> {
        let what = "reading new calls";
        let mut stmt = self
            .connection()
            .prepare_cached(
                "SELECT rowid, problem_id, iteration FROM calls WHERE rowid > ?1 \
                 ORDER BY rowid LIMIT ?2",
            )
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(params![after, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// The calls stored after rowid `after` up to rowid `upto`, grouped as [`CallGroup`]:
    /// what the run-wide figures (calls lost, answered per problem, tokens per role) are
    /// summed from, so that following a run reads each call once.
    pub fn call_groups(&self, after: i64, upto: i64) -> Result<Vec<CallGroup>, StoreError> {
        let what = "grouping calls";
        let estimated = self.tokens_estimated_column()?;
        let mut stmt = self
            .connection()
            .prepare_cached(&format!(
                "SELECT problem_id, iteration, role, endpoint, ok, error_kind, COUNT(*), \
                 COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), \
                 COALESCE(MAX(error_message), ''), COALESCE(SUM({estimated} = 1), 0) \
                 FROM calls WHERE rowid > ?1 AND rowid <= ?2 \
                 GROUP BY problem_id, iteration, role, endpoint, ok, error_kind"
            ))
            .map_err(|e| self.sql_error(what, e))?;
        let n = |v: i64| v.max(0) as u64;
        let rows = stmt
            .query_map(params![after, upto], |r| {
                Ok(CallGroup {
                    problem_id: r.get(0)?,
                    iteration: r.get(1)?,
                    role: r.get(2)?,
                    endpoint: r.get(3)?,
                    ok: r.get(4)?,
                    error_kind: r.get(5)?,
                    calls: n(r.get(6)?),
                    prompt_tokens: n(r.get(7)?),
                    completion_tokens: n(r.get(8)?),
                    example: r.get(9)?,
                    estimated_calls: n(r.get(10)?),
                })
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }

    /// Problems per status (`pending`, `done`, `failed`).
    pub fn problem_status_counts(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let what = "counting problems";
        let mut stmt = self
            .connection()
            .prepare_cached("SELECT status, COUNT(*) FROM problems GROUP BY status ORDER BY status")
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iteration_key_range_holds_exactly_that_iterations_keys() {
        let (from, to) = iteration_key_range("p/1", 2);
        let inside = ["p/1/it2/solution/c0/a0", "p/1/it2/judge/c7/v1/a0"];
        let outside = [
            "p/1/it20/solution/c0/a0",
            "p/1/it1/x",
            "p/1/it3/",
            "p/10/it2/x",
        ];
        for key in inside {
            assert!(
                from.as_str() <= key && key < to.as_str(),
                "{key} should be inside"
            );
        }
        for key in outside {
            assert!(
                !(from.as_str() <= key && key < to.as_str()),
                "{key} should be outside"
            );
        }
    }

    /// A store with `n` calls of problem `p`, rowids 1..=n: the call with rowid `failed`
    /// (if any) failed, every other one answered.
    fn store_with_calls(n: i64, failed: Option<i64>) -> StoreReader {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::ensure_schema_for_tests(&mut conn);
        conn.execute(
            "INSERT INTO prompts (id, bytes, chunks) VALUES ('x', 0, '[]')",
            [],
        )
        .unwrap();
        for i in 1..=n {
            conn.execute(
                "INSERT INTO calls (rowid, call_key, problem_id, iteration, role, candidate, \
                 attempt, prompt_id, request_json, ok, latency_ms, completed_at_ms) \
                 VALUES (?1, ?2, 'p', 0, 'solution', ?1, 0, 'x', '{}', ?3, 5, ?1)",
                params![i, format!("p/it0/solution/c{i}/a0"), Some(i) != failed],
            )
            .unwrap();
        }
        StoreReader::from_conn(conn, std::path::Path::new("mem")).unwrap()
    }

    fn failed_only() -> CallFilter {
        CallFilter {
            ok: Some(false),
            ..CallFilter::default()
        }
    }

    fn rowids(scan: &CallsScan) -> Vec<i64> {
        scan.calls.iter().map(|c| c.rowid).collect()
    }

    #[test]
    fn a_filter_no_call_passes_stops_after_its_window_and_says_so() {
        let reader = store_with_calls(25, None);
        let scan = reader.calls_page(&failed_only(), 0, 11, 10).unwrap();
        assert_eq!(scan.end, ScanEnd::Stopped { upto: 10 });
        assert!(scan.calls.is_empty());
        let scan = reader.calls_page(&failed_only(), 10, 11, 10).unwrap();
        assert_eq!(scan.end, ScanEnd::Stopped { upto: 20 });
        // The last window reaches the table's end: now "none" is known.
        let scan = reader.calls_page(&failed_only(), 20, 11, 10).unwrap();
        assert_eq!(scan.end, ScanEnd::Complete);
        assert!(scan.calls.is_empty());
    }

    #[test]
    fn a_match_beyond_the_window_is_found_by_a_later_page_never_reported_absent() {
        let reader = store_with_calls(25, Some(23));
        let mut after = 0;
        let mut pages = 0;
        let found = loop {
            let scan = reader.calls_page(&failed_only(), after, 11, 10).unwrap();
            pages += 1;
            match scan.end {
                ScanEnd::Stopped { upto } => {
                    assert!(scan.calls.is_empty(), "{:?}", rowids(&scan));
                    after = upto;
                }
                ScanEnd::Complete => break rowids(&scan),
                ScanEnd::Full => panic!("one call passes: no full page"),
            }
        };
        assert_eq!((found, pages), (vec![23], 3));
    }

    #[test]
    fn a_page_that_fills_is_full_and_one_problems_calls_are_all_looked_at() {
        let reader = store_with_calls(25, Some(25));
        let scan = reader.calls_page(&CallFilter::default(), 0, 4, 10).unwrap();
        assert_eq!((rowids(&scan), scan.end), (vec![1, 2, 3, 4], ScanEnd::Full));
        // Less than a page in the window, and rows after it.
        let any = CallFilter::default();
        let scan = reader.calls_page(&any, 18, 11, 5).unwrap();
        assert_eq!(
            (rowids(&scan), scan.end),
            (vec![19, 20, 21, 22, 23], ScanEnd::Stopped { upto: 23 })
        );
        // A problem's calls: the key range, whatever the window.
        let of_p = CallFilter {
            problem_id: Some("p".into()),
            ..failed_only()
        };
        let scan = reader.calls_page(&of_p, 0, 11, 10).unwrap();
        assert_eq!((rowids(&scan), scan.end), (vec![25], ScanEnd::Complete));
    }

    #[test]
    fn each_calls_page_statement_reads_a_bounded_range() {
        let reader = store_with_calls(3, None);
        let plan = |one_problem: bool| -> String {
            let sql = format!("EXPLAIN QUERY PLAN {}", calls_page_sql(one_problem));
            let mut stmt = reader.connection().prepare(&sql).unwrap();
            // Planned without values, as a prepared statement is (unbound: NULL).
            let mut rows = stmt.raw_query();
            let mut steps = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                steps.push(row.get::<_, String>(3).unwrap());
            }
            steps.join("; ")
        };
        let window = plan(false);
        assert!(
            window.contains("INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
            "{window}"
        );
        let problem = plan(true);
        assert!(
            problem.contains("USING INDEX sqlite_autoindex_calls_1 (call_key>? AND call_key<?)"),
            "{problem}"
        );
    }

    #[test]
    fn a_stored_name_reads_as_its_type_and_an_unknown_one_is_an_error() {
        assert_eq!(
            stored_name::<Branch>(0, "explore".into()).unwrap(),
            Branch::Explore
        );
        assert!(stored_name::<Branch>(0, "sideways".into()).is_err());
    }
}
