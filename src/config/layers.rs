//! The layers above the config file: environment variables and command-line overrides,
//! merged at the `toml::Value` level so that one deserialization sees the final document
//! and its key paths stay exact.
//!
//! Precedence, lowest first: built-in defaults < config file < `TMAS_*` environment
//! variables < command-line overrides (in the order given; the last one wins).

use toml::{Table, Value};

use super::error::{ConfigIssue, KeyPath, Seg};

/// Environment variables with this prefix *and* a `__` in the rest of their name are
/// config overrides: `TMAS_METHOD__EPSILON=0.3` sets `method.epsilon`. Others (such as
/// `TMAS_API_KEY`) are left alone.
pub const ENV_PREFIX: &str = "TMAS_";

/// One value set above the file, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// `environment TMAS_RUN__SEED`, `--set run.seed`, `--seed`, …
    pub origin: String,
    pub path: KeyPath,
    pub value: Value,
}

/// A command-line override before parsing: `assignment` is `key.path=value`; `label`
/// names the flag it came from (`--set`, or a convenience flag such as `--seed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliOverride {
    pub label: String,
    pub assignment: String,
}

impl CliOverride {
    /// A `--set key=value` override.
    pub fn set(assignment: impl Into<String>) -> Self {
        Self {
            label: "--set".to_string(),
            assignment: assignment.into(),
        }
    }
}

/// Picks the config overrides out of an environment, in a stable (sorted) order.
pub fn env_overrides(env: &[(String, String)]) -> (Vec<Override>, Vec<ConfigIssue>) {
    let mut vars: Vec<&(String, String)> = env
        .iter()
        .filter(|(k, _)| k.strip_prefix(ENV_PREFIX).is_some_and(|r| r.contains("__")))
        .collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (name, raw) in vars {
        let origin = format!("environment {name}");
        let rest = &name[ENV_PREFIX.len()..];
        let keys: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        if keys.iter().any(String::is_empty) {
            errors.push(ConfigIssue::new(
                origin,
                "",
                "empty key segment (use `__` only between keys, e.g. TMAS_METHOD__EPSILON)",
            ));
            continue;
        }
        out.push(Override {
            origin,
            path: KeyPath::keys(keys),
            value: parse_scalar(raw),
        });
    }
    (out, errors)
}

/// Parses `key.path=value` overrides; the key uses TOML dotted-key syntax (quote a segment
/// containing dots: `endpoints."gpu.1".model=x`).
pub fn cli_overrides(overrides: &[CliOverride]) -> (Vec<Override>, Vec<ConfigIssue>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for o in overrides {
        let Some((key, raw)) = o.assignment.split_once('=') else {
            errors.push(ConfigIssue::new(
                format!("{} {}", o.label, o.assignment),
                "",
                "expected KEY=VALUE, e.g. method.n=4",
            ));
            continue;
        };
        let key = key.trim();
        let origin = if o.label == "--set" {
            format!("--set {key}")
        } else {
            o.label.clone()
        };
        match parse_key(key) {
            Some(path) => out.push(Override {
                origin,
                path,
                value: parse_scalar(raw.trim()),
            }),
            None => errors.push(ConfigIssue::new(
                origin,
                "",
                format!("`{key}` is not a valid key path (expected e.g. method.epsilon)"),
            )),
        }
    }
    (out, errors)
}

/// A TOML dotted key to its segments, or `None` if it is not one.
fn parse_key(key: &str) -> Option<KeyPath> {
    if key.is_empty() {
        return None;
    }
    let table: Table = toml::from_str(&format!("{key} = 0")).ok()?;
    let mut path = Vec::new();
    let mut cur = &table;
    loop {
        let (k, v) = cur.iter().next()?;
        path.push(Seg::Key(k.clone()));
        match v {
            Value::Table(t) => cur = t,
            _ => return Some(KeyPath(path)),
        }
    }
}

/// A value as a TOML scalar (or array / inline table); anything that does not parse as
/// TOML is taken as a bare string, so `TMAS_RUN__DATASET=data/x.jsonl` needs no quotes.
pub fn parse_scalar(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}

