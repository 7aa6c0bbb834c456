//! A run store as Parquet files, one per table, for notebooks (pandas, polars, DuckDB).
//!
//! `tmas export DIR --format parquet --output OUT` writes into the folder `OUT`:
//!
//! | file | one row per | joins on |
//! | --- | --- | --- |
//! | `problems.parquet` | problem: question, reference, status, iterations done, error | `problem_id` |
//! | `candidates.parquet` | candidate of an iteration: branch, mode (explore/exploit), status, scores, average | `problem_id, iteration, candidate` |
//! | `verifications.parquet` | verification: status, score, attempts, text | `problem_id, iteration, candidate` |
//! | `summaries.parquet` | candidate's summary of its verifications | `problem_id, iteration, candidate` |
//! | `judge_verdicts.parquet` | judged candidate: answer, rule outcome, LLM verdicts, score | `problem_id, iteration, candidate` |
//! | `calls.parquet` | model call, without its texts: role, status, tokens, latency, endpoint, attempts, error | `call_key`, `prompt_id` |
//! | `texts.parquet` | text: a prompt (`key` = `prompt_id`) or a call's `content` / `reasoning` (`key` = `call_key`) | `key, field` |
//! | `bank_versions.parquet` | version of a bank: items, items refused and why | `problem_id, bank` |
//! | `problem_traces.parquet` | trace a problem's spans went to (runs with tracing on; empty otherwise) | `problem_id`, `trace_id` (Jaeger) |
//! | `meta.parquet` | run metadata (seed, iterations, config, status) | `key` |
//!
//! The calls table carries no text so that a notebook can load hundreds of thousands of
//! calls in a few megabytes and join the texts it wants. Each file is written in row
//! groups of [`ROWS_PER_BATCH`] rows as the store is read, so memory stays flat however
//! large the run. Columns a store of an older schema version lacks are written as nulls.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rusqlite::types::ValueRef;

use super::read::StoreReader;
use super::{StoreError, prompts};

/// Rows per Arrow batch and at most per Parquet row group.
pub const ROWS_PER_BATCH: usize = 8192;

/// Text bytes per Arrow batch, and the encoded bytes at which a row group is closed early:
/// 8,192 prompts of a long run are gigabytes, so text batches and row groups are also cut
/// by size to keep memory flat.
pub const BYTES_PER_BATCH: usize = 16 << 20;

/// A column's type in the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Real,
    Bool,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Text => DataType::Utf8,
            Kind::Int => DataType::Int64,
            Kind::Real => DataType::Float64,
            Kind::Bool => DataType::Boolean,
        }
    }
}

/// A store table copied column for column (no text reassembly, no JSON parsing).
struct Plain {
    table: &'static str,
    columns: &'static [(&'static str, Kind)],
    order: &'static str,
}

