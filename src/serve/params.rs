//! What one request asks for: the method (from the model name and the `tmas` extension
//! object) and its parameters, as a config of its own.
//!
//! The extension's keys are `[method]` keys (`method` stands for `method.name`), set on
//! top of the served config exactly as `--set method.KEY=VALUE` would be: the config
//! loader builds and checks each request's config, so a request gets the rules and
//! messages a config file gets, and what one request sets never reaches another (each
//! has its own config, built from the file's text).

use std::path::PathBuf;

use serde_json::Value;

use crate::config::{CliOverride, Config, ConfigErrors, MethodConfig, MethodName, load_str_in};

/// The served config, kept as its source so each request's config is loaded from it.
#[derive(Debug, Clone)]
pub struct ServedConfig {
    /// The config file's text, its label in errors and the directory its relative paths
    /// are relative to.
    pub text: String,
    pub label: String,
    pub base: PathBuf,
    /// The environment and command-line overrides the server started with.
    pub env: Vec<(String, String)>,
    pub overrides: Vec<CliOverride>,
    /// The config as loaded at start (no request's keys).
    pub config: Config,
    /// The solution role's model: method models are `METHOD/MODEL`.
    pub model: String,
}

/// What a request's model name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A method over the served model (`tmas/MODEL`, or the method's name alone).
    Method(MethodName),
    /// The served model itself: the request goes to the solution role's endpoints as it is.
    Upstream,
}

/// A request's method and parameters, checked.
#[derive(Debug)]
pub struct Asked {
    pub config: Config,
    /// Model calls one choice costs when every reply is usable.
    pub calls_per_choice: u64,
}

/// A request field that is wrong, OpenAI style: the field (`param`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub param: String,
    pub message: String,
}

impl FieldError {
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: param.into(),
            message: message.into(),
        }
    }
}

/// The name of `method` as a model name over `model`.
pub fn model_name(method: MethodName, model: &str) -> String {
    format!("{}/{model}", method.as_str())
}

/// Which method (or the upstream model) `model` names; `None` if it names nothing served.
pub fn target(model: &str, served: &str) -> Option<Target> {
    let method = |name: &str| MethodName::ALL.into_iter().find(|m| m.as_str() == name);
    if model == served {
        return Some(Target::Upstream);
    }
    match model.split_once('/') {
        Some((m, rest)) if rest == served => method(m).map(Target::Method),
        _ => method(model).map(Target::Method),
    }
}

impl ServedConfig {
    /// The config of a request for `method` with the extension object `extension`.
    pub fn asked(
        &self,
        method: MethodName,
        extension: Option<&Value>,
    ) -> Result<Asked, FieldError> {
        let mut overrides = self.overrides.clone();
        let fields = match extension {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(fields)) => fields.clone(),
            Some(_) => {
                return Err(FieldError::new(
                    "tmas",
                    "tmas: must be an object of method keys, e.g. {\"n\": 4, \"iterations\": 3}",
                ));
            }
        };
        overrides.push(CliOverride {
            label: "the model name".into(),
            assignment: format!("method.name=\"{}\"", method.as_str()),
        });
        // MV@k is one vote: unless the request says otherwise, it runs its one iteration
        // whatever the served config's T (which is for the iterative methods).
        let mut name = method;
        if let Some(Value::String(m)) = fields.get("method")
            && let Some(m) = MethodName::ALL.into_iter().find(|x| x.as_str() == m)
        {
            name = m;
        }
        if name == MethodName::MajorityVote && !fields.contains_key("iterations") {
            overrides.push(CliOverride {
                label: "the model name".into(),
                assignment: "method.iterations=1".into(),
            });
        }
        for (key, value) in &fields {
            let param = format!("tmas.{key}");
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(FieldError::new(&param, format!("{param}: unknown key")));
            }
            let literal = match value {
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
                Value::Null => {
                    return Err(FieldError::new(
                        &param,
                        format!("{param}: must not be null (leave it out for the default)"),
                    ));
                }
                Value::Array(_) | Value::Object(_) => {
                    return Err(FieldError::new(
                        &param,
                        format!("{param}: must be a number, a string or a boolean"),
                    ));
                }
            };
            let target = if key == "method" { "name" } else { key };
            overrides.push(CliOverride {
                label: format!("request field {param}"),
                assignment: format!("method.{target}={literal}"),
            });
        }
        let config = load_str_in(&self.text, &self.label, &self.base, &self.env, &overrides)
            .map_err(field_error)?;
        let calls_per_choice = nominal_calls(&config.method);
        Ok(Asked {
            config,
            calls_per_choice,
        })
    }
}

