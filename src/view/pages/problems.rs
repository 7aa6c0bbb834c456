//! The problems grid: problems × iterations, filtered, sorted and paged.

use askama::Template;
use serde::Deserialize;

use super::super::paths::encode_query;
use super::super::run::{Cell, ProblemSummary, Run, RunSummary};
use super::{Head, Mode, NotFound, PAGE_ROWS, percent, problem_href, request_method, state_name};
use crate::engine::accounting::ProblemState;

// ---------------------------------------------------------------------- problems grid

/// The problems page's query: which problems, in what order, which page.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProblemsQuery {
    #[serde(default)]
    pub filter: Option<String>,
    #[serde(default)]
    pub sort: Option<String>,
    /// Another run, for the filter "differs from".
    #[serde(default)]
    pub other: Option<String>,
    #[serde(default)]
    pub page: Option<usize>,
}

impl ProblemsQuery {
    /// Whether the filter compares with another run (which is read only then).
    pub fn compares(&self) -> bool {
        parse_choice(&FILTERS, self.filter.as_deref(), "filter")
            .is_ok_and(|f| f == ProblemFilter::Differs)
    }
}

/// Which problems the grid shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProblemFilter {
    All,
    NeverSolved,
    /// First solved after the first iteration.
    SolvedLate,
    Degraded,
    /// Solved in one run and not in the other.
    Differs,
}

