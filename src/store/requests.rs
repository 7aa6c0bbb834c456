//! The method each request of a `tmas serve --out` store ran with. Requests mix methods
//! and keys while `meta.config_toml` holds the served config, so each request's problem
//! keeps its own beside it: `meta` key `request/PROBLEM`, its `[method]` section as JSON,
//! or `{"pass_through": MODEL}` for a request to the served model itself (no method, its
//! one call passed through). This module is the one place that spells the key and
//! (de)serializes the value.

use std::collections::BTreeMap;

use super::StoreError;
use super::read::StoreReader;
use crate::config::MethodConfig;

/// `meta` key prefix of a request's method (`request/req-N-cI`).
const REQUEST_PREFIX: &str = "request/";

/// The `meta` row that records the method problem `problem_id` (a request's choice) ran
/// with.
pub fn request_meta(
    problem_id: &str,
    method: &MethodConfig,
) -> serde_json::Result<(String, String)> {
    Ok((
        format!("{REQUEST_PREFIX}{problem_id}"),
        serde_json::to_string(method)?,
    ))
}

/// The `meta` row of problem `problem_id`, a choice of a request to the served model
/// `model` itself.
pub fn pass_through_meta(problem_id: &str, model: &str) -> serde_json::Result<(String, String)> {
    Ok((
        format!("{REQUEST_PREFIX}{problem_id}"),
        serde_json::to_string(&PassThrough {
            pass_through: model.to_string(),
        })?,
    ))
}

/// The stored form of [`RequestMethod::PassThrough`].
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PassThrough {
    pass_through: String,
}

/// How a request's stored method reads back.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestMethod {
    /// The `[method]` section the request's choice ran with.
    Ran(MethodConfig),
    /// The request asked for the served model itself: no method, one call.
    PassThrough { model: String },
    /// The stored keys are not a `[method]` section this `tmas` reads (a newer one wrote
    /// them): why.
    Unreadable(String),
}

impl RequestMethod {
    /// What the request ran, in a word: the method's name, `plain model` or `unreadable`.
    pub fn kind(&self) -> &str {
        match self {
            RequestMethod::Ran(method) => method.name.as_str(),
            RequestMethod::PassThrough { .. } => "plain model",
            RequestMethod::Unreadable(_) => "unreadable",
        }
    }

    /// The distinct kinds of `requests`, in order, e.g. `majority-vote, plain model, tmas`
    /// (a server's requests mix methods: the served config's own says little).
    pub fn kinds<'a>(requests: impl IntoIterator<Item = &'a RequestMethod>) -> String {
        let kinds: std::collections::BTreeSet<&str> =
            requests.into_iter().map(RequestMethod::kind).collect();
        kinds.into_iter().collect::<Vec<_>>().join(", ")
    }

    fn decode(json: &str) -> Self {
        match serde_json::from_str(json) {
            Ok(method) => RequestMethod::Ran(method),
            Err(e) => match serde_json::from_str::<PassThrough>(json) {
                Ok(p) => RequestMethod::PassThrough {
                    model: p.pass_through,
                },
                Err(_) => {
                    RequestMethod::Unreadable(format!("the stored method does not read: {e}"))
                }
            },
        }
    }
}

impl StoreReader {
    /// Each request's method, by problem id: empty for a store that is not a server's.
    pub fn request_methods(&self) -> Result<BTreeMap<String, RequestMethod>, StoreError> {
        let what = "reading the requests' methods";
        let conn = self.connection();
        let mut stmt = conn
            .prepare("SELECT key, value FROM meta WHERE substr(key, 1, ?1) = ?2")
            .map_err(|e| self.sql_error(what, e))?;
        let rows = stmt
            .query_map(
                rusqlite::params![REQUEST_PREFIX.len() as i64, REQUEST_PREFIX],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .map_err(|e| self.sql_error(what, e))?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (key, value) = row.map_err(|e| self.sql_error(what, e))?;
            if let Some(problem) = key.strip_prefix(REQUEST_PREFIX) {
                out.insert(problem.to_string(), RequestMethod::decode(&value));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MethodName;
    use crate::store::{Fact, RunStore};

    #[tokio::test]
    async fn a_requests_method_reads_back_as_it_was_stored_and_other_meta_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        let method = MethodConfig {
            name: MethodName::VerifyRefine,
            n: 3,
            m: 2,
            iterations: 4,
            ..MethodConfig::default()
        };
        let row = request_meta("req-0-c1", &method).unwrap();
        assert_eq!(row.0, "request/req-0-c1");
        store
            .write(Fact::Meta(vec![
                row,
                pass_through_meta("req-2-c0", "tmas-sim").unwrap(),
                (
                    "request/req-1-c0".into(),
                    "{\"name\": \"from-the-future\"}".into(),
                ),
                ("requested_by".into(), "not a request".into()),
            ]))
            .await
            .unwrap();
        let reader = StoreReader::open_read_only(store.path()).unwrap();
        let methods = reader.request_methods().unwrap();
        assert_eq!(methods.len(), 3, "{methods:?}");
        assert_eq!(methods["req-0-c1"], RequestMethod::Ran(method));
        assert_eq!(
            methods["req-2-c0"],
            RequestMethod::PassThrough {
                model: "tmas-sim".into()
            }
        );
        assert!(
            matches!(&methods["req-1-c0"], RequestMethod::Unreadable(why) if why.contains("from-the-future")),
            "{methods:?}"
        );
    }

    #[test]
    fn a_servers_requests_are_named_by_their_distinct_kinds() {
        let ran = |name| {
            RequestMethod::Ran(MethodConfig {
                name,
                ..MethodConfig::default()
            })
        };
        let requests = [
            ran(MethodName::Tmas),
            RequestMethod::PassThrough { model: "m".into() },
            ran(MethodName::MajorityVote),
            ran(MethodName::Tmas),
        ];
        assert_eq!(
            RequestMethod::kinds(&requests),
            "majority-vote, plain model, tmas"
        );
        assert_eq!(RequestMethod::kinds(&[]), "");
    }
}
