//! Loading: defaults < file < environment < command line, merged as `toml::Value`s and
//! deserialized once, then validated. Every error names its origin (file with
//! line/column, environment variable or flag), key path and reason.
//!
//! Deserialization stops at the first bad key, so to report *all* of them the loader
//! repairs the offending key (back to its default, or removed if it is unknown) and tries
//! again, up to a bound. Validation then runs on the repaired document too.

use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::{Table, Value};

use super::Config;
use super::error::{ConfigErrors, ConfigIssue, KeyIssue, KeyPath, Seg};
use super::layers::{CliOverride, Override, cli_overrides, env_overrides, get_at, merge};
use super::layers::{remove_at, set_at};
use super::relative::{base_note, rebase_paths};
use super::validate::{check_paths, validate_values};

/// Most deserialization errors reported for one document (each costs a re-parse).
const MAX_DESERIALIZE_ERRORS: usize = 64;

/// Loads `path`, applies the `TMAS_*` variables of `env` and the `--set key=value`
/// `overrides` (in order), and validates the result.
pub fn load(
    path: &Path,
    env: &[(String, String)],
    overrides: &[String],
) -> Result<Config, ConfigErrors> {
    let cli: Vec<CliOverride> = overrides.iter().map(CliOverride::set).collect();
    load_with(path, env, &cli)
}

/// Like [`load`], with command-line overrides labelled by the flag they came from.
pub fn load_with(
    path: &Path,
    env: &[(String, String)],
    overrides: &[CliOverride],
) -> Result<Config, ConfigErrors> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors::single(ConfigIssue::new(
            label.as_str(),
            "",
            format!("cannot read the config file: {e}"),
        ))
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    load_text(&text, &label, Some(base), env, overrides)
}

/// Loads a config from TOML text; `label` names it in errors (usually its path). Its
/// relative paths stay relative to the working directory (a stored config's paths were
/// rebased when it was first loaded from its file).
pub fn load_str(
    text: &str,
    label: &str,
    env: &[(String, String)],
    overrides: &[CliOverride],
) -> Result<Config, ConfigErrors> {
    load_text(text, label, None, env, overrides)
}

/// [`load_str`] for the text of a file read from directory `base` earlier: its relative
/// paths are relative to `base`, as [`load_with`] makes them. A server loads its file once
/// and its config again for each request that sets method keys, from the same text.
pub fn load_str_in(
    text: &str,
    label: &str,
    base: &Path,
    env: &[(String, String)],
    overrides: &[CliOverride],
) -> Result<Config, ConfigErrors> {
    load_text(text, label, Some(base), env, overrides)
}

/// [`load_str`] for the text of a file in `base`: the file's relative paths are relative
/// to `base` ([`super::relative`]).
fn load_text(
    text: &str,
    label: &str,
    base: Option<&Path>,
    env: &[(String, String)],
    overrides: &[CliOverride],
) -> Result<Config, ConfigErrors> {
    let mut file: Table = toml::from_str(text).map_err(|e| {
        let origin = match e.span() {
            Some(span) => with_line_col(label, text, span.start),
            None => label.to_string(),
        };
        ConfigErrors::single(ConfigIssue::new(
            origin,
            "",
            format!("TOML syntax error: {}", e.message().trim()),
        ))
    })?;
    let rebased = base.map_or_else(Vec::new, |b| rebase_paths(&mut file, b));
    let (env_layer, mut issues) = env_overrides(env);
    let (cli_layer, cli_issues) = cli_overrides(overrides);
    issues.extend(cli_issues);
    let layers: Vec<Override> = env_layer.into_iter().chain(cli_layer).collect();

    let defaults = defaults_table().map_err(ConfigErrors::single)?;
    let mut merged = defaults.clone();
    merge(&mut merged, file);
    for o in &layers {
        set_at(&mut merged, &o.path, o.value.clone());
    }

    let spans = DeTable::parse(text).ok();
    let attr = Attributor {
        label,
        text,
        layers: &layers,
        spans: spans.as_ref().map(|s| s.get_ref()),
    };
    let Some(mut config) = deserialize_all(merged, &defaults, &attr, &mut issues) else {
        return Err(ConfigErrors(issues));
    };
    config.fill_derived();
    for ki in validate_values(&config) {
        issues.push(attr.issue(ki));
    }
    let mut path_issues = check_paths(&config);
    // The dataset a file names must be there (one given later, on the command line, is
    // checked when it is read).
    if let Some(r) = rebased
        .iter()
        .find(|r| r.key == KeyPath::keys(["run", "dataset"]))
        && config.run.dataset.as_deref() == Some(r.path.as_path())
        && !r.path.is_file()
    {
        let message = format!("dataset file {} not found", r.path.display());
        path_issues.push(KeyIssue::new(r.key.clone(), message));
    }
    for mut ki in path_issues {
        // A path rebased onto the file's directory: say which directory that was.
        let from_file = rebased.iter().any(|r| r.key == ki.path)
            && !layers.iter().any(|o| o.path.related(&ki.path));
        if let (Some(base), true) = (base, from_file) {
            ki.message = format!("{} {}", ki.message, base_note(label, base));
        }
        issues.push(attr.issue(ki));
    }
    if issues.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(issues))
    }
}