/// The first issue of `errors` as a field of the request (every issue in the message).
fn field_error(errors: ConfigErrors) -> FieldError {
    let param_of = |path: &str| match path.strip_prefix("method.") {
        Some("name") => "tmas.method".to_string(),
        Some(key) => format!("tmas.{key}"),
        None if path == "method" => "tmas".to_string(),
        None => "model".to_string(),
    };
    let message = errors
        .iter()
        .map(|i| format!("{}: {}", param_of(&i.path), i.message))
        .collect::<Vec<_>>()
        .join("; ");
    let param = errors
        .iter()
        .next()
        .map_or("tmas".into(), |i| param_of(&i.path));
    FieldError::new(param, message)
}

/// The model calls one problem of `m` costs when every reply is usable (re-asks after
/// unusable replies come on top; `docs/method.md` gives each method's call graph).
pub fn nominal_calls(m: &MethodConfig) -> u64 {
    let (n, k, t) = (u64::from(m.n), u64::from(m.k), u64::from(m.iterations));
    let verifications = u64::from(m.m);
    match m.name {
        // Per iteration: N solutions, N·M verifications, N summaries, two bank updates,
        // and before each update at most one embeddings call when the banks read meaning.
        MethodName::Tmas => {
            let embeddings = if m.uses_embeddings() { 2 * t } else { 0 };
            t * (n * (verifications + 2) + 2) + embeddings
        }
        MethodName::MajorityVote => k,
        MethodName::SelfRefine => n * t + n * t.saturating_sub(1),
        MethodName::VerifyRefine => n * t + n * verifications * t,
        MethodName::Pacore => n * t,
        MethodName::Rse => {
            // N attempts per iteration, an extraction of each attempt before the next
            // iteration, and one embeddings call per bank update when it de-duplicates so.
            let later = t.saturating_sub(1);
            let embeddings = if m.uses_embeddings() { later } else { 0 };
            n * t + n * later + embeddings
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> ServedConfig {
        let text = r#"
[method]
n = 2
m = 2
iterations = 3

[endpoints.local]
base_url = "embedded-sim"
model = "sim-model"
"#
        .to_string();
        let config = crate::config::load_str(&text, "serve.toml", &[], &[]).expect("valid");
        ServedConfig {
            text,
            label: "serve.toml".into(),
            base: PathBuf::from("."),
            env: Vec::new(),
            overrides: Vec::new(),
            config,
            model: "sim-model".into(),
        }
    }

    #[test]
    fn model_names_name_a_method_over_the_served_model_or_the_model_itself() {
        fn t(model: &str) -> Option<Target> {
            target(model, "sim-model")
        }
        assert_eq!(t("tmas/sim-model"), Some(Target::Method(MethodName::Tmas)));
        assert_eq!(
            t("majority-vote/sim-model"),
            Some(Target::Method(MethodName::MajorityVote))
        );
        assert_eq!(t("rse"), Some(Target::Method(MethodName::Rse)));
        assert_eq!(t("sim-model"), Some(Target::Upstream));
        assert_eq!(t("tmas/other-model"), None);
        assert_eq!(t("best-of-n/sim-model"), None);
        for m in MethodName::ALL {
            assert_eq!(t(&model_name(m, "sim-model")), Some(Target::Method(m)));
        }
    }

    #[test]
    fn extension_keys_set_the_requests_method_keys_and_nothing_else() {
        let s = served();
        let ext = serde_json::json!({"n": 4, "m": 1, "iterations": 2, "epsilon": 0.5});
        let asked = s.asked(MethodName::Tmas, Some(&ext)).expect("valid");
        let m = &asked.config.method;
        assert_eq!((m.n, m.m, m.iterations, m.epsilon), (4, 1, 2, 0.5));
        assert_eq!(asked.calls_per_choice, 2 * (4 * 3 + 2));
        // The next request starts from the served config again.
        let plain = s.asked(MethodName::Tmas, None).expect("valid");
        assert_eq!(
            (plain.config.method.n, plain.config.method.iterations),
            (2, 3)
        );
        // The extension's method wins over the model name's.
        let ext = serde_json::json!({"method": "pacore"});
        let asked = s.asked(MethodName::Tmas, Some(&ext)).expect("valid");
        assert_eq!(asked.config.method.name, MethodName::Pacore);
        assert_eq!(asked.calls_per_choice, 2 * 3);
    }

    #[test]
    fn majority_vote_runs_its_one_iteration_unless_the_request_sets_another() {
        let s = served();
        let asked = s.asked(MethodName::MajorityVote, None).expect("valid");
        assert_eq!(asked.config.method.iterations, 1);
        let ext = serde_json::json!({"iterations": 3});
        let err = s
            .asked(MethodName::MajorityVote, Some(&ext))
            .expect_err("MV has one iteration");
        assert_eq!(err.param, "tmas.iterations");
        assert!(
            err.message.contains("set iterations = 1"),
            "{}",
            err.message
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_field_with_the_configs_message() {
        let s = served();
        let cases = [
            (
                serde_json::json!({"n": 0}),
                "tmas.n",
                "must be at least 1, got 0",
            ),
            (
                serde_json::json!({"epsilon": 1.5}),
                "tmas.epsilon",
                "must be within [0, 1], got 1.5",
            ),
            (serde_json::json!({"n": "four"}), "tmas.n", ""),
            (
                serde_json::json!({"method": "best-of-n"}),
                "tmas.method",
                "",
            ),
            (serde_json::json!({"colour": 3}), "tmas.colour", ""),
            (serde_json::json!({"n": null}), "tmas.n", "must not be null"),
            (serde_json::json!({"n": [1]}), "tmas.n", "must be a number"),
            (serde_json::json!({"a.b": 1}), "tmas.a.b", "unknown key"),
            (serde_json::json!([1]), "tmas", "must be an object"),
        ];
        for (ext, param, needle) in cases {
            let err = s
                .asked(MethodName::Tmas, Some(&ext))
                .expect_err(&ext.to_string());
            assert_eq!(err.param, param, "{ext}: {}", err.message);
            assert!(err.message.starts_with(param), "{ext}: {}", err.message);
            assert!(err.message.contains(needle), "{ext}: {}", err.message);
        }
    }

    #[test]
    fn nominal_calls_follow_each_methods_call_graph() {
        let mut m = MethodConfig {
            n: 8,
            m: 8,
            iterations: 1,
            ..MethodConfig::default()
        };
        assert_eq!(nominal_calls(&m), 82, "the paper's 82 calls per iteration");
        m.bank_dedup = crate::config::BankDedup::Embeddings;
        assert_eq!(
            nominal_calls(&m),
            84,
            "and an embeddings call per bank update"
        );
        m.bank_dedup = crate::config::BankDedup::Jaccard;
        m.k = 5;
        m.name = MethodName::MajorityVote;
        assert_eq!(nominal_calls(&m), 5);
        let (n, mm, t) = (3u64, 2u64, 4u64);
        m.n = 3;
        m.m = 2;
        m.iterations = 4;
        let expect = [
            (MethodName::SelfRefine, n * t + n * (t - 1)),
            (MethodName::VerifyRefine, n * t + n * mm * t),
            (MethodName::Pacore, n * t),
            (MethodName::Rse, n * t + n * (t - 1)),
        ];
        for (name, calls) in expect {
            m.name = name;
            assert_eq!(nominal_calls(&m), calls, "{name:?}");
        }
    }
}
