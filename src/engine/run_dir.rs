//! The run directory: what `tmas run` writes and `tmas report` reads.
//!
//! ```text
//! RUN_DIR/
//!   config.toml            the resolved config (API keys appear only as variable names)
//!   run.json               status, dataset, counts, token usage per role, timings
//!   problems/<id>.json     one problem: every candidate, verification, summary, judge verdict
//!                          (compact JSON: the bytes the run store holds as `record_json`)
//!   results.jsonl          the same records, one line per finished problem, dataset order
//!   banks/<id>/<bank>-vN.json   every bank version
//!   pass_at_1.json|.csv    the per-iteration Pass@1 table
//!   pass_at_1.png|.svg     the chart (`tmas report`)
//! ```
//! Every file is written atomically (temporary file, then rename) so a killed process
//! never leaves a truncated record. Files the run store holds too (`problems/`, `banks/`,
//! `results.jsonl`) are not synced: after a power cut, resuming the run restores them from
//! the store. The others are synced before they replace anything.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tmas_actors::strategy::BankVersion;

use super::accounting::Accounting;
use crate::eval::pass_at_1::{PassAt1Table, UnfinishedProblem, pass_at_1_csv};
pub use crate::record::{FailedProblem, ProblemRecord, RoleUsage};
use crate::store::bank_files::{JsonFileSink, file_holds, safe_name, uncapped_safe_name};

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummaryFile {
    pub status: String,
    pub config_file: String,
    pub dataset: String,
    pub problems_total: usize,
    pub problems_done: usize,
    /// Problems done to T or failed: those every row of `pass_at_1.json` covers. Fewer
    /// than `problems_total` while the run is unfinished (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problems_finished: Option<usize>,
    /// The problems not finished, each with how many of its iterations are judged: the
    /// rows of `pass_at_1.json` count an unfinished problem in those iterations only
    /// (absent when every problem finished).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<UnfinishedProblem>,
    pub problems_failed: Vec<FailedProblem>,
    pub iterations: u32,
    pub wall_seconds: f64,
    pub usage_by_role: BTreeMap<String, RoleUsage>,
    /// Pass@1 of the last iteration over every problem; null until every problem has
    /// finished (`problems_finished` = `problems_total`).
    pub final_pass_at_1: Option<f64>,
    /// Lost calls (by role, endpoint, kind and iteration) and each problem's state.
    #[serde(default)]
    pub accounting: Accounting,
    /// Why the run stopped before its end on its own (permanent errors from an endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// For a run made by `tmas merge`: the shard runs it joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeSummary>,
}

/// The shards of a merged run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeSummary {
    /// The shard run directories, as given to `tmas merge`.
    pub shards: Vec<String>,
    /// Shards of N that were not given (`--partial`): their problems are in no table.
    pub missing: Vec<String>,
}

/// Paths inside a run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
    /// Serializes appends to `results.jsonl` among clones, so the file's length before an
    /// append is that line's offset ([`RunDir::write_problem`]).
    append: Arc<Mutex<()>>,
}

/// The plan file that marks an experiment directory.
pub const EXPERIMENT_PLAN_FILE: &str = "experiment.json";

