//! The calls table: paged by rowid, filtered by role, status, endpoint, problem, latency,
//! tokens and retries.

use std::collections::HashMap;

use askama::Template;
use serde::Deserialize;

use super::super::paths::{RunPage, encode_query};
use super::super::run::Run;
use super::{Head, Mode, NotFound, PAGE_ROWS, TraceView, head_of, problem_href, trace_view};
use crate::role::Role;
use crate::store::browse::{CallFilter, CallSummary, CallsScan, ScanEnd};
use crate::store::traces::ProblemTrace;

// ----------------------------------------------------------------------------- calls

/// How many stored rows one page request looks at, at most, when it is not one
/// problem's calls: a filter few calls pass stops there and the page says how far it
/// looked, so that no request reads the whole table of a large store.
pub const SCAN_ROWS: i64 = 20_000;

/// The calls page's query.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CallsQuery {
    #[serde(default)]
    pub role: Option<String>,
    /// `ok`, `failed` or empty.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub problem: Option<String>,
    /// Latency bounds in ms (included); text, as a form sends an empty field.
    #[serde(default)]
    pub min_latency: Option<String>,
    #[serde(default)]
    pub max_latency: Option<String>,
    /// Least prompt + completion tokens.
    #[serde(default)]
    pub min_tokens: Option<String>,
    /// `1`: only calls sent more than once (HTTP attempts > 1).
    #[serde(default)]
    pub retried: Option<String>,
    /// Show calls stored after this row.
    #[serde(default)]
    pub after: Option<i64>,
}

#[derive(Template)]
#[template(path = "calls.html")]
struct CallsPage {
    head: Head,
    static_export: bool,
    roles: Vec<(&'static str, bool)>,
    statuses: Vec<(&'static str, &'static str, bool)>,
    endpoint: String,
    problem: String,
    min_latency: String,
    max_latency: String,
    min_tokens: String,
    retried: bool,
    shown: String,
    /// `full`, `stopped` or `complete` ([`ScanEnd`]).
    scan: &'static str,
    rows: Vec<CallRow>,
    first: Option<String>,
    next: Option<String>,
}

struct CallRow {
    rowid: i64,
    key: String,
    href: String,
    role: String,
    ok: &'static str,
    ok_class: &'static str,
    endpoint: String,
    latency: String,
    prompt_tokens: String,
    completion_tokens: String,
    attempts: String,
    error: String,
    problem: String,
    /// The call's trace, when the store recorded its problem's.
    trace: Option<TraceView>,
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A whole number ≥ 0 from the query field `name`, or `None` when it is empty.
fn bound(v: &Option<String>, name: &str) -> anyhow::Result<Option<i64>> {
    match non_empty(v) {
        None => Ok(None),
        Some(text) => match text.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n)),
            _ => Err(NotFound(format!(
                "bad query string: {name} = `{text}` is not a whole number ≥ 0"
            ))
            .into()),
        },
    }
}

impl CallsQuery {
    /// The query's filter fields as `key=value` pairs for a link (empty ones left out),
    /// so that a next page keeps the filter.
    pub fn filter_pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("role", &self.role),
            ("status", &self.status),
            ("endpoint", &self.endpoint),
            ("problem", &self.problem),
            ("min_latency", &self.min_latency),
            ("max_latency", &self.max_latency),
            ("min_tokens", &self.min_tokens),
            ("retried", &self.retried),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, non_empty(value)?.to_string())))
        .collect()
    }
}