const FILTERS: [(ProblemFilter, &str, &str); 5] = [
    (ProblemFilter::All, "all", "all problems"),
    (ProblemFilter::NeverSolved, "never", "never solved"),
    (
        ProblemFilter::SolvedLate,
        "late",
        "solved late (first after iteration 0)",
    ),
    (ProblemFilter::Degraded, "degraded", "degraded or failed"),
    (
        ProblemFilter::Differs,
        "differs",
        "solved in one run, not the other",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProblemSort {
    Dataset,
    Id,
    FinalShare,
    FirstSolved,
}

const SORTS: [(ProblemSort, &str, &str); 4] = [
    (ProblemSort::Dataset, "dataset", "dataset order"),
    (ProblemSort::Id, "id", "id"),
    (ProblemSort::FinalShare, "final", "final share correct"),
    (ProblemSort::FirstSolved, "first", "first solved"),
];

fn parse_choice<T: Copy>(
    table: &[(T, &str, &str)],
    value: Option<&str>,
    what: &str,
) -> anyhow::Result<T> {
    match value {
        None | Some("") => Ok(table[0].0),
        Some(v) => table
            .iter()
            .find(|(_, name, _)| *name == v)
            .map(|(t, _, _)| *t)
            .ok_or_else(|| {
                NotFound(format!(
                    "unknown {what} `{v}` (one of: {})",
                    table
                        .iter()
                        .map(|(_, n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into()
            }),
    }
}

#[derive(Template)]
#[template(path = "problems.html")]
struct ProblemsPage {
    head: Head,
    static_export: bool,
    filters: Vec<(String, String, bool)>,
    sorts: Vec<(String, String, bool)>,
    others: Vec<(String, String, bool)>,
    shown: String,
    iterations: Vec<usize>,
    /// A server's store: each row names its request's method.
    requests: bool,
    rows: Vec<GridRow>,
    prev: Option<String>,
    next: Option<String>,
}

struct GridRow {
    ordinal: i64,
    id: String,
    href: String,
    state: &'static str,
    first_solved: String,
    /// The request's method and its shape (a server's store only).
    method: String,
    cells: Vec<GridCell>,
}

struct GridCell {
    class: &'static str,
    text: String,
    title: String,
    explore: u32,
    failed: u32,
    lost: u64,
}

fn grid_cell(c: &Cell) -> GridCell {
    let (class, text) = match c.share() {
        None if c.candidates == 0 && c.lost == 0 => ("cx", String::new()),
        None => ("cx", "–".into()),
        Some(s) if s >= 0.5 => ("c2", format!("{}/{}", c.correct, c.counted)),
        Some(s) if s > 0.0 => ("c1", format!("{}/{}", c.correct, c.counted)),
        Some(_) => ("c0", format!("{}/{}", c.correct, c.counted)),
    };
    GridCell {
        class,
        text,
        title: format!(
            "Pass@1 {} · {} candidates, {} explore, {} failed solutions, {} calls lost",
            c.share().map_or("–".into(), percent),
            c.candidates,
            c.explore,
            c.solution_failed,
            c.lost
        ),
        explore: c.explore,
        failed: c.solution_failed,
        lost: c.lost,
    }
}

/// `other`: the run the filter "differs" compares with, and the runs to choose from.
pub fn problems_page(
    run: &Run,
    mode: Mode,
    query: &ProblemsQuery,
    other: Option<&RunSummary>,
    others: &[(String, String)],
) -> anyhow::Result<String> {
    let s = run.summary()?;
    let filter = parse_choice(&FILTERS, query.filter.as_deref(), "filter")?;
    let sort = parse_choice(&SORTS, query.sort.as_deref(), "sort")?;
    let solved_in_other = |p: &ProblemSummary| {
        other.map(|o| {
            o.problem_by_id(&p.problem.problem_id)
                .is_some_and(|q| q.first_solved.is_some())
        })
    };
    if filter == ProblemFilter::Differs && other.is_none() {
        return Err(NotFound(
            "the filter `differs` needs another run: choose one with `other`".into(),
        )
        .into());
    }
    let mut picked: Vec<&ProblemSummary> = s
        .problems
        .iter()
        .filter(|p| match filter {
            ProblemFilter::All => true,
            ProblemFilter::NeverSolved => p.first_solved.is_none(),
            ProblemFilter::SolvedLate => p.first_solved.is_some_and(|t| t > 0),
            ProblemFilter::Degraded => {
                matches!(p.state, ProblemState::Degraded | ProblemState::Failed)
            }
            ProblemFilter::Differs => {
                solved_in_other(p).is_some_and(|o| o != p.first_solved.is_some())
            }
        })
        .collect();
    match sort {
        ProblemSort::Dataset => {}
        ProblemSort::Id => picked.sort_by(|a, b| a.problem.problem_id.cmp(&b.problem.problem_id)),
        ProblemSort::FinalShare => picked.sort_by(|a, b| {
            b.final_share()
                .unwrap_or(-1.0)
                .total_cmp(&a.final_share().unwrap_or(-1.0))
        }),
        ProblemSort::FirstSolved => picked.sort_by_key(|p| p.first_solved.unwrap_or(u32::MAX)),
    }
    let total = picked.len();
    let (page, rows_on_page) = if mode.static_export {
        (0, total.max(1))
    } else {
        (query.page.unwrap_or(0), PAGE_ROWS)
    };
    let start = page.saturating_mul(rows_on_page).min(total);
    let end = (start + rows_on_page).min(total);
    let link = |page: usize| {
        let mut q = format!("problems.html?page={page}");
        for (key, value) in [
            ("filter", &query.filter),
            ("sort", &query.sort),
            ("other", &query.other),
        ] {
            if let Some(v) = value {
                q.push_str(&format!("&{key}={}", encode_query(v)));
            }
        }
        q
    };
    let rows = picked[start..end]
        .iter()
        .map(|p| GridRow {
            ordinal: p.problem.ordinal,
            id: p.problem.problem_id.clone(),
            href: problem_href(p),
            state: state_name(p.state),
            first_solved: p.first_solved.map(|t| t.to_string()).unwrap_or_default(),
            method: request_method(&s, &p.problem.problem_id).map_or(String::new(), |m| m.short),
            cells: p.cells.iter().map(grid_cell).collect(),
        })
        .collect();
    let current_filter = FILTERS
        .iter()
        .find(|f| f.0 == filter)
        .map_or("all", |f| f.1);
    let current_sort = SORTS
        .iter()
        .find(|f| f.0 == sort)
        .map_or("dataset", |f| f.1);
    Ok(ProblemsPage {
        head: Head::of_run(run, mode, "problems".into(), Vec::new()),
        static_export: mode.static_export,
        filters: choices(&FILTERS, current_filter),
        sorts: choices(&SORTS, current_sort),
        others: others
            .iter()
            .map(|(name, label)| {
                (
                    name.clone(),
                    label.clone(),
                    query.other.as_deref() == Some(name),
                )
            })
            .collect(),
        shown: format!(
            "{} of {} problems shown (rows {}–{})",
            end - start,
            total,
            if total == 0 { 0 } else { start + 1 },
            end
        ),
        iterations: (0..s.iterations).collect(),
        requests: !s.requests.is_empty(),
        rows,
        prev: (page > 0).then(|| link(page - 1)),
        next: (end < total).then(|| link(page + 1)),
    }
    .render()?)
}

/// (value, label, selected) of each choice of a select.
fn choices<T>(table: &[(T, &str, &str)], current: &str) -> Vec<(String, String, bool)> {
    table
        .iter()
        .map(|(_, n, label)| (n.to_string(), label.to_string(), *n == current))
        .collect()
}
