//! Problem datasets: JSONL (the TMAS authors' layout: `problem_id`, `question`, `answer`)
//! and CSV (IMO-AnswerBench's columns `Problem ID`, `Problem`, `Short Answer`), with
//! configurable field names and `--limit` / `--ids` selection.
//!
//! Bad rows (invalid JSON, missing or empty field, wrong type, duplicate id) make one error
//! listing every one of them (up to [`MAX_LISTED_BAD_ROWS`]) by file, line and field, so a
//! file is fixed in one pass, unless `skip_bad_rows` is set: then each is logged, kept in
//! [`Dataset::skipped`] and left out. The whole file is validated before selection, so a
//! run with `--limit 5` fails on the same file as the full run would (a dataset is a few
//! hundred rows; reading it all costs nothing).
//!
//! Parsing is separate from IO: [`parse_dataset`] works on bytes already read, which is
//! what the tests use; [`load_dataset`] reads the file and calls it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One problem with its reference answer. Texts are trimmed of surrounding whitespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub id: String,
    pub question: String,
    pub answer: String,
    /// Proof problems (JSONL `reference_solution`, optional): a reference proof the proof
    /// grader compares with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_solution: Option<String>,
    /// Proof problems (JSONL `grading_guidelines`, optional): what the grader should
    /// award marks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grading_guidelines: Option<String>,
}

/// JSONL keys of the optional proof fields.
pub const REFERENCE_SOLUTION_FIELD: &str = "reference_solution";
pub const GRADING_GUIDELINES_FIELD: &str = "grading_guidelines";

/// File format of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// One JSON object per line; blank lines are ignored.
    Jsonl,
    /// Comma-separated with a header row; quoted fields may span lines.
    Csv,
}

impl DatasetFormat {
    /// The format named by the file extension (`.jsonl`, `.csv`, case-insensitive).
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" => Some(Self::Jsonl),
            "csv" => Some(Self::Csv),
            _ => None,
        }
    }

    /// Default (id, question, answer) field names: the authors' JSONL keys, or the
    /// IMO-AnswerBench CSV columns.
    pub fn default_fields(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Jsonl => ("problem_id", "question", "answer"),
            Self::Csv => ("Problem ID", "Problem", "Short Answer"),
        }
    }
}

impl fmt::Display for DatasetFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Jsonl => "jsonl",
            Self::Csv => "csv",
        })
    }
}

/// What to load and which problems to keep. `None` fields take the format's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetSpec {
    pub path: PathBuf,
    /// `None`: chosen by the file extension.
    #[serde(default)]
    pub format: Option<DatasetFormat>,
    #[serde(default)]
    pub id_field: Option<String>,
    #[serde(default)]
    pub question_field: Option<String>,
    #[serde(default)]
    pub answer_field: Option<String>,
    /// Keep at most this many problems (after `ids` selection), in file order.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Keep only these ids (in file order); an id not in the file is an error.
    #[serde(default)]
    pub ids: Option<Vec<String>>,
    /// Log and skip bad rows instead of failing.
    #[serde(default)]
    pub skip_bad_rows: bool,
}

impl DatasetSpec {
    /// A spec with every option at its default.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            format: None,
            id_field: None,
            question_field: None,
            answer_field: None,
            limit: None,
            ids: None,
            skip_bad_rows: false,
        }
    }

    /// The effective format: explicit, else from the extension.
    pub fn resolved_format(&self) -> Result<DatasetFormat, DatasetError> {
        self.format
            .or_else(|| DatasetFormat::from_path(&self.path))
            .ok_or_else(|| DatasetError::UnknownFormat {
                path: self.path.clone(),
            })
    }

    fn fields(&self, format: DatasetFormat) -> Fields {
        let (id, question, answer) = format.default_fields();
        Fields {
            id: self.id_field.clone().unwrap_or_else(|| id.to_owned()),
            question: self
                .question_field
                .clone()
                .unwrap_or_else(|| question.to_owned()),
            answer: self
                .answer_field
                .clone()
                .unwrap_or_else(|| answer.to_owned()),
        }
    }
}