/// The calls after `query.after` passing its filter, one page; `next_name` names the
/// next page's link (the server's query string, or the export's next file).
pub fn calls_page(
    run: &Run,
    mode: Mode,
    query: &CallsQuery,
    next_name: &dyn Fn(i64) -> String,
) -> anyhow::Result<(String, Option<i64>)> {
    let s = run.summary()?;
    let role = match non_empty(&query.role) {
        None => None,
        Some(name) => Some(
            Role::from_label(name)
                .ok_or_else(|| {
                    NotFound(format!("unknown role `{name}` (one of: {})", Role::names()))
                })?
                .as_str(),
        ),
    };
    let ok = match non_empty(&query.status) {
        None => None,
        Some("ok") => Some(true),
        Some("failed") => Some(false),
        Some(other) => {
            return Err(NotFound(format!("unknown status `{other}` (ok or failed)")).into());
        }
    };
    let filter = CallFilter {
        role,
        ok,
        endpoint: non_empty(&query.endpoint).map(String::from),
        problem_id: non_empty(&query.problem).map(String::from),
        min_latency_ms: bound(&query.min_latency, "min_latency")?,
        max_latency_ms: bound(&query.max_latency, "max_latency")?,
        min_tokens: bound(&query.min_tokens, "min_tokens")?,
        retried: match non_empty(&query.retried) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => {
                return Err(
                    NotFound(format!("bad query string: retried = `{other}` (1 or 0)")).into(),
                );
            }
        },
    };
    let after = query.after.unwrap_or(0);
    let CallsScan { mut calls, end } =
        run.with_reader(|r| Ok(r.calls_page(&filter, after, PAGE_ROWS + 1, SCAN_ROWS)?))?;
    // A small table: one row per problem and session.
    let mut traces: HashMap<String, Vec<ProblemTrace>> = HashMap::new();
    for t in run.with_reader(|r| Ok(r.problem_traces(filter.problem_id.as_deref())?))? {
        traces.entry(t.problem_id.clone()).or_default().push(t);
    }
    calls.truncate(PAGE_ROWS);
    let filtered = filter != CallFilter::default();
    let shown = scan_note(calls.len(), after, end, filtered);
    let href_of = |c: &CallSummary| match s.problem_by_id(&c.problem_id) {
        Some(p) => match c.candidate {
            Some(candidate) => format!(
                "{}#{}",
                RunPage::Candidate {
                    problem: p.problem.ordinal,
                    iteration: c.iteration,
                    candidate,
                }
                .file_name(),
                encode_query(&c.call_key)
            ),
            None => problem_href(p),
        },
        None => "problems.html".into(),
    };
    let rows = calls
        .iter()
        .map(|c| CallRow {
            rowid: c.rowid,
            key: c.call_key.clone(),
            href: href_of(c),
            role: c.role.clone(),
            ok: if c.ok { "ok" } else { "failed" },
            ok_class: if c.ok { "ok" } else { "bad" },
            endpoint: c.endpoint.clone().unwrap_or_default(),
            latency: c.latency_ms.map(|v| v.to_string()).unwrap_or_default(),
            prompt_tokens: c.prompt_tokens.map(|v| v.to_string()).unwrap_or_default(),
            completion_tokens: c
                .completion_tokens
                .map(|v| v.to_string())
                .unwrap_or_default(),
            attempts: c.attempts.map(|v| v.to_string()).unwrap_or_default(),
            error: match (&c.error_kind, &c.error_message) {
                (Some(k), Some(m)) => format!("{k}: {}", head_of(m, 120)),
                (Some(k), None) => k.clone(),
                _ => String::new(),
            },
            problem: c.problem_id.clone(),
            trace: traces
                .get(&c.problem_id)
                .and_then(|ts| ProblemTrace::of_call(ts, c.completed_at_ms))
                .map(|t| trace_view(run, &t.trace_id)),
        })
        .collect();
    let next_after = match end {
        ScanEnd::Full => calls.last().map(|c| c.rowid),
        ScanEnd::Stopped { upto } => Some(upto),
        ScanEnd::Complete => None,
    };
    let page = CallsPage {
        head: Head::of_run(run, mode, "calls".into(), Vec::new()),
        static_export: mode.static_export,
        roles: Role::ALL
            .iter()
            .map(|r| (r.as_str(), Some(r.as_str()) == role))
            .collect(),
        statuses: vec![
            ("", "any", ok.is_none()),
            ("ok", "answered", ok == Some(true)),
            ("failed", "failed", ok == Some(false)),
        ],
        endpoint: query.endpoint.clone().unwrap_or_default(),
        problem: query.problem.clone().unwrap_or_default(),
        min_latency: filter
            .min_latency_ms
            .map(|v| v.to_string())
            .unwrap_or_default(),
        max_latency: filter
            .max_latency_ms
            .map(|v| v.to_string())
            .unwrap_or_default(),
        min_tokens: filter.min_tokens.map(|v| v.to_string()).unwrap_or_default(),
        retried: filter.retried,
        shown,
        scan: match end {
            ScanEnd::Full => "full",
            ScanEnd::Stopped { .. } => "stopped",
            ScanEnd::Complete => "complete",
        },
        rows,
        first: (after > 0).then(|| next_name(0)),
        next: next_after.map(next_name),
    };
    Ok((page.render()?, next_after))
}

/// What a page says about the calls it shows (`shown` of them, found after row `after`)
/// and those it did not look at: it never says no call passes unless it looked at every
/// call stored after `after`.
fn scan_note(shown: usize, after: i64, end: ScanEnd, filtered: bool) -> String {
    let calls = crate::text::count_of(shown, "call");
    let passing = if filtered { " passing the filter" } else { "" };
    match end {
        ScanEnd::Full => {
            format!("{calls}{passing} stored after row {after}, more on the next page.")
        }
        ScanEnd::Stopped { upto } if shown == 0 => format!(
            "No match in the rows after row {after} up to row {upto} (a page looks at {SCAN_ROWS} \
             rows at most); the calls stored after row {upto} are not looked at yet — the \
             next page looks at them."
        ),
        ScanEnd::Stopped { upto } => format!(
            "{calls}{passing} in the rows after row {after} up to row {upto} (a page looks at \
             {SCAN_ROWS} rows at most); the calls stored after row {upto} are not looked at \
             yet — the next page looks at them."
        ),
        ScanEnd::Complete if shown == 0 && after == 0 => {
            format!("No call stored{passing}.")
        }
        ScanEnd::Complete if shown == 0 => format!("No call stored after row {after}{passing}."),
        ScanEnd::Complete => format!(
            "{calls}{passing} stored after row {after}: every call stored after it was looked at."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_says_no_call_passes_only_when_it_looked_at_every_call() {
        let stopped = scan_note(0, 0, ScanEnd::Stopped { upto: 20_000 }, true);
        assert!(
            stopped.starts_with("No match in the rows after row 0 up to row 20000"),
            "{stopped}"
        );
        assert!(stopped.contains("not looked at yet"), "{stopped}");
        assert!(!stopped.contains("No call"), "{stopped}");
        assert_eq!(
            scan_note(0, 0, ScanEnd::Complete, true),
            "No call stored passing the filter."
        );
        assert_eq!(
            scan_note(0, 40, ScanEnd::Complete, true),
            "No call stored after row 40 passing the filter."
        );
        let some = scan_note(3, 40, ScanEnd::Stopped { upto: 20_040 }, true);
        assert!(
            some.starts_with("3 calls passing the filter in the rows after row 40"),
            "{some}"
        );
        assert!(scan_note(100, 0, ScanEnd::Full, false).ends_with("more on the next page."));
    }
}
