//! Architecture checks over this crate's source tree: layers point one way and no two
//! files of one module directory import each other, directly or around a longer cycle.
//!
//! The layers, lowest first (a module may use its own layer and those below):
//! `role` → `resources` → `sim` → `config` → `method` → `eval` → `record` → `store` →
//! `engine` → `serve` → `bench`, `rl`, `view` → `cli`. The runtime (`tmas-actors`) and `tmas-observability` are other
//! crates below all of them, so they cannot import this one at all.
//!
//! Paths are read from the code with comments removed: every `crate::…` path, every
//! `super::…`/`self::…` path, and `use` paths that start at a child module. A path names the
//! deepest module of the tree it reaches (`crate::engine::run_dir::RunDir` → the file
//! `src/engine/run_dir.rs`). The checks are written against a source directory, not this
//! crate, so another crate's tree can be checked the same way ([`scan`] with its `src/`,
//! then [`sibling_cycles`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first.
const LAYERS: &[&[&str]] = &[
    // The one vocabulary of agent roles: the simulator reads them from a header and every
    // layer above names them, so it sits under all of them and imports nothing.
    // `text`: counted nouns for what a person reads; imports nothing either.
    &["role", "text"],
    &["resources"],
    &["sim"],
    &["config"],
    &["method"],
    &["eval"],
    &["record"],
    &["store"],
    &["engine"],
    // `tmas serve` runs requests on the engine's endpoints and method jobs; a benchmark
    // may measure it.
    &["serve"],
    // `view` reads stores and the engine's accounting; it runs no model call.
    &["bench", "rl", "view"],
    &["cli"],
];

/// Files that are roots or checks rather than modules of a layer.
const NOT_LAYERED: &[&str] = &["lib", "main", "architecture_tests"];

/// One source file: its module path and the module paths it refers to.
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    /// (module referred to, the path as written).
    refs: Vec<(Vec<String>, String)>,
}

/// Every `.rs` file under `src`, with the module paths it refers to.
fn scan(src: &Path) -> Vec<SourceFile> {
    let mut paths = Vec::new();
    collect_rs(src, &mut paths);
    paths.sort();
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|p| module_of(src, p)).collect();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let module = module_of(src, &path);
            let refs = references(&strip_comments(&text), &module, &modules);
            SourceFile { path, module, refs }
        })
        .collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/engine/run_dir.rs` → `[engine, run_dir]`; `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The text without `//` and `/* */` comments (string literals are not special: a `//`
/// inside one only hides more text, which never adds a path).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(_), None) => unreachable!("covered by the first arm"),
        }
    }
}

/// The module paths `code` (a file of module `module`) refers to.
fn references(
    code: &str,
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Vec<(Vec<String>, String)> {
    let mut paths = Vec::new();
    // `use` statements, with their braces expanded.
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        expand_use(&compact(&after[..end]), "", &mut paths);
        rest = &after[end..];
    }
    // Paths in expressions and types.
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path);
        }
    }
    let mut out = Vec::new();
    for written in paths {
        if let Some(target) = resolve(&written, module, modules) {
            out.push((target, written));
        }
    }
    out
}

/// Where the keyword `word` starts as a whole word.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let bounded = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if bounded(before) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// A `use` tree with whitespace kept only between two words (`X as Y`).
fn compact(tree: &str) -> String {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let word_char = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::new();
    for w in words {
        if word_char(out.chars().next_back()) && word_char(w.chars().next()) {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// `a::{b, c::{d}}` → `a::b`, `a::c::d` (after [`compact`]).
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    for part in split_top(tree) {
        match part.find('{') {
            Some(open) if part.ends_with('}') => {
                let head = part[..open].trim_end_matches("::");
                let joined = join(prefix, head);
                expand_use(&part[open + 1..part.len() - 1], &joined, out);
            }
            _ => {
                let path = part.split(" as ").next().unwrap_or(part);
                out.push(join(prefix, path));
            }
        }
    }
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}::{rest}"),
    }
}

/// Splits at commas outside braces.
fn split_top(tree: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// The deepest known module `written` reaches from a file of module `module`, or `None`
/// for paths into other crates.
fn resolve(
    written: &str,
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let segments: Vec<&str> = written.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = Vec::new();
    let mut i = 0;
    match segments.first().copied() {
        Some("crate") => i = 1,
        Some("self") => {
            base = module.to_vec();
            i = 1;
        }
        Some("super") => {
            base = module.to_vec();
            while segments.get(i) == Some(&"super") {
                base.pop();
                i += 1;
            }
        }
        Some(first) => {
            // A `use` path starting at a child module of this file.
            let mut child = module.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = module.to_vec();
        }
        None => return None,
    }
    let mut target = base;
    for segment in &segments[i..] {
        let mut deeper = target.clone();
        deeper.push((*segment).to_string());
        if !modules.contains(&deeper) {
            break;
        }
        target = deeper;
    }
    Some(target)
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&top))
}

