//! The runs list and a run's page: status, accounting, Pass@1 and its chart, tokens per role.

use std::sync::Arc;
use std::time::Duration;

use askama::Template;

use super::super::analyses::{Rendered, Section, Shown};
use super::super::run::Run;
use super::{Head, Mode, percent, problem_href};
use crate::engine::accounting::ProblemState;
use crate::role::Role;
use crate::store::requests::RequestMethod;

// ---------------------------------------------------------------------------- runs list

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    head: Head,
    runs: Vec<RunRow>,
}

struct RunRow {
    name: String,
    label: String,
    dir: String,
    status: String,
    method: String,
    problems: usize,
    done: usize,
    iterations: String,
}

pub fn runs_list(runs: &[std::sync::Arc<Run>]) -> anyhow::Result<String> {
    let rows = runs
        .iter()
        .map(|run| {
            let (status, method, problems, done, iterations) = match run.summary() {
                Ok(s) => (
                    s.status.clone(),
                    if s.requests.is_empty() {
                        s.method.clone()
                    } else {
                        format!("served: {}", RequestMethod::kinds(s.requests.values()))
                    },
                    s.problems.len(),
                    s.problems
                        .iter()
                        .filter(|p| p.problem.status == "done")
                        .count(),
                    s.iterations.to_string(),
                ),
                Err(e) => (format!("{e:#}"), String::new(), 0, 0, String::new()),
            };
            RunRow {
                name: run.entry.name.clone(),
                label: run.entry.label.clone(),
                dir: run.entry.root.display().to_string(),
                status,
                method,
                problems,
                done,
                iterations,
            }
        })
        .collect();
    Ok(RunsPage {
        head: Head {
            title: "runs".into(),
            crumbs: Vec::new(),
        },
        runs: rows,
    }
    .render()?)
}

// ------------------------------------------------------------------------------ a run

#[derive(Template)]
#[template(path = "run.html")]
struct RunPageT {
    head: Head,
    live: bool,
    status: String,
    done: u64,
    total: u64,
    iterations_reached: u64,
    iterations_total: u64,
    calls: u64,
    accounting: String,
    degraded: Vec<(String, String)>,
    table: Vec<(usize, String, String, usize, usize, usize, u64)>,
    chart: Option<String>,
    usage: Vec<(String, u64, u64, u64, u64, String)>,
    analyses: AnalysesPart,
}

pub fn run_page(run: &Run, mode: Mode) -> anyhow::Result<String> {
    let s = run.summary()?;
    let live = run.live()?;
    let degraded = s
        .problems
        .iter()
        .filter(|p| p.state == ProblemState::Degraded)
        .map(|p| (problem_href(p), p.problem.problem_id.clone()))
        .collect();
    let table = s
        .table
        .rows
        .iter()
        .map(|r| {
            let ci = r
                .interval_95()
                .map(|i| format!("{}–{}", percent(i.lo), percent(i.hi)))
                .unwrap_or_default();
            (
                r.iteration,
                // No problem counted in the row: there is no figure (not 0).
                if r.problems == 0 {
                    "–".to_string()
                } else {
                    percent(r.pass_at_1)
                },
                ci,
                r.problems,
                r.candidates,
                r.no_answer,
                r.calls_lost,
            )
        })
        .collect();
    let usage = s
        .usage
        .iter()
        .map(|u| {
            let href = match (mode.static_export, Role::from_label(&u.role)) {
                (false, Some(role)) => format!("calls.html?role={}", role.as_str()),
                _ => "calls.html".to_string(),
            };
            (
                u.role.clone(),
                u.calls,
                u.failed,
                u.prompt_tokens,
                u.completion_tokens,
                href,
            )
        })
        .collect();
    Ok(RunPageT {
        head: Head::of_run(run, mode, run.entry.label.clone(), Vec::new()),
        // A static export is a snapshot: nothing to poll.
        live: !mode.static_export && live.status == "running",
        status: live.status,
        done: live.problems_done,
        total: live.problems_total,
        iterations_reached: live.iterations_reached,
        iterations_total: live.iterations_total,
        calls: live.calls_stored,
        accounting: s.accounting.render_text(),
        degraded,
        table,
        chart: s.chart_svg.clone(),
        usage,
        analyses: analyses_part(run, mode)?,
    }
    .render()?)
}

// ------------------------------------------------------------------------- analyses

/// How long a served page waits for analyses being computed before it shows
/// "computing…" (and its script fetches `analyses.html` until they are there): a run
/// page stays well under a second however large the store.
const ANALYSES_WAIT: Duration = Duration::from_millis(250);

/// The analyses section of the run page (and of `analyses.html`).
struct AnalysesPart {
    /// `ready`, `computing` or `failed`: the section's `data-state`, which the page's
    /// script reads in what it fetches.
    state: &'static str,
    /// Being computed: the page's script fetches them until they are there.
    computing: bool,
    note: String,
    sections: Vec<Section>,
}

fn analyses_part(run: &Run, mode: Mode) -> anyhow::Result<AnalysesPart> {
    // A static export is written once: it waits for them.
    let wait = (!mode.static_export).then_some(ANALYSES_WAIT);
    let of = |r: &Rendered| {
        format!(
            "over the {} judged problem(s) stored: the tables `tmas report` prints and the \
             charts it draws (permutation test seeded 0)",
            r.problems
        )
    };
    let sections = |r: &Arc<Rendered>| r.sections.clone();
    Ok(match run.analyses(wait)? {
        // Tables of nothing and no chart would say less than this.
        Shown::Ready(r) if r.problems == 0 => AnalysesPart {
            state: "ready",
            computing: false,
            note: "No problem is judged yet: the analyses cover the judged (done) problems.".into(),
            sections: Vec::new(),
        },
        Shown::Ready(r) => AnalysesPart {
            state: "ready",
            computing: false,
            note: format!("The paper's analyses {}.", of(&r)),
            sections: sections(&r),
        },
        Shown::Computing { previous: None } => AnalysesPart {
            state: "computing",
            computing: true,
            note: "Computing the paper's analyses… (they appear here when ready)".into(),
            sections: Vec::new(),
        },
        Shown::Computing { previous: Some(r) } => AnalysesPart {
            state: "computing",
            computing: true,
            note: format!(
                "Computing the analyses again with the problems finished since… Shown until \
                 then: the analyses {}.",
                of(&r)
            ),
            sections: sections(&r),
        },
        Shown::Failed(e) => AnalysesPart {
            state: "failed",
            computing: false,
            note: format!("The analyses could not be computed: {e}"),
            sections: Vec::new(),
        },
    })
}

#[derive(Template)]
#[template(path = "analyses.html")]
struct AnalysesPage {
    head: Head,
    analyses: AnalysesPart,
}

/// The analyses alone.
pub fn analyses_page(run: &Run, mode: Mode) -> anyhow::Result<String> {
    Ok(AnalysesPage {
        head: Head::of_run(run, mode, "analyses".into(), Vec::new()),
        analyses: analyses_part(run, mode)?,
    }
    .render()?)
}