/// Splits a command-line id list (`a,b, c`) into ids; empty items are dropped.
pub fn parse_id_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The loaded, selected problems.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub path: PathBuf,
    pub format: DatasetFormat,
    pub problems: Vec<Problem>,
    /// Rows left out because of `skip_bad_rows`, with what was wrong.
    pub skipped: Vec<RowError>,
}

/// What is wrong with one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub path: PathBuf,
    /// 1-based line where the row starts.
    pub line: u64,
    /// The offending field, when one field is to blame.
    pub field: Option<String>,
    pub reason: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.path.display(), self.line)?;
        if let Some(field) = &self.field {
            write!(f, "field {field:?}: ")?;
        }
        f.write_str(&self.reason)
    }
}

/// Why a dataset could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{}: cannot read dataset: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: unknown dataset format: use a .jsonl or .csv file, or set the format", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("{}:1: CSV header has no column {field:?} (columns: {columns})", path.display())]
    MissingColumn {
        path: PathBuf,
        field: String,
        columns: String,
    },
    /// Every bad row of the file (the first [`MAX_LISTED_BAD_ROWS`] of them listed), so
    /// one pass over the file finds them all.
    #[error("{}", bad_rows_message(path, listed, *total))]
    BadRows {
        path: PathBuf,
        listed: Vec<RowError>,
        total: usize,
    },
    #[error("{}: --ids lists problem ids not in the dataset: {}", path.display(), ids.join(", "))]
    UnknownIds { path: PathBuf, ids: Vec<String> },
    #[error("{}: no problems to run (the file has no valid rows, or the selection is empty)", path.display())]
    Empty { path: PathBuf },
}

/// How many bad rows one [`DatasetError::BadRows`] lists.
pub const MAX_LISTED_BAD_ROWS: usize = 20;

fn bad_rows_message(path: &Path, listed: &[RowError], total: usize) -> String {
    if let ([only], 1) = (listed, total) {
        return only.to_string();
    }
    let mut text = format!(
        "{}: {total} bad rows (fix them, or pass --skip-bad-rows to leave them out)",
        path.display()
    );
    for row in listed {
        text.push_str(&format!("\n  {row}"));
    }
    if total > listed.len() {
        text.push_str(&format!("\n  … and {} more", total - listed.len()));
    }
    text
}

/// Reads and parses the dataset named by `spec`.
pub fn load_dataset(spec: &DatasetSpec) -> Result<Dataset, DatasetError> {
    let format = spec.resolved_format()?;
    let bytes = std::fs::read(&spec.path).map_err(|source| DatasetError::Io {
        path: spec.path.clone(),
        source,
    })?;
    parse_dataset(spec, format, &bytes)
}

/// Parses dataset `bytes` (the content of `spec.path`) in `format` and applies the
/// selection. Error messages name `spec.path`.
pub fn parse_dataset(
    spec: &DatasetSpec,
    format: DatasetFormat,
    bytes: &[u8],
) -> Result<Dataset, DatasetError> {
    let fields = spec.fields(format);
    let mut rows = Rows::new(&spec.path, spec.skip_bad_rows);
    let parsed = match format {
        DatasetFormat::Jsonl => parse_jsonl(&mut rows, &fields, bytes),
        DatasetFormat::Csv => parse_csv(&mut rows, &fields, bytes),
    };
    match parsed {
        Ok(()) => {}
        // A row the reader cannot get past ends the file: an error even with
        // `skip_bad_rows` (the rows after it are unread), listed after those before it.
        Err(Fatal::Row(error)) => {
            rows.skip_bad_rows = false;
            rows.bad(error);
        }
        Err(Fatal::Dataset(e)) => return Err(e),
    }
    let Rows {
        problems,
        skipped,
        bad,
        bad_total,
        ..
    } = rows;
    if bad_total > 0 {
        return Err(DatasetError::BadRows {
            path: spec.path.clone(),
            listed: bad,
            total: bad_total,
        });
    }
    let problems = select(&spec.path, problems, spec.ids.as_deref(), spec.limit)?;
    if problems.is_empty() {
        return Err(DatasetError::Empty {
            path: spec.path.clone(),
        });
    }
    Ok(Dataset {
        path: spec.path.clone(),
        format,
        problems,
        skipped,
    })
}