/// One line per import from a lower layer into a higher one, and per top-level module
/// missing from [`LAYERS`].
fn layer_violations(files: &[SourceFile], src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in files {
        let Some(top) = file.module.first() else {
            continue;
        };
        if NOT_LAYERED.contains(&top.as_str()) {
            continue;
        }
        let shown = file.path.strip_prefix(src).unwrap_or(&file.path).display();
        let Some(own) = layer_of(top) else {
            out.push(format!(
                "src/{shown}: top-level module `{top}` has no layer (add it to LAYERS in src/architecture_tests.rs)"
            ));
            continue;
        };
        for (target, written) in &file.refs {
            let Some(other) = target.first() else {
                continue;
            };
            if NOT_LAYERED.contains(&other.as_str()) {
                continue;
            }
            if let Some(theirs) = layer_of(other)
                && theirs > own
            {
                out.push(format!(
                    "src/{shown} imports `{written}`: `{top}` is below `{other}` and must not depend on it"
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Import cycles among the children of each module directory. A child counts with
/// everything below it (`task.rs` with `task/…`); a file importing its parent or its own
/// children is not a cycle. Each cycle is one line: the files around it, and one import
/// per step.
fn sibling_cycles(files: &[SourceFile]) -> Vec<String> {
    // edges[parent][from child][to child] = an example import (file, path written).
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    for file in files {
        for (target, written) in &file.refs {
            let common = file
                .module
                .iter()
                .zip(target)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(from), Some(to)) = (file.module.get(common), target.get(common)) else {
                continue;
            };
            edges
                .entry(file.module[..common].to_vec())
                .or_default()
                .entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_insert_with(|| format!("{} uses `{written}`", file.path.display()));
        }
    }
    let mut out = Vec::new();
    for (parent, graph) in &edges {
        let dir = if parent.is_empty() {
            "src/".to_string()
        } else {
            format!("src/{}/", parent.join("/"))
        };
        for cycle in cycles(graph) {
            let mut steps = Vec::new();
            for pair in cycle.windows(2) {
                steps.push(graph[&pair[0]][&pair[1]].clone());
            }
            out.push(format!(
                "import cycle in {dir}: {} ({})",
                cycle.join(" → "),
                steps.join("; ")
            ));
        }
    }
    out
}

/// One closed walk (first node repeated at the end) per strongly connected group of
/// more than one node.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for next in graph.get(&n).into_iter().flat_map(|m| m.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for node in graph.keys() {
        if done.contains(node) || !reach(node).contains(node) {
            continue;
        }
        // The shortest cycle through `node`, by breadth-first search.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([node.clone()]);
        'search: while let Some(n) = queue.pop_front() {
            for next in graph.get(&n).into_iter().flat_map(|m| m.keys()) {
                if next == node {
                    prev.insert(node.clone(), n.clone());
                    break 'search;
                }
                if !prev.contains_key(next) {
                    prev.insert(next.clone(), n.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        let mut walk = vec![node.clone()];
        let mut at = prev[node].clone();
        while &at != node {
            walk.push(at.clone());
            at = prev[&at].clone();
        }
        walk.push(node.clone());
        walk.reverse();
        for n in &walk {
            done.insert(n.clone());
        }
        out.push(walk);
    }
    out
}

fn tmas_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn lower_layers_do_not_import_higher_ones() {
    let src = tmas_src();
    let violations = layer_violations(&scan(&src), &src);
    assert!(
        violations.is_empty(),
        "imports against the layering (lowest first: {}):\n{}",
        LAYERS
            .iter()
            .map(|l| l.join("/"))
            .collect::<Vec<_>>()
            .join(" → "),
        violations.join("\n")
    );
}

#[test]
fn files_of_a_module_do_not_import_each_other_in_a_cycle() {
    let cycles = sibling_cycles(&scan(&tmas_src()));
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn files_of_the_other_workspace_crates_do_not_import_each_other_in_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["client", "actors", "observability", "equivalence"] {
        let cycles = sibling_cycles(&scan(&root.join(krate).join("src")));
        assert!(cycles.is_empty(), "{krate}: {}", cycles.join("\n"));
    }
}

#[test]
fn the_checks_find_an_upward_import_and_a_cycle() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create directory");
        std::fs::write(path, text).expect("write file");
    };
    write("lib.rs", "pub mod store;\npub mod engine;\n");
    write("engine.rs", "pub mod run_dir;\n");
    write("engine/run_dir.rs", "pub struct ProblemRecord;\n");
    write(
        "store.rs",
        "// use crate::engine::Commented;\npub mod a;\npub mod b;\npub mod c;\n",
    );
    write(
        "store/a.rs",
        "use crate::{engine::run_dir::{ProblemRecord as R}, store::b};\n",
    );
    write("store/b.rs", "pub fn f() { super::c::g() }\n");
    write("store/c.rs", "use super::a;\n");
    let files = scan(src);
    assert_eq!(
        layer_violations(&files, src),
        vec!["src/store/a.rs imports `crate::engine::run_dir::ProblemRecord`: `store` is below `engine` and must not depend on it".to_string()]
    );
    let cycles = sibling_cycles(&files);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].starts_with("import cycle in src/store/: a → b → c → a ("),
        "{}",
        cycles[0]
    );
}