/// Why `root` cannot be opened as a run, with what it is instead and what to do.
fn not_a_run(root: &Path) -> String {
    let shown = root.display();
    if !root.exists() {
        return format!("{shown} does not exist (expected a run directory made by `tmas run`)");
    }
    if !root.is_dir() {
        return format!("{shown} is a file, not a run directory made by `tmas run`");
    }
    if root.join(EXPERIMENT_PLAN_FILE).is_file() {
        return format!(
            "{shown} is an experiment directory, not a run: `tmas experiment report {shown}` reports it, and each variant's run is in {shown}/<variant>/"
        );
    }
    format!("{shown} is not a tmas run directory (no run.json or problems/)")
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
            append: Arc::default(),
        })
    }

    /// Opens an existing run directory for reading.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        if !(root.join("run.json").is_file() || root.join("problems").is_dir()) {
            return Err(crate::config::BadInput(not_a_run(root)).into());
        }
        Ok(Self {
            root: root.to_path_buf(),
            append: Arc::default(),
        })
    }

    pub fn banks_dir(&self) -> PathBuf {
        self.root.join("banks")
    }

    pub fn problem_path(&self, id: &str) -> PathBuf {
        self.root
            .join("problems")
            .join(format!("{}.json", safe_name(id)))
    }

    /// Moves the files of `ids` that an earlier `tmas` wrote under uncapped names (ids
    /// longer than [`crate::store::bank_files::MAX_NAME_BYTES`] once sanitized) to today's names,
    /// so a resumed run neither loses them nor leaves a second copy for `tmas report` to
    /// read. A file that cannot be moved is left where it is, with a warning: resuming
    /// rewrites it from the store. Returns how many it moved.
    pub fn adopt_uncapped_names<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> usize {
        let mut moved = 0;
        for id in ids {
            let Some(old) = uncapped_safe_name(id) else {
                continue;
            };
            let new = safe_name(id);
            let pairs = [
                (
                    self.root.join("problems").join(format!("{old}.json")),
                    self.problem_path(id),
                ),
                (self.banks_dir().join(&old), self.banks_dir().join(&new)),
            ];
            for (from, to) in pairs {
                // `exists` is false for a name the file system never accepted.
                if !from.exists() || to.exists() {
                    continue;
                }
                match fs::rename(&from, &to) {
                    Ok(()) => moved += 1,
                    Err(e) => tracing::warn!(
                        "cannot rename {} to {}: {e}; the file is rewritten from the store",
                        from.display(),
                        to.display()
                    ),
                }
            }
        }
        moved
    }

    pub fn write_config(&self, toml_text: &str) -> anyhow::Result<()> {
        write_atomic(&self.root.join("config.toml"), toml_text.as_bytes())
    }

    /// How the run counts candidates whose solution call failed, from its `config.toml`
    /// (the default without the file or the key).
    pub fn failed_candidates(&self) -> anyhow::Result<crate::config::FailedCandidates> {
        let path = self.root.join("config.toml");
        match fs::read_to_string(&path) {
            Ok(text) => crate::config::FailedCandidates::of_config_toml(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
            Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        }
    }

    /// Writes `problems/<id>.json` and appends the same bytes as one line to
    /// `results.jsonl`; `json` is the record's compact JSON, encoded once by the caller and
    /// shared with the run store. Returns where the line lies in `results.jsonl`, so the
    /// end of the run can copy it instead of reading the record back and encoding it again.
    ///
    /// Only this process appends to `results.jsonl` while a run goes on, and its appends
    /// are serialized by a lock, so the file's length before an append is the line's
    /// offset.
    ///
    /// `problems/<id>.json` is replaced atomically but not synced: the run store holds the
    /// same bytes, and [`RunDir::ensure_problem_file`] restores the file on resume, so a
    /// sync would cost a synchronous write of ~2 MB per problem at T = 5 on the runtime's
    /// threads and protect nothing the store does not.
    ///
    /// On failure no `problems/<id>.json` of this record is left behind.
    pub fn write_problem(&self, problem_id: &str, json: &str) -> anyhow::Result<LineRange> {
        let path = self.problem_path(problem_id);
        write_atomic_unsynced(&path, json.as_bytes())?;
        self.append_result(json).inspect_err(|_| {
            let _ = fs::remove_file(&path);
        })
    }

    fn append_result(&self, json: &str) -> anyhow::Result<LineRange> {
        let _appending = self.append.lock().unwrap_or_else(|p| p.into_inner());
        let path = self.results_path();
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let offset = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?
            .len();
        file.write_all(json.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .with_context(|| format!("cannot append to {}", path.display()))?;
        Ok(LineRange {
            offset,
            len: json.len() as u64 + 1,
        })
    }

    /// Makes `problems/<id>.json` hold exactly `json` (a record stored by an earlier
    /// process): leaves a file that already does alone, (re)writes a missing or different
    /// one. Returns whether it wrote.
    pub fn ensure_problem_file(&self, problem_id: &str, json: &str) -> anyhow::Result<bool> {
        let path = self.problem_path(problem_id);
        let same = file_holds(&path, json.as_bytes())
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !same {
            write_atomic_unsynced(&path, json.as_bytes())?;
        }
        Ok(!same)
    }

    /// Makes the `banks/` files of `problem` hold exactly the stored versions (a problem
    /// finished by an earlier process, whose files were not synced). Returns how many it
    /// wrote.
    pub fn ensure_bank_files(
        &self,
        problem_id: &str,
        versions: &[(Option<u32>, BankVersion)],
    ) -> anyhow::Result<usize> {
        let sink = JsonFileSink::unsynced(self.banks_dir());
        let mut written = 0;
        for (iteration, version) in versions {
            if sink.ensure(problem_id, *iteration, version)? {
                written += 1;
            }
        }
        Ok(written)
    }

    pub fn results_path(&self) -> PathBuf {
        self.root.join("results.jsonl")
    }

    /// Starts the final `results.jsonl` (a temporary file renamed over it by
    /// [`ResultsRewrite::finish`]); lines this process appended are copied from the
    /// current file.
    pub fn begin_results_rewrite(&self) -> anyhow::Result<ResultsRewrite> {
        let path = self.results_path();
        let appended = match fs::File::open(&path) {
            Ok(file) => {
                let len = file
                    .metadata()
                    .with_context(|| format!("cannot stat {}", path.display()))?
                    .len();
                Some((file, len))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot open {}", path.display()));
            }
        };
        let tmp = path.with_extension("tmp");
        let out =
            fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        Ok(ResultsRewrite {
            path,
            tmp,
            out,
            appended,
            copied_bytes: 0,
            encoded_bytes: 0,
        })
    }

    /// Reads every `problems/*.json` file, sorted by file name.
    pub fn read_problems(&self) -> anyhow::Result<Vec<ProblemRecord>> {
        let dir = self.root.join("problems");
        let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
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

/// Where one line lies in `results.jsonl`: `len` counts the trailing newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub offset: u64,
    pub len: u64,
}

/// The final `results.jsonl` being assembled: each done problem once, in the order the
/// caller pushes them (dataset order).
pub struct ResultsRewrite {
    path: PathBuf,
    tmp: PathBuf,
    out: fs::File,
    /// `results.jsonl` as it stood when the rewrite began, and its length.
    appended: Option<(fs::File, u64)>,
    copied_bytes: u64,
    encoded_bytes: u64,
}

impl ResultsRewrite {
    /// Copies a line this process appended to `results.jsonl`. Returns false, writing
    /// nothing, when the file does not hold it (it was truncated or replaced behind our
    /// back): the caller then writes the stored record instead.
    pub fn copy_appended(&mut self, range: LineRange) -> anyhow::Result<bool> {
        use std::io::{Read, Seek, SeekFrom};
        let Some((file, len)) = self.appended.as_mut() else {
            return Ok(false);
        };
        let end = range.offset.checked_add(range.len);
        if range.len == 0 || end.is_none_or(|end| end > *len) {
            return Ok(false);
        }
        let mut last = [0u8];
        file.seek(SeekFrom::Start(range.offset + range.len - 1))
            .and_then(|_| file.read_exact(&mut last))
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        if last[0] != b'\n' {
            return Ok(false);
        }
        file.seek(SeekFrom::Start(range.offset))
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        // File to file: on Linux `io::copy` lets the kernel copy (copy_file_range), so the
        // bytes never pass through this process.
        let copied = std::io::copy(&mut Read::by_ref(file).take(range.len), &mut self.out)
            .with_context(|| {
                format!(
                    "cannot copy a line of {} to {}",
                    self.path.display(),
                    self.tmp.display()
                )
            })?;
        anyhow::ensure!(
            copied == range.len,
            "{} ended while copying the line at byte {}",
            self.path.display(),
            range.offset
        );
        self.copied_bytes += copied;
        Ok(true)
    }

    /// Writes one record's compact JSON as a line.
    pub fn push_json(&mut self, json: &str) -> anyhow::Result<()> {
        self.out
            .write_all(json.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"))
            .with_context(|| format!("cannot write {}", self.tmp.display()))?;
        self.encoded_bytes += json.len() as u64 + 1;
        Ok(())
    }

    /// Renames the finished file over `results.jsonl`.
    ///
    /// Not fsynced (unlike [`write_atomic`]): syncing was ~36 ms for the 67 MB file of
    /// P = 60, T = 3 and grows with the file (~0.2 s at P = 200, T = 5, 370 MB), all of it
    /// after the last call. The file is derived: every run and resume rebuilds it from the
    /// run store, whose own commits survive a killed process but not a power cut
    /// (`synchronous=NORMAL`). The rename still keeps a killed process from leaving a
    /// partial file, and on ext4 (default `auto_da_alloc`) replacing a file by rename
    /// flushes its data before the rename is committed.
    pub fn finish(self) -> anyhow::Result<()> {
        drop(self.appended);
        fs::rename(&self.tmp, &self.path).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.tmp.display(),
                self.path.display()
            )
        })?;
        tracing::debug!(
            copied_bytes = self.copied_bytes,
            encoded_bytes = self.encoded_bytes,
            "results.jsonl rewritten"
        );
        Ok(())
    }
}

