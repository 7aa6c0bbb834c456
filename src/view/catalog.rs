//! The runs `tmas view` shows, found once at start in the directories it was given: a
//! run directory (it holds `run.sqlite`), an experiment directory (its plan names the
//! variants' run directories) or a folder of either. Each run gets a name made of safe
//! characters only; a page names a run by that name, and nothing a request carries is
//! ever turned into a path: a name that is not in the catalog is simply not found.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::engine::experiment::{ExperimentPlan, PLAN_FILE};
use crate::store::DB_FILE;

/// One run the viewer can show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    /// The run's name in links: ASCII letters, digits, `-`, `_`, `.` and `~` only, unique.
    pub name: String,
    /// What the pages call it: the directory's name, or `EXPERIMENT / VARIANT`.
    pub label: String,
    /// The experiment (or parent folder) it was found in, if any.
    pub group: Option<String>,
    pub root: PathBuf,
}

impl RunEntry {
    pub fn db(&self) -> PathBuf {
        self.root.join(DB_FILE)
    }
}

/// Finds the runs in `dirs`, in the order given (a folder's entries sorted by name).
pub fn discover(dirs: &[PathBuf]) -> anyhow::Result<Vec<RunEntry>> {
    let mut found: Vec<(String, Option<String>, PathBuf)> = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(crate::config::BadInput(format!(
                "{}: not a directory (give run directories, experiment directories or a \
                 folder holding them)",
                dir.display()
            ))
            .into());
        }
        let before = found.len();
        collect(dir, &short_label(dir), None, 0, &mut found)?;
        if found.len() == before {
            return Err(crate::config::BadInput(format!(
                "{}: no run in it (a run directory holds {DB_FILE}; an experiment directory \
                 holds {PLAN_FILE}), nor in its subfolders",
                dir.display()
            ))
            .into());
        }
    }
    let mut used = BTreeSet::new();
    Ok(found
        .into_iter()
        .map(|(label, group, root)| {
            let name = unique_name(&label, &mut used);
            RunEntry {
                name,
                label,
                group,
                root,
            }
        })
        .collect())
}

/// A directory's own name (`runs/demo` → `demo`; `.` → the working directory's name).
fn short_label(dir: &Path) -> String {
    if let Some(name) = dir.file_name() {
        return name.to_string_lossy().into_owned();
    }
    dir.canonicalize()
        .ok()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}

/// How deep below a given folder runs are looked for (a folder of experiments of runs).
const MAX_DEPTH: usize = 2;

fn collect(
    dir: &Path,
    label: &str,
    group: Option<&str>,
    depth: usize,
    out: &mut Vec<(String, Option<String>, PathBuf)>,
) -> anyhow::Result<()> {
    if dir.join(DB_FILE).is_file() {
        out.push((
            label.to_string(),
            group.map(String::from),
            dir.to_path_buf(),
        ));
        return Ok(());
    }
    if dir.join(PLAN_FILE).is_file() {
        let plan = ExperimentPlan::read(dir)?;
        for variant in &plan.variants {
            // The plan's directory names are the experiment's own; one that would leave
            // the experiment directory is not followed.
            let rel = Path::new(&variant.dir);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                continue;
            }
            out.push((
                format!("{label} / {}", variant.name),
                Some(label.to_string()),
                dir.join(rel),
            ));
        }
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for sub in entries {
        let Some(name) = sub.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        collect(&sub, &name, Some(label), depth + 1, out)?;
    }
    Ok(())
}

/// A link-safe name for `label`, unique among `used`.
fn unique_name(label: &str, used: &mut BTreeSet<String>) -> String {
    // A run: its directory's name; an experiment's variant: `EXPERIMENT~VARIANT`.
    let last = |path: &str| {
        path.rsplit(['/', '\\'])
            .find(|part| !part.trim().is_empty() && *part != "." && *part != "..")
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let base: String = match label.split_once(" / ") {
        Some((experiment, variant)) => format!("{}~{}", last(experiment), variant.trim()),
        None => last(label),
    }
    .chars()
    .map(|c| {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~') {
            c
        } else {
            '_'
        }
    })
    .collect();
    // A name of dots alone would read as a relative path segment in a link.
    let base = if base.is_empty() || base.chars().all(|c| c == '.') {
        "run".to_string()
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while !used.insert(name.clone()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_link_safe_and_unique() {
        let mut used = BTreeSet::new();
        let a = unique_name("runs/demo", &mut used);
        let b = unique_name("other/runs/demo", &mut used);
        let c = unique_name("x/runs/demo", &mut used);
        let d = unique_name("../..", &mut used);
        let e = unique_name("runs/exp / tmas <b>", &mut used);
        assert_eq!(a, "demo");
        assert_eq!(b, "demo-2");
        assert_eq!(c, "demo-3");
        assert_eq!(d, "run");
        assert!(e.starts_with("exp~tmas"), "{e}");
        assert!(
            e.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.~".contains(c)),
            "{e}"
        );
    }

    #[test]
    fn a_folder_without_runs_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = discover(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(err.to_string().contains("no run in it"), "{err}");
    }

    #[test]
    fn a_folder_of_runs_lists_each_run_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "a"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join(DB_FILE), b"").unwrap();
        }
        let runs = discover(&[dir.path().to_path_buf()]).unwrap();
        let labels: Vec<_> = runs.iter().map(|r| r.root.clone()).collect();
        assert_eq!(labels, vec![dir.path().join("a"), dir.path().join("b")]);
    }
}