const PLAIN: &[Plain] = &[
    Plain {
        table: "problems",
        columns: &[
            ("problem_id", Kind::Text),
            ("ordinal", Kind::Int),
            ("question", Kind::Text),
            ("reference_answer", Kind::Text),
            ("reference_solution", Kind::Text),
            ("grading_guidelines", Kind::Text),
            ("status", Kind::Text),
            ("iterations", Kind::Int),
            ("error", Kind::Text),
            ("updated_at_ms", Kind::Int),
        ],
        order: "ordinal",
    },
    Plain {
        table: "candidates",
        columns: &[
            ("problem_id", Kind::Text),
            ("iteration", Kind::Int),
            ("candidate", Kind::Int),
            ("branch", Kind::Text),
            ("mode", Kind::Text),
            ("status", Kind::Text),
            ("scores_json", Kind::Text),
            ("average_score", Kind::Real),
            ("fully_verified", Kind::Bool),
        ],
        order: "problem_id, iteration, candidate",
    },
    Plain {
        table: "verifications",
        columns: &[
            ("problem_id", Kind::Text),
            ("iteration", Kind::Int),
            ("candidate", Kind::Int),
            ("idx", Kind::Int),
            ("status", Kind::Text),
            ("score", Kind::Real),
            ("attempts", Kind::Int),
            ("text", Kind::Text),
        ],
        order: "problem_id, iteration, candidate, idx",
    },
    Plain {
        table: "summaries",
        columns: &[
            ("problem_id", Kind::Text),
            ("iteration", Kind::Int),
            ("candidate", Kind::Int),
            ("text", Kind::Text),
        ],
        order: "problem_id, iteration, candidate",
    },
    Plain {
        table: "judge_verdicts",
        columns: &[
            ("problem_id", Kind::Text),
            ("iteration", Kind::Int),
            ("candidate", Kind::Int),
            ("answer", Kind::Text),
            ("rule_outcome", Kind::Text),
            ("llm_json", Kind::Text),
            ("score", Kind::Real),
            ("undecided", Kind::Bool),
            ("disagreement", Kind::Bool),
        ],
        order: "problem_id, iteration, candidate",
    },
    Plain {
        table: "calls",
        columns: &[
            ("call_key", Kind::Text),
            ("problem_id", Kind::Text),
            ("iteration", Kind::Int),
            ("role", Kind::Text),
            ("candidate", Kind::Int),
            ("idx", Kind::Int),
            ("attempt", Kind::Int),
            ("prompt_id", Kind::Text),
            ("ok", Kind::Bool),
            ("finish_reason", Kind::Text),
            ("prompt_tokens", Kind::Int),
            ("completion_tokens", Kind::Int),
            ("latency_ms", Kind::Int),
            ("endpoint", Kind::Text),
            ("attempts", Kind::Int),
            ("max_tokens_sent", Kind::Int),
            ("error_kind", Kind::Text),
            ("error_message", Kind::Text),
            ("completed_at_ms", Kind::Int),
            ("tokens_estimated", Kind::Bool),
        ],
        order: "completed_at_ms, call_key",
    },
    Plain {
        table: "problem_traces",
        columns: &[
            ("problem_id", Kind::Text),
            ("trace_id", Kind::Text),
            ("recorded_at_ms", Kind::Int),
        ],
        order: "problem_id, recorded_at_ms, trace_id",
    },
    Plain {
        table: "meta",
        columns: &[("key", Kind::Text), ("value", Kind::Text)],
        order: "key",
    },
];

/// What was written: each file with its row count.
#[derive(Debug, Default)]
pub struct Written {
    pub files: Vec<(String, u64)>,
}

/// Writes every table of `reader`'s store into the existing, empty folder `out`.
pub fn write_all(reader: &StoreReader, out: &Path) -> Result<Written, StoreError> {
    let mut written = Written::default();
    for plain in PLAIN {
        let rows = write_plain(reader, plain, out)?;
        written.files.push((file_name(plain.table), rows));
    }
    let rows = write_texts(reader, out)?;
    written.files.push((file_name("texts"), rows));
    let rows = write_bank_versions(reader, out)?;
    written.files.push((file_name("bank_versions"), rows));
    Ok(written)
}

fn file_name(table: &str) -> String {
    format!("{table}.parquet")
}

/// One Parquet file being written, batch by batch.
struct Sink {
    path: PathBuf,
    schema: SchemaRef,
    writer: ArrowWriter<File>,
    rows: u64,
}

impl Sink {
    fn create(out: &Path, table: &str, schema: SchemaRef) -> Result<Self, StoreError> {
        let path = out.join(file_name(table));
        let file = File::create(&path).map_err(|e| write_error(&path, e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROWS_PER_BATCH))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| write_error(&path, e))?;
        Ok(Self {
            path,
            schema,
            writer,
            rows: 0,
        })
    }

    fn write(&mut self, columns: Vec<ArrayRef>) -> Result<(), StoreError> {
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| write_error(&self.path, e))?;
        self.rows += batch.num_rows() as u64;
        self.writer
            .write(&batch)
            .map_err(|e| write_error(&self.path, e))?;
        if self.writer.in_progress_size() >= BYTES_PER_BATCH {
            self.writer
                .flush()
                .map_err(|e| write_error(&self.path, e))?;
        }
        Ok(())
    }

    fn finish(self) -> Result<u64, StoreError> {
        self.writer
            .close()
            .map_err(|e| write_error(&self.path, e))?;
        Ok(self.rows)
    }
}