/// `Config::default()` as a TOML table: the lowest layer. `[simulator]` is left to its own
/// serde defaults so the simulator's options can grow without touching this layer.
fn defaults_table() -> Result<Table, ConfigIssue> {
    let mut t = Table::try_from(Config::default())
        .map_err(|e| ConfigIssue::new("built-in defaults", "", format!("cannot serialize: {e}")))?;
    t.remove("simulator");
    Ok(t)
}

/// Deserializes, recording each error and repairing its key until the document parses
/// (returns the config) or cannot be repaired (returns `None`).
fn deserialize_all(
    mut doc: Table,
    defaults: &Table,
    attr: &Attributor<'_>,
    issues: &mut Vec<ConfigIssue>,
) -> Option<Config> {
    for _ in 0..MAX_DESERIALIZE_ERRORS {
        let result: Result<Config, _> = serde_path_to_error::deserialize(Value::Table(doc.clone()));
        let err = match result {
            Ok(c) => return Some(c),
            Err(e) => e,
        };
        let path = key_path(err.path());
        let mut message = err.inner().message().trim().to_string();
        if message.starts_with("unknown field `api_key`") {
            message.push_str(
                " (keys never go in a config file: put the key in an environment variable \
                 and name that variable in api_key_env)",
            );
        }
        let fatal = message.starts_with("missing field") || path.0.is_empty();
        issues.push(attr.issue(KeyIssue::new(path.clone(), message)));
        if fatal || !repair(&mut doc, defaults, &path) {
            return None;
        }
    }
    None
}

/// Puts the key at `path` (up to its first array index) back to its default, or removes
/// it when there is none. Returns false if nothing changed (so the loop cannot spin).
fn repair(doc: &mut Table, defaults: &Table, path: &KeyPath) -> bool {
    let keys = KeyPath(
        path.0
            .iter()
            .take_while(|s| matches!(s, Seg::Key(_)))
            .cloned()
            .collect(),
    );
    match get_at(defaults, &keys) {
        Some(d) if get_at(doc, &keys) != Some(d) => {
            set_at(doc, &keys, d.clone());
            true
        }
        Some(_) => false,
        None => remove_at(doc, &keys),
    }
}

fn key_path(p: &serde_path_to_error::Path) -> KeyPath {
    use serde_path_to_error::Segment;
    KeyPath(
        p.iter()
            .map_while(|s| match s {
                Segment::Seq { index } => Some(Seg::Index(*index)),
                Segment::Map { key } => Some(Seg::Key(key.clone())),
                Segment::Enum { variant } => Some(Seg::Key(variant.clone())),
                Segment::Unknown => None,
            })
            .collect(),
    )
}

/// Decides which layer a problem at a key path comes from.
struct Attributor<'a> {
    label: &'a str,
    text: &'a str,
    /// Environment then command-line overrides, lowest precedence first.
    layers: &'a [Override],
    spans: Option<&'a DeTable<'a>>,
}

impl Attributor<'_> {
    fn issue(&self, ki: KeyIssue) -> ConfigIssue {
        let origin = self
            .layers
            .iter()
            .rev()
            .find(|o| o.path.related(&ki.path))
            .map(|o| o.origin.clone())
            .unwrap_or_else(|| match self.spans.and_then(|t| span_of(t, &ki.path)) {
                Some(start) => with_line_col(self.label, self.text, start),
                None => self.label.to_string(),
            });
        ConfigIssue::new(origin, ki.path.to_string(), ki.message)
    }
}

/// Start offset of the deepest part of `path` present in the file.
fn span_of(table: &DeTable<'_>, path: &KeyPath) -> Option<usize> {
    let mut found = None;
    let mut cur: Option<&DeValue<'_>> = None;
    let mut tab = Some(table);
    for seg in &path.0 {
        let (key_start, v) = match (seg, tab, cur) {
            (Seg::Key(k), Some(t), _) => match t.iter().find(|(key, _)| key.get_ref() == k) {
                Some((key, v)) => (Some(key.span().start), v),
                None => break,
            },
            (Seg::Index(i), _, Some(DeValue::Array(a))) => match a.get(*i) {
                Some(v) => (None, v),
                None => break,
            },
            _ => break,
        };
        // The value's own span is best (it points at the bad value), but implicit tables
        // have none; fall back to the key.
        let span = v.span();
        found = if span.end > span.start {
            Some(span.start)
        } else {
            key_start.or(found)
        };
        cur = Some(v.get_ref());
        tab = match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => None,
        };
    }
    found
}

/// `label:LINE:COL` for a byte offset (1-based, columns in characters).
fn with_line_col(label: &str, text: &str, offset: usize) -> String {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{label}:{line}:{col}")
}
