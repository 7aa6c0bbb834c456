//! The run directory: what `tmas run` writes and `tmas report` reads.
//!
//! ```text
//! RUN_DIR/
//!   config.toml            the resolved config (API keys appear only as variable names)
//!   run.json               status, dataset, counts, token usage per role, timings
//!   problems/<id>.json     one problem: every candidate, verification, summary, judge verdict
//!   results.jsonl          the same records, one line per finished problem
//!   banks/<id>/<bank>-vN.json   every bank version
//!   pass_at_1.json|.csv    the per-iteration Pass@1 table
//!   pass_at_1.png|.svg     the chart (`tmas report`)
//! ```
//! Every file is written atomically (temporary file, then rename) so a crash never leaves
//! a truncated record.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::eval::judge::JudgeRecord;
use crate::eval::pass_at_1::PassAt1Table;
use crate::method::TmasOutcome;

/// Everything stored about one problem.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProblemRecord {
    pub problem_id: String,
    pub question: String,
    pub reference_answer: String,
    pub outcome: TmasOutcome,
    /// `judgments[iteration][candidate]`; `None` for a candidate whose solution call failed.
    pub judgments: Vec<Vec<Option<JudgeRecord>>>,
}

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummaryFile {
    pub status: String,
    pub config_file: String,
    pub dataset: String,
    pub problems_total: usize,
    pub problems_done: usize,
    pub problems_failed: Vec<FailedProblem>,
    pub iterations: u32,
    pub wall_seconds: f64,
    pub usage_by_role: BTreeMap<String, RoleUsage>,
    pub final_pass_at_1: Option<f64>,
}

/// Calls and tokens of one role over a run (from the run store's `calls` table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleUsage {
    pub calls: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A problem that ended without a result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedProblem {
    pub problem_id: String,
    pub error: String,
}

/// Paths inside a run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

impl RunDir {
    /// Creates the directory tree; fails with the path if it cannot.
    pub fn create(root: &Path) -> anyhow::Result<Self> {
        for dir in [
            root.to_path_buf(),
            root.join("problems"),
            root.join("banks"),
        ] {
            fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create run directory {}", dir.display()))?;
        }
        let probe = root.join(".write-test");
        fs::write(&probe, b"ok")
            .with_context(|| format!("run directory {} is not writable", root.display()))?;
        let _ = fs::remove_file(probe);
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// Opens an existing run directory for reading.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        anyhow::ensure!(
            root.join("run.json").is_file() || root.join("problems").is_dir(),
            "{} is not a tmas run directory (no run.json or problems/)",
            root.display()
        );
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    pub fn banks_dir(&self) -> PathBuf {
        self.root.join("banks")
    }

    pub fn problem_path(&self, id: &str) -> PathBuf {
        self.root
            .join("problems")
            .join(format!("{}.json", safe_file_name(id)))
    }

    pub fn write_config(&self, toml_text: &str) -> anyhow::Result<()> {
        write_atomic(&self.root.join("config.toml"), toml_text.as_bytes())
    }

    /// Writes `problems/<id>.json` and appends the record to `results.jsonl`.
    pub fn write_problem(&self, record: &ProblemRecord) -> anyhow::Result<()> {
        let pretty = serde_json::to_vec_pretty(record)?;
        write_atomic(&self.problem_path(&record.problem_id), &pretty)?;
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let path = self.root.join("results.jsonl");
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.write_all(&line)
            .with_context(|| format!("cannot append to {}", path.display()))?;
        Ok(())
    }

    /// Rewrites `results.jsonl` (one line per record, in the order given) and every
    /// record's `problems/<id>.json`: after a resume they hold each problem exactly once.
    pub fn rewrite_results(&self, records: &[ProblemRecord]) -> anyhow::Result<()> {
        for record in records {
            write_atomic(
                &self.problem_path(&record.problem_id),
                &serde_json::to_vec_pretty(record)?,
            )?;
        }
        // Streamed to the temporary file: with 40 KB solutions the whole file is ~1 MB
        // per problem, and building it in memory was the run's peak RSS (issue 6,
        // docs/benchmarks.md).
        let path = self.root.join("results.jsonl");
        let tmp = path.with_extension("tmp");
        let file =
            fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut out = std::io::BufWriter::new(file);
        for record in records {
            serde_json::to_writer(&mut out, record)
                .and_then(|()| out.write_all(b"\n").map_err(serde_json::Error::io))
                .with_context(|| format!("cannot write {}", tmp.display()))?;
        }
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        file.sync_data()
            .with_context(|| format!("cannot sync {}", tmp.display()))?;
        fs::rename(&tmp, &path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
    }

    /// Reads every `problems/*.json`, sorted by file name.
    pub fn read_problems(&self) -> anyhow::Result<Vec<ProblemRecord>> {
        let dir = self.root.join("problems");
        let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let bytes = fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid problem record", p.display()))
            })
            .collect()
    }

    pub fn write_summary(&self, summary: &RunSummaryFile) -> anyhow::Result<()> {
        write_atomic(
            &self.root.join("run.json"),
            &serde_json::to_vec_pretty(summary)?,
        )
    }

    pub fn read_summary(&self) -> anyhow::Result<RunSummaryFile> {
        let path = self.root.join("run.json");
        let bytes = fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not valid", path.display()))
    }

    /// Writes `pass_at_1.json` and `pass_at_1.csv`.
    pub fn write_pass_at_1(&self, table: &PassAt1Table) -> anyhow::Result<()> {
        write_atomic(
            &self.root.join("pass_at_1.json"),
            &serde_json::to_vec_pretty(table)?,
        )?;
        let csv = pass_at_1_csv(table);
        write_atomic(&self.root.join("pass_at_1.csv"), csv.as_bytes())
    }
}

/// The per-iteration Pass@1 table as CSV (`pass_at_1.csv`, `tmas export --format csv`).
pub fn pass_at_1_csv(table: &PassAt1Table) -> String {
    let mut csv = String::from(
        "iteration,pass_at_1,problems,candidates,empty_problems,undecided,disagreements\n",
    );
    for row in &table.rows {
        csv.push_str(&format!(
            "{},{:.6},{},{},{},{},{}\n",
            row.iteration,
            row.pass_at_1,
            row.problems,
            row.candidates,
            row.empty_problems,
            row.undecided,
            row.disagreements
        ));
    }
    csv
}

/// Keeps ASCII letters, digits, `-`, `_` and `.`; anything else becomes `_` (the same
/// mapping the bank sink uses).
pub fn safe_file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes `bytes` to `path` via a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file =
        fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    file.sync_data()
        .with_context(|| format!("cannot sync {}", tmp.display()))?;
    fs::rename(&tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

/// A fresh run directory name under `parent`: `run-YYYYMMDD-HHMMSS` (UTC), with a suffix
/// when that exists already.
pub fn new_run_dir_path(parent: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let base = format!("run-{}", utc_stamp(secs));
    let mut candidate = parent.join(&base);
    let mut n = 2;
    while candidate.exists() {
        candidate = parent.join(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// `YYYYMMDD-HHMMSS` for a Unix time (UTC), by the civil-from-days algorithm.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamp_matches_known_dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_798_502_400 + 3_661), "20261229-010101");
    }

    #[test]
    fn unsafe_ids_become_safe_file_names() {
        assert_eq!(
            safe_file_name("imo-bench-algebra-001"),
            "imo-bench-algebra-001"
        );
        assert_eq!(safe_file_name("a/b c"), "a_b_c");
    }
}