fn write_error(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Write {
        path: path.to_path_buf(),
        message: format!("writing Parquet: {e}"),
    }
}

/// A column's values accumulating for the next batch.
enum Column {
    Text(StringBuilder),
    Int(Int64Builder),
    Real(Float64Builder),
    Bool(BooleanBuilder),
}

impl Column {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Text => Column::Text(StringBuilder::new()),
            Kind::Int => Column::Int(Int64Builder::new()),
            Kind::Real => Column::Real(Float64Builder::new()),
            Kind::Bool => Column::Bool(BooleanBuilder::new()),
        }
    }

    /// Appends a SQLite value; `None` when its storage class does not fit the column.
    fn push(&mut self, value: ValueRef<'_>) -> Option<()> {
        match (self, value) {
            (Column::Text(b), ValueRef::Null) => b.append_null(),
            (Column::Int(b), ValueRef::Null) => b.append_null(),
            (Column::Real(b), ValueRef::Null) => b.append_null(),
            (Column::Bool(b), ValueRef::Null) => b.append_null(),
            (Column::Text(b), ValueRef::Text(t)) => b.append_value(std::str::from_utf8(t).ok()?),
            (Column::Int(b), ValueRef::Integer(i)) => b.append_value(i),
            (Column::Real(b), ValueRef::Real(r)) => b.append_value(r),
            (Column::Real(b), ValueRef::Integer(i)) => b.append_value(i as f64),
            (Column::Bool(b), ValueRef::Integer(i)) => b.append_value(i != 0),
            _ => return None,
        }
        Some(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Text(b) => Arc::new(b.finish()),
            Column::Int(b) => Arc::new(b.finish()),
            Column::Real(b) => Arc::new(b.finish()),
            Column::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// The columns of `table` in this store (an older schema version lacks some).
fn existing_columns(reader: &StoreReader, table: &str) -> Result<Vec<String>, StoreError> {
    let conn = reader.connection();
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(|e| reader.sql_error("reading a table's columns", e))?;
    let names = stmt
        .query_map([table], |r| r.get::<_, String>(0))
        .map_err(|e| reader.sql_error("reading a table's columns", e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| reader.sql_error("reading a table's columns", e))?;
    Ok(names)
}

fn write_plain(reader: &StoreReader, plain: &Plain, out: &Path) -> Result<u64, StoreError> {
    let existing = existing_columns(reader, plain.table)?;
    let select: Vec<String> = plain
        .columns
        .iter()
        .map(|(name, _)| {
            if existing.iter().any(|c| c == name) {
                format!("\"{name}\"")
            } else {
                format!("NULL AS \"{name}\"")
            }
        })
        .collect();
    let sql = if existing.is_empty() {
        // A table this store's version does not have at all: an empty file with the
        // columns, so that a notebook's code runs on every run.
        format!("SELECT {} WHERE 0", select.join(", "))
    } else {
        format!(
            "SELECT {} FROM {} ORDER BY {}",
            select.join(", "),
            plain.table,
            plain.order
        )
    };
    let schema = Arc::new(Schema::new(
        plain
            .columns
            .iter()
            .map(|(name, kind)| Field::new(*name, kind.data_type(), true))
            .collect::<Vec<_>>(),
    ));
    let mut sink = Sink::create(out, plain.table, schema)?;
    let mut columns: Vec<Column> = plain.columns.iter().map(|(_, k)| Column::new(*k)).collect();
    let conn = reader.connection();
    let context = "reading a table to export";
    let mut stmt = conn
        .prepare(&sql)
        .map_err(|e| reader.sql_error(context, e))?;
    let mut rows = stmt.query([]).map_err(|e| reader.sql_error(context, e))?;
    let mut pending = 0usize;
    while let Some(row) = rows.next().map_err(|e| reader.sql_error(context, e))? {
        for (i, column) in columns.iter_mut().enumerate() {
            let value = row.get_ref(i).map_err(|e| reader.sql_error(context, e))?;
            if column.push(value).is_none() {
                return Err(StoreError::Corrupt {
                    path: reader.path().to_path_buf(),
                    what: format!("{}.{}", plain.table, plain.columns[i].0),
                    reason: format!(
                        "holds {:?}, not the {:?} the column is",
                        value.data_type(),
                        plain.columns[i].1
                    ),
                });
            }
        }
        pending += 1;
        if pending == ROWS_PER_BATCH {
            sink.write(columns.iter_mut().map(Column::finish).collect())?;
            pending = 0;
        }
    }
    if pending > 0 || sink.rows == 0 {
        sink.write(columns.iter_mut().map(Column::finish).collect())?;
    }
    sink.finish()
}

/// `texts.parquet`: every stored prompt reassembled from its chunks, and every call's
/// reply and reasoning.
fn write_texts(reader: &StoreReader, out: &Path) -> Result<u64, StoreError> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("field", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let mut sink = Sink::create(out, "texts", schema)?;
    let (mut keys, mut fields, mut texts) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut pending, mut pending_bytes) = (0usize, 0usize);
    let flush = |sink: &mut Sink,
                 keys: &mut StringBuilder,
                 fields: &mut StringBuilder,
                 texts: &mut StringBuilder|
     -> Result<(), StoreError> {
        sink.write(vec![
            Arc::new(keys.finish()),
            Arc::new(fields.finish()),
            Arc::new(texts.finish()),
        ])
    };
    let conn = reader.connection();
    let context = "reading texts to export";

    let mut stmt = conn
        .prepare("SELECT id FROM prompts ORDER BY id")
        .map_err(|e| reader.sql_error(context, e))?;
    let mut rows = stmt.query([]).map_err(|e| reader.sql_error(context, e))?;
    while let Some(row) = rows.next().map_err(|e| reader.sql_error(context, e))? {
        let id: String = row.get(0).map_err(|e| reader.sql_error(context, e))?;
        let text = prompts::read(conn, &id)
            .map_err(|e| match e {
                prompts::PromptReadError::Sql(e) => reader.sql_error(context, e),
                corrupt => StoreError::Corrupt {
                    path: reader.path().to_path_buf(),
                    what: format!("prompt {id}"),
                    reason: corrupt.to_string(),
                },
            })?
            .unwrap_or_default();
        keys.append_value(&id);
        fields.append_value("prompt");
        texts.append_value(&text);
        pending += 1;
        pending_bytes += text.len();
        if pending == ROWS_PER_BATCH || pending_bytes >= BYTES_PER_BATCH {
            flush(&mut sink, &mut keys, &mut fields, &mut texts)?;
            (pending, pending_bytes) = (0, 0);
        }
    }
    drop(rows);
    drop(stmt);

    let mut stmt = conn
        .prepare(
            "SELECT call_key, content, reasoning FROM calls \
             WHERE content IS NOT NULL OR reasoning IS NOT NULL ORDER BY completed_at_ms, call_key",
        )
        .map_err(|e| reader.sql_error(context, e))?;
    let mut rows = stmt.query([]).map_err(|e| reader.sql_error(context, e))?;
    while let Some(row) = rows.next().map_err(|e| reader.sql_error(context, e))? {
        let key: String = row.get(0).map_err(|e| reader.sql_error(context, e))?;
        for (i, field) in [(1, "content"), (2, "reasoning")] {
            let text: Option<String> = row.get(i).map_err(|e| reader.sql_error(context, e))?;
            if let Some(text) = text {
                keys.append_value(&key);
                fields.append_value(field);
                texts.append_value(&text);
                pending += 1;
                pending_bytes += text.len();
            }
        }
        if pending >= ROWS_PER_BATCH || pending_bytes >= BYTES_PER_BATCH {
            flush(&mut sink, &mut keys, &mut fields, &mut texts)?;
            (pending, pending_bytes) = (0, 0);
        }
    }
    if pending > 0 || sink.rows == 0 {
        flush(&mut sink, &mut keys, &mut fields, &mut texts)?;
    }
    sink.finish()
}

/// One refused item of a bank update, as `bank_versions.rejected_json` holds it.
#[derive(serde::Deserialize)]
struct Refused {
    item: String,
    reason: String,
}

/// `bank_versions.parquet`: items as a list of strings, refusals as a list of
/// `{item, reason}`.
fn write_bank_versions(reader: &StoreReader, out: &Path) -> Result<u64, StoreError> {
    let refused_fields = Fields::from(vec![
        Field::new("item", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, false),
    ]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("problem_id", DataType::Utf8, false),
        Field::new("bank", DataType::Utf8, false),
        Field::new("version", DataType::Int64, false),
        Field::new("iteration", DataType::Int64, true),
        Field::new(
            "items",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        Field::new(
            "refused",
            DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(refused_fields.clone()),
                true,
            ))),
            false,
        ),
    ]));
    let mut sink = Sink::create(out, "bank_versions", schema)?;
    let mut columns = BankColumns::new(refused_fields);
    let conn = reader.connection();
    let context = "reading bank versions to export";
    let mut stmt = conn
        .prepare(
            "SELECT problem_id, bank, version, iteration, items_json, rejected_json \
             FROM bank_versions ORDER BY problem_id, bank, version",
        )
        .map_err(|e| reader.sql_error(context, e))?;
    let mut rows = stmt.query([]).map_err(|e| reader.sql_error(context, e))?;
    let mut pending = 0usize;
    while let Some(row) = rows.next().map_err(|e| reader.sql_error(context, e))? {
        let get_text = |i: usize| -> Result<String, StoreError> {
            row.get::<_, String>(i)
                .map_err(|e| reader.sql_error(context, e))
        };
        let (problem, bank) = (get_text(0)?, get_text(1)?);
        let version: i64 = row.get(2).map_err(|e| reader.sql_error(context, e))?;
        let iteration: Option<i64> = row.get(3).map_err(|e| reader.sql_error(context, e))?;
        let corrupt = |column: &str, e: serde_json::Error| StoreError::Corrupt {
            path: reader.path().to_path_buf(),
            what: format!("bank_versions.{column} of `{problem}`/{bank} v{version}"),
            reason: e.to_string(),
        };
        let items: Vec<String> =
            serde_json::from_str(&get_text(4)?).map_err(|e| corrupt("items_json", e))?;
        let refused: Vec<Refused> =
            serde_json::from_str(&get_text(5)?).map_err(|e| corrupt("rejected_json", e))?;
        columns.push(&problem, &bank, version, iteration, &items, &refused);
        pending += 1;
        if pending == ROWS_PER_BATCH {
            sink.write(columns.finish())?;
            pending = 0;
        }
    }
    if pending > 0 || sink.rows == 0 {
        sink.write(columns.finish())?;
    }
    sink.finish()
}