/// Deep-merges `overlay` into `base`: tables merge key by key, anything else (arrays
/// included) is replaced.
pub fn merge(base: &mut Table, overlay: Table) {
    for (k, v) in overlay {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The keys of `path` up to its first array index (tables only).
fn leading_keys(path: &KeyPath) -> Vec<&str> {
    path.0
        .iter()
        .map_while(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect()
}

/// Sets `value` at `path`, creating (or replacing non-table values with) tables on the way.
pub fn set_at(root: &mut Table, path: &KeyPath, value: Value) {
    let keys = leading_keys(path);
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut cur = root;
    for k in parents {
        let entry = cur
            .entry((*k).to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(t) = entry else { return };
        cur = t;
    }
    match (cur.get_mut(*last), value) {
        (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
        (_, v) => {
            cur.insert((*last).to_string(), v);
        }
    }
}

/// The value at `path`, if any.
pub fn get_at<'a>(root: &'a Table, path: &KeyPath) -> Option<&'a Value> {
    let mut segs = path.0.iter();
    let Some(Seg::Key(first)) = segs.next() else {
        return None;
    };
    let mut cur = root.get(first)?;
    for s in segs {
        cur = match (s, cur) {
            (Seg::Key(k), Value::Table(t)) => t.get(k)?,
            (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes the value at `path` (an index removes the whole array). Returns whether
/// something was removed.
pub fn remove_at(root: &mut Table, path: &KeyPath) -> bool {
    let keys = leading_keys(path);
    let Some((last, parents)) = keys.split_last() else {
        return false;
    };
    let mut cur = root;
    for k in parents {
        match cur.get_mut(*k) {
            Some(Value::Table(t)) => cur = t,
            _ => return false,
        }
    }
    cur.remove(*last).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn env_vars_need_prefix_and_double_underscore() {
        let (o, e) = env_overrides(&env(&[
            ("TMAS_API_KEY", "secret"),
            ("PATH", "/bin"),
            ("TMAS_METHOD__EPSILON", "0.3"),
            ("TMAS_ENDPOINTS__LOCAL__MAX_IN_FLIGHT", "4"),
        ]));
        assert!(e.is_empty());
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].path.to_string(), "endpoints.local.max_in_flight");
        assert_eq!(o[0].value, Value::Integer(4));
        assert_eq!(o[1].path.to_string(), "method.epsilon");
        assert_eq!(o[1].value, Value::Float(0.3));
        assert_eq!(o[1].origin, "environment TMAS_METHOD__EPSILON");
    }

    #[test]
    fn env_empty_segment_is_an_error() {
        let (o, e) = env_overrides(&env(&[("TMAS_METHOD____N", "3")]));
        assert!(o.is_empty());
        assert_eq!(e.len(), 1);
        assert!(e[0].origin.contains("TMAS_METHOD____N"));
    }

    #[test]
    fn scalars_parse_as_toml_with_bare_string_fallback() {
        assert_eq!(parse_scalar("7"), Value::Integer(7));
        assert_eq!(parse_scalar("true"), Value::Boolean(true));
        assert_eq!(parse_scalar("\"7\""), Value::String("7".into()));
        assert_eq!(
            parse_scalar("data/x.jsonl"),
            Value::String("data/x.jsonl".into())
        );
        assert_eq!(
            parse_scalar("[\"a\", \"b\"]"),
            Value::Array(vec!["a".into(), "b".into()])
        );
    }

    #[test]
    fn cli_keys_use_toml_dotted_syntax() {
        let (o, e) = cli_overrides(&[
            CliOverride::set("method.n=4"),
            CliOverride::set("endpoints.\"gpu.1\".model = m"),
            CliOverride {
                label: "--seed".into(),
                assignment: "run.seed=9".into(),
            },
        ]);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(o[0].origin, "--set method.n");
        assert_eq!(o[0].value, Value::Integer(4));
        assert_eq!(
            o[1].path,
            KeyPath::keys(["endpoints", "gpu.1", "model"]),
            "quoted segment kept whole"
        );
        assert_eq!(o[1].path.to_string(), "endpoints.\"gpu.1\".model");
        assert_eq!(o[2].origin, "--seed");
    }

    #[test]
    fn cli_malformed_assignments_are_errors() {
        let (o, e) = cli_overrides(&[CliOverride::set("method.n"), CliOverride::set("a..b=1")]);
        assert!(o.is_empty());
        assert_eq!(e.len(), 2);
        assert!(e[0].message.contains("KEY=VALUE"));
        assert!(e[1].message.contains("not a valid key path"));
    }

    #[test]
    fn merge_is_deep_and_replaces_arrays() {
        let mut base: Table = toml::from_str("[a]\nx = 1\ny = [1, 2]\n[b]\nz = 1").unwrap();
        let over: Table = toml::from_str("[a]\ny = [3]\n").unwrap();
        merge(&mut base, over);
        assert_eq!(base["a"]["x"], Value::Integer(1));
        assert_eq!(base["a"]["y"], Value::Array(vec![Value::Integer(3)]));
        assert_eq!(base["b"]["z"], Value::Integer(1));
    }

    #[test]
    fn set_get_remove_round_trip() {
        let mut t = Table::new();
        let p = KeyPath::keys(["roles", "solution", "temperature"]);
        set_at(&mut t, &p, Value::Float(0.5));
        assert_eq!(get_at(&t, &p), Some(&Value::Float(0.5)));
        assert!(remove_at(&mut t, &p));
        assert_eq!(get_at(&t, &p), None);
        assert!(!remove_at(&mut t, &p));
    }
}
