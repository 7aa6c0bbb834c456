//! The run directory's bank files, `banks/<problem>/<bank>-itT.json` (the bank after
//! iteration T's update; a version with no iteration, such as a bank's initial content,
//! is `<bank>-vN.json`): a [`BankSink`] that writes one JSON document per version, and
//! the path-safe names the run directory also uses for `problems/<id>.json`.
//!
//! Runs written before the files were named by iteration have `<bank>-vN.json` for every
//! version (N = T + 1, one update per iteration); [`JsonFileSink::ensure`] renames such a
//! file to its iteration's name when a resume restores the bank files.
//!
//! The runtime only knows the [`BankSink`] trait; this file format is the run directory's.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tmas_actors::bank::{BankSink, BankSinkError};
use tmas_actors::strategy::{BankVersion, Rejection};

/// Writes `dir/<problem>/<bank>-v<N>.json`, atomically (temporary file, then rename), so
/// a crash mid-write never leaves a truncated version behind.
///
/// [`JsonFileSink::new`] syncs each file to disk before renaming it, for when the files
/// are the only copy. [`JsonFileSink::unsynced`] does not, for when another store holds
/// every version and can restore the files with [`JsonFileSink::ensure`] (the `tmas` run
/// store): a sync per version, two per problem and iteration, was a synchronous disk write
/// on every bank update, on the runtime's threads.
///
/// Characters other than ASCII letters, digits, `-`, `_` and `.` in problem and bank names
/// are replaced by `_` to keep paths safe, and such a name gets a short hash of the
/// original appended so that `a/b` and `a_b` stay apart.
#[derive(Debug, Clone)]
pub struct JsonFileSink {
    dir: PathBuf,
    sync: bool,
}

/// The JSON document of one version.
#[derive(Debug, Serialize)]
struct Record<'a> {
    problem: &'a str,
    bank: &'a str,
    version: u32,
    iteration: Option<u32>,
    items: &'a [String],
    rejected: &'a [Rejection],
}

impl JsonFileSink {
    /// A sink whose files survive a power cut on their own (each is synced before it
    /// replaces anything).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            sync: true,
        }
    }

    /// A sink whose files survive the process being killed but not necessarily a power
    /// cut: for a caller that stores every version elsewhere and restores the files from
    /// there with [`JsonFileSink::ensure`].
    pub fn unsynced(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            sync: false,
        }
    }

    /// Makes the file of `version` hold exactly what [`BankSink::persist`] writes,
    /// rewriting it when it is missing or differs. Returns whether it wrote.
    pub fn ensure(
        &self,
        problem: &str,
        iteration: Option<u32>,
        version: &BankVersion,
    ) -> Result<bool, BankSinkError> {
        let err = sink_error(problem, version);
        let bytes = encode(problem, iteration, version).map_err(&err)?;
        let path = self.path_of(problem, &version.bank, iteration, version.version);
        let same = file_holds(&path, &bytes)
            .map_err(|e| err(format!("reading {}: {e}", path.display())))?;
        if !same {
            write_atomically(&path, &bytes, self.sync).map_err(&err)?;
        }
        // The same version under the name an earlier build gave it: gone, so a version
        // is one file.
        let old = self.path_of(problem, &version.bank, None, version.version);
        if iteration.is_some() && old.is_file() {
            fs::remove_file(&old).map_err(|e| err(format!("removing {}: {e}", old.display())))?;
        }
        Ok(!same)
    }

    /// The file a version is written to: named by the iteration whose update made it, or
    /// by its version number when it has no iteration.
    pub fn path_of(
        &self,
        problem: &str,
        bank: &str,
        iteration: Option<u32>,
        version: u32,
    ) -> PathBuf {
        let name = match iteration {
            Some(t) => format!("{}-it{t}.json", safe_name(bank)),
            None => format!("{}-v{version}.json", safe_name(bank)),
        };
        self.dir.join(safe_name(problem)).join(name)
    }
}

/// Longest sanitized name kept whole in a file name; a longer one is cut to this many bytes
/// and followed by a 64-bit hash of the whole name. Names up to this length keep the file
/// names they always had (so earlier runs still resume); past it, a file name could exceed
/// the 255 bytes most file systems allow (`problems/<id>.json` of a 255-character id).
pub const MAX_NAME_BYTES: usize = 80;

