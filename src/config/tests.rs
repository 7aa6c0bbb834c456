//! Unit tests of the config layer: one module per concern.

mod layering;
mod resolution;
mod rules;
mod syntax;

use super::*;

/// A minimal valid endpoint section, appended after a test's own tables.
pub(super) const ENDPOINT: &str = r#"
[endpoints.local]
base_url = "http://127.0.0.1:8000/v1"
model = "m"
"#;

/// Loads `extra` followed by [`ENDPOINT`], with no env or CLI layer.
pub(super) fn load_text(extra: &str) -> Result<Config, ConfigErrors> {
    load_str(&format!("{extra}\n{ENDPOINT}"), "t.toml", &[], &[])
}

/// Asserts that loading fails with an issue at `path` whose message contains `needle`,
/// and returns that issue.
#[track_caller]
pub(super) fn issue_at(extra: &str, path: &str, needle: &str) -> ConfigIssue {
    let errs = match load_text(extra) {
        Ok(_) => panic!("expected an error at {path}, but the config loaded:\n{extra}"),
        Err(e) => e,
    };
    match errs.iter().find(|i| i.path == path) {
        Some(i) => {
            assert!(
                i.message.contains(needle),
                "message at {path} is {:?}, expected it to contain {needle:?}",
                i.message
            );
            i.clone()
        }
        None => panic!("no issue at {path}; got:\n{errs}"),
    }
}

pub(super) fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