/// Writes `bytes` to `path` via a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |out| Ok(out.write_all(bytes)?))
}

/// [`write_atomic`] for output produced piece by piece: `write` fills a buffered
/// temporary file, which replaces `path` only once `write` succeeded and the data is
/// synced. On failure the temporary file is removed and `path` is left as it was.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    replace_file(path, true, write)
}

/// [`write_atomic`] without the sync: a killed process leaves the old file or the new one,
/// a power cut may leave an empty or partial file. Only for files the run store can
/// restore.
fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    replace_file(path, false, |out| Ok(out.write_all(bytes)?))
}

fn replace_file(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let file =
        fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let written = write(&mut out)
        .and_then(|()| out.flush().map_err(anyhow::Error::from))
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|()| {
            if !sync {
                return Ok(());
            }
            out.get_ref()
                .sync_data()
                .with_context(|| format!("cannot sync {}", tmp.display()))
        });
    drop(out);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

/// Why `dir` cannot be given as the `--out` of a new `what` (a run, an experiment): it
/// exists and holds other files (the first few are named), which the new files would be
/// mixed with. A lock file left by a process that ended does not count. `None` when it
/// does not exist, is empty, holds a run (the start-up check says to resume it) or cannot
/// be listed (the writability check then says why).
pub fn not_empty(dir: &Path, what: &str) -> Option<String> {
    if dir.join(crate::store::DB_FILE).exists() {
        return None;
    }
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != crate::store::LOCK_FILE)
        .collect();
    if names.is_empty() {
        return None;
    }
    names.sort();
    const NAMED: usize = 3;
    let more = if names.len() > NAMED { ", …" } else { "" };
    names.truncate(NAMED);
    Some(format!(
        "{} is not empty ({}{more}) and holds no tmas {what}; choose a new or empty directory",
        dir.display(),
        names.join(", ")
    ))
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