/// `name` as one safe path component of at most [`MAX_NAME_BYTES`] + 17 bytes: characters
/// other than ASCII letters, digits, `-`, `_` and `.` become `_`, an all-dots or empty name
/// gets a `_` prefix, an altered name gets a short stable hash of the original so distinct
/// names stay distinct, and a name longer than [`MAX_NAME_BYTES`] is cut and gets a longer
/// hash. Also names the run directory's `problems/<id>.json` files.
pub fn safe_name(name: &str) -> String {
    let s = sanitized(name);
    if s.len() > MAX_NAME_BYTES {
        // `s` is ASCII, so any byte index is a character boundary.
        return format!("{}-{:016x}", &s[..MAX_NAME_BYTES], fnv1a(name));
    }
    if s == name {
        return s;
    }
    format!("{s}-{:08x}", fnv1a(name) >> 32)
}

/// The name [`safe_name`] gave before names were capped, when it differs from today's (a
/// name longer than [`MAX_NAME_BYTES`] once sanitized): where an earlier run may have
/// written the files of `name`.
pub fn uncapped_safe_name(name: &str) -> Option<String> {
    let s = sanitized(name);
    if s.len() <= MAX_NAME_BYTES {
        return None;
    }
    Some(if s == name {
        s
    } else {
        format!("{s}-{:08x}", fnv1a(name) >> 32)
    })
}

fn sanitized(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Never produce `.`/`..`/empty path components.
    if s.chars().all(|c| c == '.') {
        format!("_{s}")
    } else {
        s
    }
}

/// 64-bit FNV-1a: stable across builds and platforms (file names must not change).
fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether the file at `path` holds exactly `bytes`. A missing file, or one of another
/// length, does not (its contents are not read); an unreadable one is an error. Also
/// checks the run directory's `problems/<id>.json` files.
pub fn file_holds(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() == bytes.len() as u64 => Ok(fs::read(path)? == bytes),
        _ => Ok(false),
    }
}

/// The document [`JsonFileSink`] writes for one version (pretty JSON).
fn encode(problem: &str, iteration: Option<u32>, version: &BankVersion) -> Result<Vec<u8>, String> {
    let record = Record {
        problem,
        bank: &version.bank,
        version: version.version,
        iteration,
        items: &version.items,
        rejected: &version.rejected,
    };
    serde_json::to_vec_pretty(&record).map_err(|e| format!("encoding: {e}"))
}

fn sink_error<'a>(
    problem: &'a str,
    version: &'a BankVersion,
) -> impl Fn(String) -> BankSinkError + 'a {
    move |message| BankSinkError {
        problem: problem.to_owned(),
        bank: version.bank.to_string(),
        version: version.version,
        message,
    }
}

fn write_atomically(path: &Path, bytes: &[u8], sync: bool) -> Result<(), String> {
    let parent = path
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", path.display()))?;
    fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{file_name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync { f.sync_all() } else { Ok(()) }
    };
    write().map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    fs::rename(&tmp, path)
        .map_err(|e| format!("renaming {} to {}: {e}", tmp.display(), path.display()))
}

impl BankSink for JsonFileSink {
    fn persist(
        &self,
        problem: &str,
        iteration: Option<u32>,
        version: &BankVersion,
    ) -> Result<(), BankSinkError> {
        let err = sink_error(problem, version);
        let bytes = encode(problem, iteration, version).map_err(&err)?;
        let path = self.path_of(problem, &version.bank, iteration, version.version);
        write_atomically(&path, &bytes, self.sync).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(tag: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!("tmas-sink-{tag}-{}-{nanos}", std::process::id()))
    }

    fn version(n: u32, items: &[&str]) -> BankVersion {
        BankVersion {
            bank: "guide/line".into(),
            version: n,
            items: items.iter().map(|s| s.to_string()).collect(),
            rejected: vec![Rejection {
                item: "x".into(),
                reason: "dup".into(),
            }],
        }
    }

    #[test]
    fn names_are_made_path_safe() {
        assert!(safe_name("aime/2024 #3").starts_with("aime_2024__3-"));
        assert!(safe_name("..").starts_with("_..-"));
        assert_ne!(safe_name("a/b"), safe_name("a_b"));
        assert_eq!(safe_name("p-1_a.b"), "p-1_a.b");
    }

