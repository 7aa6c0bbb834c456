//! The pages: each reads what it shows from one run's store (through [`Run`]) and fills
//! a template of `templates/`. Every model text goes through the template's escaping;
//! only the chart, SVG that plotters wrote with its texts escaped, is inserted as is.

mod calls;
mod compare;
mod overview;
mod problem;
mod problems;

use askama::Template;

use super::paths::RunPage;
use super::run::{ProblemSummary, Run, RunSummary};
use crate::engine::accounting::ProblemState;
use crate::store::requests::RequestMethod;

pub use calls::{CallsQuery, calls_page};
pub use compare::{CompareQuery, compare_page};
pub use overview::{analyses_page, run_page, runs_list};
pub use problem::{banks_page, candidate_page, problem_page};
pub use problems::{ProblemsQuery, problems_page};

/// How many rows a list page shows at most.
pub const PAGE_ROWS: usize = 100;

/// A page that does not exist: an unknown run, problem, candidate or file name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// Where a page is shown: on the server (forms, other runs) or in a static export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub static_export: bool,
}

pub struct Head {
    pub title: String,
    /// (href, text) of the links above the title.
    pub crumbs: Vec<(String, String)>,
}

impl Head {
    pub(super) fn of_run(
        run: &Run,
        mode: Mode,
        title: String,
        extra: Vec<(String, String)>,
    ) -> Self {
        let mut crumbs = Vec::new();
        if !mode.static_export {
            crumbs.push(("../../".to_string(), "runs".to_string()));
        }
        crumbs.push(("index.html".to_string(), run.entry.label.clone()));
        crumbs.extend(extra);
        Head { title, crumbs }
    }
}

/// A trace id as a page shows it: linked to the Jaeger UI `--jaeger-url` names, if any.
pub struct TraceView {
    pub id: String,
    pub href: Option<String>,
}

pub(super) fn trace_view(run: &Run, id: &str) -> TraceView {
    TraceView {
        id: id.to_string(),
        href: run.jaeger.as_ref().map(|j| j.trace(id)),
    }
}

pub(super) fn percent(share: f64) -> String {
    format!("{:.1}", share * 100.0)
}

pub(super) fn state_name(state: ProblemState) -> &'static str {
    match state {
        ProblemState::Complete => "complete",
        ProblemState::Degraded => "degraded",
        ProblemState::Failed => "failed",
        ProblemState::Unfinished => "unfinished",
    }
}

pub(super) fn problem_href(p: &ProblemSummary) -> String {
    RunPage::Problem(p.problem.ordinal).file_name()
}

pub(super) fn branch_name(b: crate::method::result::Branch) -> &'static str {
    match b {
        crate::method::result::Branch::Exploit => "exploit",
        crate::method::result::Branch::Explore => "explore",
    }
}

pub(super) fn candidate_status_name(s: crate::method::result::CandidateStatus) -> &'static str {
    use crate::method::result::CandidateStatus as S;
    match s {
        S::Complete => "complete",
        S::SummaryFailed => "summary failed",
        S::SolutionFailed => "solution failed",
    }
}

pub(super) fn head_of(text: &str, chars: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(chars).collect();
    if line.chars().count() > chars || text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        out.push('…');
    }
    out
}

/// A request's method as the pages show it (`tmas n=4 m=2 iterations=3 epsilon=0.2`), or
/// `None` for a problem that is not a request's; also the whole `[method]` section (JSON)
/// it ran with.
pub(super) struct MethodShown {
    pub short: String,
    pub keys: String,
}

pub(super) fn request_method(s: &RunSummary, problem_id: &str) -> Option<MethodShown> {
    Some(match s.requests.get(problem_id)? {
        RequestMethod::Ran(method) => {
            let mut short = method.name.as_str().to_string();
            for (key, value) in method.shape() {
                short.push_str(&format!(" {key}={value}"));
            }
            MethodShown {
                short,
                keys: serde_json::to_string_pretty(method).unwrap_or_default(),
            }
        }
        RequestMethod::PassThrough { model } => MethodShown {
            short: format!("{model} (plain model, passed through)"),
            keys: "none: the conversation went to the served model as it was, in one call".into(),
        },
        RequestMethod::Unreadable(why) => MethodShown {
            short: "(unreadable)".into(),
            keys: why.clone(),
        },
    })
}

pub(super) fn lookup_problem(s: &RunSummary, ordinal: i64) -> anyhow::Result<&ProblemSummary> {
    s.problem_by_ordinal(ordinal)
        .ok_or_else(|| NotFound(format!("this run has no problem number {ordinal}")).into())
}

// --------------------------------------------------------------------------- message

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    head: Head,
    message: String,
}

/// A page saying what went wrong (a 404's or a 500's body).
pub fn message_page(title: &str, message: &str) -> String {
    MessagePage {
        head: Head {
            title: title.to_string(),
            crumbs: Vec::new(),
        },
        message: message.to_string(),
    }
    .render()
    .unwrap_or_else(|_| "tmas view: page could not be rendered".to_string())
}