/// `YYYYMMDD-HHMMSS` for a Unix time (UTC).
fn utc_stamp(secs: u64) -> String {
    let [y, m, d, h, min, sec] = utc_civil(secs);
    format!("{y:04}{m:02}{d:02}-{h:02}{min:02}{sec:02}")
}

/// `YYYY-MM-DD HH:MM:SS UTC` for a Unix time, as a page shows when something happened.
pub fn utc_time(secs: u64) -> String {
    let [y, m, d, h, min, sec] = utc_civil(secs);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{sec:02} UTC")
}

/// Year, month, day, hour, minute and second of a Unix time (UTC), by the
/// civil-from-days algorithm.
fn utc_civil(secs: u64) -> [i64; 6] {
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
    let rem = rem as i64;
    [y, m, d, rem / 3600, rem % 3600 / 60, rem % 60]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_what_is_not_a_run_says_what_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let message = |path: &Path| format!("{:#}", RunDir::open(path).unwrap_err());
        assert!(message(&tmp.path().join("nope")).contains("does not exist"));
        let experiment = tmp.path().join("sweep");
        fs::create_dir(&experiment).unwrap();
        fs::write(experiment.join(EXPERIMENT_PLAN_FILE), "{}").unwrap();
        let text = message(&experiment);
        assert!(
            text.contains("is an experiment directory") && text.contains("tmas experiment report"),
            "{text}"
        );
        let file = tmp.path().join("run.txt");
        fs::write(&file, "x").unwrap();
        assert!(message(&file).contains("is a file"));
        assert!(message(tmp.path()).contains("is not a tmas run directory"));
    }

    #[test]
    fn an_atomic_write_that_fails_midway_leaves_the_old_file_and_no_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("export.jsonl");
        fs::write(&path, "old\n").unwrap();
        let err = write_atomic_with(&path, |out| {
            out.write_all(b"half of a line")?;
            anyhow::bail!("the store went away")
        })
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("the store went away"),
            "{err:#}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert!(!path.with_extension("tmp").exists());
        // Written piece by piece, it replaces the file whole.
        write_atomic_with(&path, |out| {
            for line in ["a\n", "b\n"] {
                out.write_all(line.as_bytes())?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\n");
    }

    #[test]
    fn utc_stamp_matches_known_dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_798_502_400 + 3_661), "20261229-010101");
        assert_eq!(utc_time(1_798_502_400 + 3_661), "2026-12-29 01:01:01 UTC");
    }

    #[test]
    fn appended_lines_report_their_ranges_and_a_matching_problem_file_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(&tmp.path().join("run")).unwrap();
        let a = dir.write_problem("a", r#"{"problem_id":"a"}"#).unwrap();
        let b = dir
            .write_problem("b/1", r#"{"problem_id":"b/1","x":[1,2]}"#)
            .unwrap();
        assert_eq!(a, LineRange { offset: 0, len: 19 });
        assert_eq!(b.offset, 19);
        let text = fs::read(dir.results_path()).unwrap();
        let line = &text[b.offset as usize..(b.offset + b.len) as usize];
        assert_eq!(line, b"{\"problem_id\":\"b/1\",\"x\":[1,2]}\n");
        assert_eq!(
            fs::read_to_string(dir.problem_path("b/1")).unwrap(),
            r#"{"problem_id":"b/1","x":[1,2]}"#
        );

        assert!(
            !dir.ensure_problem_file("a", r#"{"problem_id":"a"}"#)
                .unwrap()
        );
        assert!(
            dir.ensure_problem_file("a", r#"{"problem_id":"A"}"#)
                .unwrap()
        );
        assert_eq!(
            fs::read_to_string(dir.problem_path("a")).unwrap(),
            r#"{"problem_id":"A"}"#
        );
        assert!(dir.ensure_problem_file("c", "{}").unwrap());
        assert_eq!(fs::read_to_string(dir.problem_path("c")).unwrap(), "{}");
    }

    #[test]
    fn long_and_unicode_ids_get_files_and_a_failed_write_leaves_no_record_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(&tmp.path().join("run")).unwrap();
        let ids = [
            "a".repeat(255),
            "b/".repeat(150),
            "c".repeat(1000),
            "整数論の問題".repeat(50),
        ];
        for id in &ids {
            let json = serde_json::json!({ "problem_id": id }).to_string();
            dir.write_problem(id, &json).unwrap();
            assert!(dir.ensure_problem_file(id, &json).is_ok_and(|wrote| !wrote));
            let name = dir.problem_path(id);
            assert!(name.file_name().unwrap().len() <= 80 + 17 + 5, "{name:?}");
        }
        let files = fs::read_dir(dir.root.join("problems")).unwrap().count();
        assert_eq!(files, ids.len(), "one file per id");

        // `results.jsonl` cannot be opened: the record file written first is removed again.
        let results = dir.results_path();
        fs::remove_file(&results).unwrap();
        fs::create_dir(&results).unwrap();
        assert!(dir.write_problem("d", "{}").is_err());
        assert!(!dir.problem_path("d").exists());
    }

    #[test]
    fn files_written_under_uncapped_names_are_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(&tmp.path().join("run")).unwrap();
        let long = "q".repeat(120);
        let old = uncapped_safe_name(&long).unwrap();
        fs::write(dir.root.join("problems").join(format!("{old}.json")), "{}").unwrap();
        fs::create_dir_all(dir.banks_dir().join(&old)).unwrap();
        fs::write(dir.banks_dir().join(&old).join("experience-v0.json"), "{}").unwrap();
        let ids = [long.as_str(), "short"];
        assert_eq!(dir.adopt_uncapped_names(ids), 2);
        assert_eq!(fs::read_to_string(dir.problem_path(&long)).unwrap(), "{}");
        let banks = dir.banks_dir().join(safe_name(&long));
        assert!(banks.join("experience-v0.json").is_file());
        assert!(!dir.banks_dir().join(&old).exists());
        assert_eq!(dir.adopt_uncapped_names(ids), 0, "nothing left to move");
    }

    #[test]
    fn unsafe_ids_become_safe_file_names() {
        assert_eq!(safe_name("imo-bench-algebra-001"), "imo-bench-algebra-001");
        let altered = safe_name("a/b c");
        assert!(altered.starts_with("a_b_c-"), "{altered}");
        assert!(
            altered
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        );
        // Ids that differ only in replaced characters still get their own files.
        assert_ne!(safe_name("a/b"), safe_name("a_b"));
        assert_ne!(safe_name("a/b"), safe_name("a b"));
        assert_eq!(safe_name("a/b"), safe_name("a/b"));
        assert!(!safe_name("").is_empty());
    }
}