    #[test]
    fn long_names_are_capped_and_short_ones_keep_their_names() {
        // Names from before the cap, pinned: earlier runs' files must still be found.
        assert_eq!(safe_name("a/b"), "a_b-e620c319");
        let short = "x".repeat(MAX_NAME_BYTES);
        assert_eq!(safe_name(&short), short);
        assert_eq!(uncapped_safe_name(&short), None);
        for len in [81, 255, 300, 1000] {
            let id = "y".repeat(len);
            let name = safe_name(&id);
            assert_eq!(name.len(), MAX_NAME_BYTES + 17, "{len}: {name}");
            assert!(name.starts_with(&"y".repeat(MAX_NAME_BYTES)), "{name}");
            assert_eq!(uncapped_safe_name(&id), Some(id.clone()));
            // Same prefix, different tail: different names.
            let other = format!("{}z", &id[..len - 1]);
            assert_ne!(safe_name(&other), name);
        }
        // Unicode: each character counts once, as `_`; the hash keeps ids apart.
        let greek = "α".repeat(300);
        let name = safe_name(&greek);
        assert_eq!(name.len(), MAX_NAME_BYTES + 17, "{name}");
        assert!(name.is_ascii());
        assert_ne!(name, safe_name(&"β".repeat(300)));
        let mixed = "問題-1";
        assert!(
            safe_name(mixed).starts_with("__-1-"),
            "{}",
            safe_name(mixed)
        );
        // Many dots are cut like anything else and never become `.` or `..`.
        assert!(safe_name(&".".repeat(200)).starts_with("_."));
    }

    #[test]
    fn json_sink_writes_each_version_to_its_own_file() {
        let dir = scratch_dir("json");
        let sink = JsonFileSink::new(&dir);
        sink.persist("p/1", None, &version(0, &[])).unwrap();
        sink.persist("p/1", Some(0), &version(1, &["a", "b"]))
            .unwrap();
        let path = sink.path_of("p/1", "guide/line", Some(0), 1);
        assert_eq!(
            path,
            dir.join(safe_name("p/1"))
                .join(format!("{}-it0.json", safe_name("guide/line"))),
            "named by the iteration that made it, not one ahead"
        );
        assert!(path.starts_with(&dir) && path.is_file(), "{path:?}");
        let doc: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["iteration"], 0);
        assert_eq!(doc["items"], serde_json::json!(["a", "b"]));
        assert_eq!(doc["rejected"][0]["reason"], "dup");
        assert!(
            sink.path_of("p/1", "guide/line", None, 0).exists(),
            "the initial content has no iteration"
        );
        // No temporary file is left behind.
        let leftovers: Vec<_> = fs::read_dir(dir.join(safe_name("p/1")))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ensure_takes_over_a_version_an_earlier_build_named_by_number() {
        let dir = scratch_dir("old-name");
        let sink = JsonFileSink::unsynced(&dir);
        let v1 = version(1, &["a"]);
        let old = sink.path_of("p", "guide/line", None, 1);
        fs::create_dir_all(old.parent().unwrap()).unwrap();
        fs::write(&old, b"{}").unwrap();
        sink.ensure("p", Some(0), &v1).unwrap();
        assert!(!old.exists(), "the number-named file is replaced");
        assert!(sink.path_of("p", "guide/line", Some(0), 1).is_file());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ensure_restores_a_missing_or_damaged_version_and_leaves_a_good_one() {
        let dir = scratch_dir("ensure");
        let sink = JsonFileSink::unsynced(&dir);
        let v1 = version(1, &["a", "b"]);
        sink.persist("p", Some(0), &v1).unwrap();
        let path = sink.path_of("p", "guide/line", Some(0), 1);
        let written = fs::read(&path).unwrap();
        // The synced sink writes the same bytes: only durability differs.
        let synced_dir = scratch_dir("ensure-synced");
        let synced = JsonFileSink::new(&synced_dir);
        synced.persist("p", Some(0), &v1).unwrap();
        assert_eq!(
            fs::read(synced.path_of("p", "guide/line", Some(0), 1)).unwrap(),
            written
        );

        assert!(
            !sink.ensure("p", Some(0), &v1).unwrap(),
            "intact file left alone"
        );
        // What a power cut can leave of an unsynced file: empty, or the old length with
        // other bytes.
        fs::write(&path, b"").unwrap();
        assert!(sink.ensure("p", Some(0), &v1).unwrap());
        assert_eq!(fs::read(&path).unwrap(), written);
        let mut garbled = written.clone();
        garbled[3] ^= 0x20;
        fs::write(&path, &garbled).unwrap();
        assert!(sink.ensure("p", Some(0), &v1).unwrap());
        assert_eq!(fs::read(&path).unwrap(), written);
        fs::remove_file(&path).unwrap();
        assert!(sink.ensure("p", Some(0), &v1).unwrap());
        assert_eq!(fs::read(&path).unwrap(), written);
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&synced_dir).unwrap();
    }

    #[test]
    fn json_sink_error_names_the_path() {
        let dir = scratch_dir("blocked");
        fs::create_dir_all(&dir).unwrap();
        // A plain file where the problem directory should be.
        fs::write(dir.join("p"), b"not a dir").unwrap();
        let err = JsonFileSink::new(&dir)
            .persist("p", None, &version(0, &[]))
            .unwrap_err();
        assert!(
            err.message.contains(&dir.join("p").display().to_string()),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("bank `guide/line` v0 of problem `p`"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
