//! Relative paths written in a config file are relative to that file's directory, so a
//! config works from any working directory. Paths from the environment or the command
//! line (`--set run.dataset=…`, `--dataset`) stay relative to the working directory: the
//! loader rebases the file's layer only, before the others are applied.

use std::path::{Component, Path, PathBuf};

use toml::{Table, Value};

use super::error::KeyPath;

/// A path key of the file that was rebased: where, and what it became.
#[derive(Debug, Clone)]
pub struct Rebased {
    pub key: KeyPath,
    pub path: PathBuf,
}

/// The config's path keys: `*` stands for any table key (a role, an endpoint, a prompt).
const PATH_KEYS: &[&[&str]] = &[
    &["run", "dataset"],
    &["run", "out_dir"],
    &["roles", "*", "prompt"],
    &["prompts", "*"],
    &["endpoints", "*", "tokenizer"],
];

/// Rewrites every relative path of `file` (a config file's table) to `base.join(path)`,
/// normalized; `base` is the file's directory. Returns what was rewritten.
pub fn rebase_paths(file: &mut Table, base: &Path) -> Vec<Rebased> {
    let mut out = Vec::new();
    if base.as_os_str().is_empty() {
        return out; // the file is in the working directory: nothing changes
    }
    for pattern in PATH_KEYS {
        rebase_at(file, pattern, base, &mut Vec::new(), &mut out);
    }
    out
}

fn rebase_at(
    table: &mut Table,
    pattern: &[&str],
    base: &Path,
    at: &mut Vec<String>,
    out: &mut Vec<Rebased>,
) {
    let Some((first, rest)) = pattern.split_first() else {
        return;
    };
    let keys: Vec<String> = match *first {
        "*" => table.keys().cloned().collect(),
        key => vec![key.to_string()],
    };
    for key in keys {
        let Some(value) = table.get_mut(&key) else {
            continue;
        };
        at.push(key);
        match (value, rest.is_empty()) {
            (Value::String(s), true) if !s.is_empty() && Path::new(s.as_str()).is_relative() => {
                let path = normalize(&base.join(s.as_str()));
                *s = path.display().to_string();
                out.push(Rebased {
                    key: KeyPath::keys(at.iter().cloned()),
                    path,
                });
            }
            (Value::Table(sub), false) => rebase_at(sub, rest, base, at, out),
            _ => {}
        }
        at.pop();
    }
}

/// `path` with `.` dropped and `dir/..` folded (lexically: `config/../data/x` → `data/x`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            c => out.push(c),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The note an error about a rebased path ends with: which directory it was read from.
pub fn base_note(label: &str, base: &Path) -> String {
    format!(
        "(a relative path in {label} is read from that file's directory, {}/)",
        base.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_move_to_the_files_directory_and_absolute_ones_stay() {
        let mut t: Table = toml::from_str(
            r#"
[run]
dataset = "../data/x.jsonl"
out_dir = "/abs/runs"
[roles.solution]
prompt = "prompts/s.md"
[prompts]
extra = "./p.md"
[endpoints.a]
tokenizer = "tok.json"
model = "m"
"#,
        )
        .unwrap();
        let rebased = rebase_paths(&mut t, Path::new("config"));
        assert_eq!(t["run"]["dataset"].as_str(), Some("data/x.jsonl"));
        assert_eq!(t["run"]["out_dir"].as_str(), Some("/abs/runs"));
        assert_eq!(
            t["roles"]["solution"]["prompt"].as_str(),
            Some("config/prompts/s.md")
        );
        assert_eq!(t["prompts"]["extra"].as_str(), Some("config/p.md"));
        assert_eq!(
            t["endpoints"]["a"]["tokenizer"].as_str(),
            Some("config/tok.json")
        );
        assert_eq!(t["endpoints"]["a"]["model"].as_str(), Some("m"));
        let keys: Vec<String> = rebased.iter().map(|r| r.key.to_string()).collect();
        assert_eq!(
            keys,
            [
                "run.dataset",
                "roles.solution.prompt",
                "prompts.extra",
                "endpoints.a.tokenizer"
            ]
        );
        // A file in the working directory keeps its paths as written.
        let mut t: Table = toml::from_str("[run]\ndataset = \"d.jsonl\"").unwrap();
        assert!(rebase_paths(&mut t, Path::new("")).is_empty());
        assert_eq!(normalize(Path::new("a/../../b/./c")), Path::new("../b/c"));
    }
}