/// The columns of `bank_versions.parquet` accumulating for the next batch.
struct BankColumns {
    problem: StringBuilder,
    bank: StringBuilder,
    version: Int64Builder,
    iteration: Int64Builder,
    items: ListBuilder<StringBuilder>,
    refused: ListBuilder<StructBuilder>,
}

impl BankColumns {
    fn new(refused_fields: Fields) -> Self {
        Self {
            problem: StringBuilder::new(),
            bank: StringBuilder::new(),
            version: Int64Builder::new(),
            iteration: Int64Builder::new(),
            items: ListBuilder::new(StringBuilder::new()),
            refused: ListBuilder::new(StructBuilder::from_fields(refused_fields, 0)),
        }
    }

    fn push(
        &mut self,
        problem: &str,
        bank: &str,
        version: i64,
        iteration: Option<i64>,
        items: &[String],
        refused: &[Refused],
    ) {
        self.problem.append_value(problem);
        self.bank.append_value(bank);
        self.version.append_value(version);
        self.iteration.append_option(iteration);
        for item in items {
            self.items.values().append_value(item);
        }
        self.items.append(true);
        let entries = self.refused.values();
        for r in refused {
            if let Some(item) = entries.field_builder::<StringBuilder>(0) {
                item.append_value(&r.item);
            }
            if let Some(reason) = entries.field_builder::<StringBuilder>(1) {
                reason.append_value(&r.reason);
            }
            entries.append(true);
        }
        self.refused.append(true);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.problem.finish()),
            Arc::new(self.bank.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.iteration.finish()),
            Arc::new(self.items.finish()),
            Arc::new(self.refused.finish()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use rusqlite::Connection;

    use super::*;

    fn reader_of(dir: &Path, sql: &str) -> StoreReader {
        let path = dir.join("run.sqlite");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(sql).expect("schema");
        StoreReader::from_conn(conn, &path).expect("reader")
    }

    fn read_back(path: &Path) -> RecordBatch {
        let file = File::open(path).expect("file");
        let mut batches = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .expect("reader");
        batches.next().expect("a batch").expect("batch reads")
    }

    #[test]
    fn columns_an_older_store_lacks_come_out_as_nulls() {
        let dir = tempfile::tempdir().expect("dir");
        // `problems` as schema version 2 had it: no reference_solution, grading_guidelines.
        let reader = reader_of(
            dir.path(),
            "CREATE TABLE problems (problem_id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, \
             question TEXT NOT NULL, reference_answer TEXT NOT NULL, status TEXT NOT NULL, \
             iterations INTEGER, error TEXT, record_json TEXT, updated_at_ms INTEGER NOT NULL);
             INSERT INTO problems VALUES ('b', 1, 'q2', '7', 'done', 3, NULL, NULL, 5);
             INSERT INTO problems VALUES ('a', 0, 'q1', '4', 'failed', 1, 'boom', NULL, 6);",
        );
        let problems = &PLAIN[0];
        assert_eq!(problems.table, "problems");
        assert_eq!(
            write_plain(&reader, problems, dir.path()).expect("written"),
            2
        );
        let batch = read_back(&dir.path().join("problems.parquet"));
        let ids = batch
            .column_by_name("problem_id")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .expect("ids");
        assert_eq!((ids.value(0), ids.value(1)), ("a", "b"), "by ordinal");
        let solutions = batch.column_by_name("reference_solution").expect("column");
        assert_eq!(solutions.null_count(), 2);
        let iterations = batch
            .column_by_name("iterations")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .expect("iterations");
        assert_eq!((iterations.value(0), iterations.value(1)), (1, 3));
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_table_and_column() {
        let dir = tempfile::tempdir().expect("dir");
        let reader = reader_of(
            dir.path(),
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('seed', X'00ff');",
        );
        let meta = PLAIN.iter().find(|p| p.table == "meta").expect("meta");
        let err = write_plain(&reader, meta, dir.path()).expect_err("a blob is not text");
        assert!(err.to_string().contains("meta.value"), "{err}");
    }

    #[test]
    fn a_table_the_store_does_not_have_is_an_empty_file_with_its_columns() {
        let dir = tempfile::tempdir().expect("dir");
        let reader = reader_of(dir.path(), "CREATE TABLE other (x INTEGER);");
        let summaries = PLAIN
            .iter()
            .find(|p| p.table == "summaries")
            .expect("summaries");
        assert_eq!(
            write_plain(&reader, summaries, dir.path()).expect("written"),
            0
        );
        let file = File::open(dir.path().join("summaries.parquet")).expect("file");
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("reader");
        let names: Vec<_> = builder
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["problem_id", "iteration", "candidate", "text"]);
    }
}