struct Fields {
    id: String,
    question: String,
    answer: String,
}

/// Why parsing stopped before the end of the file.
enum Fatal {
    /// A row the reader cannot resynchronise after.
    Row(RowError),
    Dataset(DatasetError),
}

impl From<DatasetError> for Fatal {
    fn from(e: DatasetError) -> Self {
        Fatal::Dataset(e)
    }
}

/// Accumulates rows, rejecting duplicates and routing bad rows to the error list or the
/// skip list.
struct Rows<'a> {
    path: &'a Path,
    skip_bad_rows: bool,
    problems: Vec<Problem>,
    first_line_of_id: HashMap<String, u64>,
    skipped: Vec<RowError>,
    /// The first [`MAX_LISTED_BAD_ROWS`] bad rows (without `skip_bad_rows`).
    bad: Vec<RowError>,
    bad_total: usize,
}

impl<'a> Rows<'a> {
    fn new(path: &'a Path, skip_bad_rows: bool) -> Self {
        Self {
            path,
            skip_bad_rows,
            problems: Vec::new(),
            first_line_of_id: HashMap::new(),
            skipped: Vec::new(),
            bad: Vec::new(),
            bad_total: 0,
        }
    }

    fn row_error(&self, line: u64, field: Option<&str>, reason: impl Into<String>) -> RowError {
        RowError {
            path: self.path.to_path_buf(),
            line,
            field: field.map(str::to_owned),
            reason: reason.into(),
        }
    }

    /// Records a bad row: for the error listing every bad row, or (with `skip_bad_rows`) a
    /// warning and a skip entry.
    fn bad(&mut self, error: RowError) {
        if !self.skip_bad_rows {
            self.bad_total += 1;
            if self.bad.len() < MAX_LISTED_BAD_ROWS {
                self.bad.push(error);
            }
            return;
        }
        tracing::warn!(%error, "skipping bad dataset row");
        self.skipped.push(error);
    }

    /// Adds a parsed row, or reports it as bad.
    fn push(&mut self, line: u64, id_field: &str, row: Result<Problem, RowError>) {
        let problem = match row {
            Ok(problem) => problem,
            Err(error) => return self.bad(error),
        };
        if let Some(first) = self.first_line_of_id.get(&problem.id) {
            let reason = format!("duplicate id {:?} (first seen at line {first})", problem.id);
            let error = self.row_error(line, Some(id_field), reason);
            return self.bad(error);
        }
        self.first_line_of_id.insert(problem.id.clone(), line);
        self.problems.push(problem);
    }
}

fn parse_jsonl(rows: &mut Rows<'_>, fields: &Fields, bytes: &[u8]) -> Result<(), Fatal> {
    for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = index as u64 + 1;
        let row = match std::str::from_utf8(raw) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => jsonl_row(rows, fields, line, text),
            Err(e) => Err(rows.row_error(line, None, format!("not valid UTF-8: {e}"))),
        };
        rows.push(line, &fields.id, row);
    }
    Ok(())
}

fn jsonl_row(rows: &Rows<'_>, fields: &Fields, line: u64, text: &str) -> Result<Problem, RowError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| rows.row_error(line, None, format!("invalid JSON: {e}")))?;
    let serde_json::Value::Object(object) = value else {
        return Err(rows.row_error(line, None, "expected a JSON object"));
    };
    let get = |name: &str, numbers_ok: bool| -> Result<String, RowError> {
        let text = match object.get(name) {
            None => return Err(rows.row_error(line, Some(name), "missing")),
            Some(serde_json::Value::String(s)) => s.clone(),
            // Ids and short answers are often numbers in hand-written files.
            Some(serde_json::Value::Number(n)) if numbers_ok => n.to_string(),
            Some(other) => {
                let kind = json_kind(other);
                let expected = if numbers_ok {
                    "a string or number"
                } else {
                    "a string"
                };
                return Err(rows.row_error(
                    line,
                    Some(name),
                    format!("expected {expected}, found {kind}"),
                ));
            }
        };
        non_empty(rows, line, name, &text)
    };
    // Optional proof fields: absent or null is fine; present, they must be non-empty text.
    let optional = |name: &str| -> Result<Option<String>, RowError> {
        match object.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(_) => get(name, false).map(Some),
        }
    };
    Ok(Problem {
        id: get(&fields.id, true)?,
        question: get(&fields.question, false)?,
        answer: get(&fields.answer, true)?,
        reference_solution: optional(REFERENCE_SOLUTION_FIELD)?,
        grading_guidelines: optional(GRADING_GUIDELINES_FIELD)?,
    })
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn non_empty(rows: &Rows<'_>, line: u64, field: &str, text: &str) -> Result<String, RowError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(rows.row_error(line, Some(field), "empty"));
    }
    Ok(trimmed.to_owned())
}

