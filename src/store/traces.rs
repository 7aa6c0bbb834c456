//! Which OpenTelemetry trace holds each problem's spans, so that a viewer can link a
//! problem and its calls to Jaeger.
//!
//! A problem's span is the root of a trace of its own (its iterations, calls and judging
//! nest under it), and a resumed session starts a new one: the table keeps one row per
//! (problem, trace) with the time the session made (or replayed) its first call of the
//! problem. A call belongs to the last trace recorded at or before it completed.
//!
//! The table is additive and created idempotently when a store is opened for writing,
//! whatever the schema version: a store written without tracing, or by a build from
//! before the table, simply has no rows (or no table), and readers treat both as "no
//! trace recorded".

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
use super::read::StoreReader;

/// The table (see the module docs).
const CREATE: &str = "CREATE TABLE IF NOT EXISTS problem_traces (
    problem_id      TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    recorded_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (problem_id, trace_id)
) WITHOUT ROWID";

/// Creates the table if the store has none.
pub(super) fn ensure_table(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(CREATE)
}

/// Records that `problem`'s spans of this session are in trace `trace_id` (kept once).
pub(super) fn insert(
    tx: &rusqlite::Transaction<'_>,
    problem: &str,
    trace_id: &str,
    at_ms: i64,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO problem_traces (problem_id, trace_id, recorded_at_ms) \
         VALUES (?1, ?2, ?3)",
    )?
    .execute(params![problem, trace_id, at_ms])?;
    Ok(())
}

/// One recorded trace of a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemTrace {
    pub problem_id: String,
    pub trace_id: String,
    pub recorded_at_ms: i64,
}

impl ProblemTrace {
    /// Of `traces` (one problem's, oldest first), the one a call completed at
    /// `completed_at_ms` belongs to: the last recorded at or before it.
    pub fn of_call(traces: &[ProblemTrace], completed_at_ms: i64) -> Option<&ProblemTrace> {
        traces
            .iter()
            .rev()
            .find(|t| t.recorded_at_ms <= completed_at_ms)
    }
}

impl StoreReader {
    /// Whether the store has the traces table (a store from before it has none).
    fn has_traces_table(&self) -> Result<bool, StoreError> {
        self.connection()
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'problem_traces'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(|e| self.sql_error("looking for the traces table", e))
    }

    /// The traces recorded for the problems, oldest first per problem (`problem`: only
    /// that one's); empty for a store without the table.
    pub fn problem_traces(&self, problem: Option<&str>) -> Result<Vec<ProblemTrace>, StoreError> {
        let what = "reading the problems' traces";
        if !self.has_traces_table()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .connection()
            .prepare_cached(
                "SELECT problem_id, trace_id, recorded_at_ms FROM problem_traces \
                 WHERE ?1 IS NULL OR problem_id = ?1 ORDER BY problem_id, recorded_at_ms, trace_id",
            )
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map([problem], |r| {
                Ok(ProblemTrace {
                    problem_id: r.get(0)?,
                    trace_id: r.get(1)?,
                    recorded_at_ms: r.get(2)?,
                })
            })
            .map_err(|e| self.sql_error(what, e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(id: &str, at: i64) -> ProblemTrace {
        ProblemTrace {
            problem_id: "p".into(),
            trace_id: id.into(),
            recorded_at_ms: at,
        }
    }

    #[test]
    fn a_call_belongs_to_the_last_trace_recorded_before_it_completed() {
        let traces = [trace("a", 10), trace("b", 50)];
        assert_eq!(ProblemTrace::of_call(&traces, 5), None);
        assert_eq!(
            ProblemTrace::of_call(&traces, 10).map(|t| &*t.trace_id),
            Some("a")
        );
        assert_eq!(
            ProblemTrace::of_call(&traces, 49).map(|t| &*t.trace_id),
            Some("a")
        );
        assert_eq!(
            ProblemTrace::of_call(&traces, 70).map(|t| &*t.trace_id),
            Some("b")
        );
    }

    #[test]
    fn the_table_is_created_once_and_kept_whatever_the_schema_version() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        ensure_table(&conn).unwrap();
        conn.execute("INSERT INTO problem_traces VALUES ('p', 'abc', 1)", [])
            .unwrap();
        ensure_table(&conn).unwrap();
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM problem_traces", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}
