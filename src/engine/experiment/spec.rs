//! The experiment file: a base config, overrides for every variant, named variants and
//! sweeps, expanded into a list of variants, each a named list of `key=value` overrides
//! applied on top of the base config (the same mechanism as `--set`).
//!
//! ```toml
//! name = "table1"
//! config = "../config/paper.toml"          # relative to this file; default: built-ins
//! report_iterations = [0, 1, 3, 7, 11, 19]
//! set = { "method.iterations" = 20 }      # every variant
//!
//! Layers, later wins: base config < `set` < the command line's `--set` < the variant's
//! own `set` (or swept value), so `--set` resizes every variant without erasing what
//! makes the variants differ.
//!
//! [[variant]]
//! name = "TMAS"
//! set = { "method.name" = "tmas" }
//!
//! [[sweep]]                                # one variant per value: "method.epsilon=0.2"
//! key = "method.epsilon"
//! values = [0.0, 0.2, 1.0]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::config::CliOverride;

/// The experiment file as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    pub name: String,
    /// Base config file, relative to the experiment file.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// Iterations shown as table columns (those beyond a variant's T are left out).
    #[serde(default = "default_report_iterations")]
    pub report_iterations: Vec<u32>,
    /// Overrides for every variant (dotted key → value).
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub variant: Vec<VariantSpec>,
    #[serde(default)]
    pub sweep: Vec<SweepSpec>,
}

/// The paper's Table 1 columns.
fn default_report_iterations() -> Vec<u32> {
    vec![0, 1, 3, 7, 11, 19]
}

/// `[[variant]]`: a named set of overrides.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: String,
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

/// `[[sweep]]`: one variant per value of `key` (plus the sweep's own `set`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    pub key: String,
    pub values: Vec<toml::Value>,
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

/// The swept key and value of a sweep variant (for the Pass@1-vs-value chart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Swept {
    pub key: String,
    /// The value as a number (sweeps are over numeric parameters).
    pub value: f64,
}

/// One expanded variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    pub overrides: Vec<CliOverride>,
    pub swept: Option<Swept>,
}

impl ExperimentSpec {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read experiment file {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, label: &str) -> anyhow::Result<Self> {
        let spec: Self = toml::from_str(text).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        anyhow::ensure!(
            !spec.variant.is_empty() || !spec.sweep.is_empty(),
            "{label}: no [[variant]] and no [[sweep]]: nothing to run"
        );
        for (i, s) in spec.sweep.iter().enumerate() {
            anyhow::ensure!(
                !s.values.is_empty(),
                "{label}: sweep[{i}] ({}) has no values",
                s.key
            );
            for v in &s.values {
                anyhow::ensure!(
                    number(v).is_some(),
                    "{label}: sweep[{i}] ({}): value {v} is not a number",
                    s.key
                );
            }
        }
        Ok(spec)
    }

    /// The base config file, resolved against the experiment file's directory.
    pub fn base_config_path(&self, file: &Path) -> Option<PathBuf> {
        let p = self.config.as_ref()?;
        if p.is_absolute() {
            return Some(p.clone());
        }
        Some(file.parent().unwrap_or(Path::new(".")).join(p))
    }

    /// The overrides every variant starts from (`set`).
    pub fn common_overrides(&self) -> Vec<CliOverride> {
        overrides(&format!("experiment {}", self.name), &self.set)
    }

    /// Every variant with its own overrides (applied after [`Self::common_overrides`]
    /// and the command line's): the named ones, then each sweep's values, in file order.
    pub fn variants(&self) -> anyhow::Result<Vec<Variant>> {
        let label = format!("experiment {}", self.name);
        let mut out = Vec::new();
        for v in &self.variant {
            let o = overrides(&format!("variant {}", v.name), &v.set);
            out.push(Variant {
                name: v.name.clone(),
                overrides: o,
                swept: None,
            });
        }
        for s in &self.sweep {
            for value in &s.values {
                let name = format!("{}={value}", s.key);
                let mut o = overrides(&format!("sweep {name}"), &s.set);
                o.push(CliOverride {
                    label: format!("sweep {name}"),
                    assignment: format!("{}={value}", s.key),
                });
                out.push(Variant {
                    swept: Some(Swept {
                        key: s.key.clone(),
                        value: number(value).unwrap_or(f64::NAN),
                    }),
                    name,
                    overrides: o,
                });
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for v in &out {
            anyhow::ensure!(
                names.insert(v.name.as_str()),
                "{label}: two variants are named {:?}",
                v.name
            );
        }
        Ok(out)
    }
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// `key=value` overrides (values printed as TOML, so strings stay quoted).
fn overrides(label: &str, set: &BTreeMap<String, toml::Value>) -> Vec<CliOverride> {
    set.iter()
        .map(|(k, v)| CliOverride {
            label: label.to_string(),
            assignment: format!("{k}={v}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_variants_and_sweeps_in_order() {
        let spec = ExperimentSpec::parse(
            r#"
name = "x"
set = { "method.iterations" = 3 }
[[variant]]
name = "MV"
set = { "method.name" = "majority-vote", "method.iterations" = 1 }
[[sweep]]
key = "method.epsilon"
values = [0, 0.5]
"#,
            "x.toml",
        )
        .unwrap();
        let v = spec.variants().unwrap();
        let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["MV", "method.epsilon=0", "method.epsilon=0.5"]);
        let mv: Vec<_> = v[0]
            .overrides
            .iter()
            .map(|o| o.assignment.as_str())
            .collect();
        assert_eq!(mv, ["method.iterations=1", "method.name=\"majority-vote\""]);
        assert_eq!(spec.common_overrides()[0].assignment, "method.iterations=3");
        assert_eq!(v[2].swept.as_ref().unwrap().value, 0.5);
        assert_eq!(spec.report_iterations, default_report_iterations());
    }

    #[test]
    fn rejects_empty_and_bad_files() {
        assert!(ExperimentSpec::parse("name = \"x\"", "f").is_err());
        let e = ExperimentSpec::parse(
            "name = \"x\"\n[[sweep]]\nkey = \"method.n\"\nvalues = [\"a\"]",
            "f.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        let e = ExperimentSpec::parse("name = \"x\"\nbogus = 1", "f.toml").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let dup = ExperimentSpec::parse(
            "name = \"x\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"",
            "f",
        )
        .unwrap();
        assert!(dup.variants().is_err());
    }
}