fn parse_csv(rows: &mut Rows<'_>, fields: &Fields, bytes: &[u8]) -> Result<(), Fatal> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(bytes);
    let headers = reader.headers().map_err(|e| {
        Fatal::Row(rows.row_error(
            csv_line(&e).unwrap_or(1),
            None,
            format!("bad CSV header: {e}"),
        ))
    })?;
    // A UTF-8 byte-order mark (spreadsheet exports) must not hide the first column's name.
    let columns: Vec<String> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            if i == 0 {
                h.trim_start_matches('\u{feff}')
            } else {
                h
            }
            .trim()
            .to_owned()
        })
        .collect();
    let column = |field: &str| {
        columns
            .iter()
            .position(|c| c == field)
            .ok_or_else(|| DatasetError::MissingColumn {
                path: rows.path.to_path_buf(),
                field: field.to_owned(),
                columns: columns
                    .iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    };
    let (id_col, question_col, answer_col) = (
        column(&fields.id)?,
        column(&fields.question)?,
        column(&fields.answer)?,
    );
    let mut record = csv::StringRecord::new();
    loop {
        let line_hint = reader.position().line();
        let read = reader.read_record(&mut record);
        let line = record.position().map_or(line_hint, |p| p.line());
        let row = match read {
            Ok(false) => break,
            Ok(true) if record.iter().all(|f| f.trim().is_empty()) => continue,
            Ok(true) => csv_row(
                rows,
                &record,
                line,
                [
                    (&fields.id, id_col),
                    (&fields.question, question_col),
                    (&fields.answer, answer_col),
                ],
            ),
            Err(e) => {
                let line = csv_line(&e).unwrap_or(line_hint);
                let fatal = !matches!(e.kind(), csv::ErrorKind::Utf8 { .. });
                let error = rows.row_error(line, None, format!("bad CSV record: {e}"));
                if fatal {
                    // The reader cannot resynchronise after a syntax or IO error.
                    return Err(Fatal::Row(error));
                }
                Err(error)
            }
        };
        rows.push(line, &fields.id, row);
    }
    Ok(())
}

fn csv_row(
    rows: &Rows<'_>,
    record: &csv::StringRecord,
    line: u64,
    columns: [(&String, usize); 3],
) -> Result<Problem, RowError> {
    let get = |(name, index): (&String, usize)| match record.get(index) {
        Some(text) => non_empty(rows, line, name, text),
        None => Err(rows.row_error(line, Some(name), "missing (row has too few columns)")),
    };
    let [id, question, answer] = columns;
    Ok(Problem {
        id: get(id)?,
        question: get(question)?,
        answer: get(answer)?,
        reference_solution: None,
        grading_guidelines: None,
    })
}

fn csv_line(error: &csv::Error) -> Option<u64> {
    error.position().map(csv::Position::line)
}

/// Applies `--ids` (in file order) then `--limit`.
fn select(
    path: &Path,
    problems: Vec<Problem>,
    ids: Option<&[String]>,
    limit: Option<usize>,
) -> Result<Vec<Problem>, DatasetError> {
    let mut selected = match ids {
        None => problems,
        Some(ids) => {
            let unknown: Vec<String> = ids
                .iter()
                .filter(|id| !problems.iter().any(|p| &p.id == *id))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(DatasetError::UnknownIds {
                    path: path.to_path_buf(),
                    ids: unknown,
                });
            }
            problems
                .into_iter()
                .filter(|p| ids.contains(&p.id))
                .collect()
        }
    };
    if let Some(limit) = limit {
        selected.truncate(limit);
    }
    Ok(selected)
}
