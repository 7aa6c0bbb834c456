//! The pages: each reads what it shows from one run's store (through [`Run`]) and fills
//! a template of `templates/`. Every model text goes through the template's escaping;
//! only the chart, SVG that plotters wrote with its texts escaped, is inserted as is.

use std::collections::BTreeSet;

use askama::Template;
use serde::Deserialize;

use super::paths::{RunPage, encode_query};
use super::reply::{Section, prompt_sections, split_think};
use super::run::{Cell, ProblemSummary, Run, RunSummary};
use crate::engine::accounting::ProblemState;
use crate::role::Role;
use crate::store::browse::{CallFilter, CallSummary};

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
    fn of_run(run: &Run, mode: Mode, title: String, extra: Vec<(String, String)>) -> Self {
        let mut crumbs = Vec::new();
        if !mode.static_export {
            crumbs.push(("../../".to_string(), "runs".to_string()));
        }
        crumbs.push(("index.html".to_string(), run.entry.label.clone()));
        crumbs.extend(extra);
        Head { title, crumbs }
    }
}

fn percent(share: f64) -> String {
    format!("{:.1}", share * 100.0)
}

fn state_name(state: ProblemState) -> &'static str {
    match state {
        ProblemState::Complete => "complete",
        ProblemState::Degraded => "degraded",
        ProblemState::Failed => "failed",
        ProblemState::Unfinished => "unfinished",
    }
}

fn problem_href(p: &ProblemSummary) -> String {
    RunPage::Problem(p.problem.ordinal).file_name()
}

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
                    s.method.clone(),
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
                percent(r.pass_at_1),
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
    }
    .render()?)
}

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
        Some(s) if s >= 0.5 => ("c2", format!("{}/{}", c.correct, c.judged)),
        Some(s) if s > 0.0 => ("c1", format!("{}/{}", c.correct, c.judged)),
        Some(_) => ("c0", format!("{}/{}", c.correct, c.judged)),
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

// ------------------------------------------------------------------------- a problem

#[derive(Template)]
#[template(path = "problem.html")]
struct ProblemPage {
    head: Head,
    status: String,
    state: &'static str,
    error: Option<String>,
    question: String,
    reference: String,
    banks_href: String,
    calls_href: Option<String>,
    pending_note: String,
    iterations: Vec<IterationView>,
}

struct IterationView {
    t: u32,
    headline: String,
    candidates: Vec<CandidateRow>,
}

struct CandidateRow {
    candidate: u32,
    href: String,
    branch: &'static str,
    mode: String,
    status: &'static str,
    scores: String,
    mean: String,
    answer: String,
    judge: String,
    score: String,
    score_class: &'static str,
    summary_head: String,
    summary: String,
}

fn branch_name(b: crate::method::result::Branch) -> &'static str {
    match b {
        crate::method::result::Branch::Exploit => "exploit",
        crate::method::result::Branch::Explore => "explore",
    }
}

fn candidate_status_name(s: crate::method::result::CandidateStatus) -> &'static str {
    use crate::method::result::CandidateStatus as S;
    match s {
        S::Complete => "complete",
        S::SummaryFailed => "summary failed",
        S::SolutionFailed => "solution failed",
    }
}

fn head_of(text: &str, chars: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(chars).collect();
    if line.chars().count() > chars || text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        out.push('…');
    }
    out
}

fn lookup_problem(s: &RunSummary, ordinal: i64) -> anyhow::Result<&ProblemSummary> {
    s.problem_by_ordinal(ordinal)
        .ok_or_else(|| NotFound(format!("this run has no problem number {ordinal}")).into())
}

pub fn problem_page(run: &Run, mode: Mode, ordinal: i64) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let candidates = run.with_reader(|r| Ok(r.problem_candidates(&id, None)?))?;
    let mut iterations: Vec<IterationView> = Vec::new();
    for c in candidates {
        if iterations.last().is_none_or(|it| it.t != c.iteration) {
            let cell = p.cells.get(c.iteration as usize);
            iterations.push(IterationView {
                t: c.iteration,
                headline: cell.map_or(String::new(), |cell| {
                    format!(
                        "{} of {} judged correct, {} explore",
                        cell.correct, cell.judged, cell.explore
                    )
                }),
                candidates: Vec::new(),
            });
        }
        let verdict = c.verdict.as_ref();
        let summary = c.summary.clone().unwrap_or_default();
        let row = CandidateRow {
            candidate: c.candidate,
            href: RunPage::Candidate {
                problem: ordinal,
                iteration: c.iteration,
                candidate: c.candidate,
            }
            .file_name(),
            branch: branch_name(c.branch),
            mode: c.mode.clone(),
            status: candidate_status_name(c.status),
            scores: c
                .scores
                .iter()
                .map(|s| format!("{s}"))
                .collect::<Vec<_>>()
                .join(" "),
            mean: c.average_score.map_or(String::new(), |m| format!("{m:.2}")),
            answer: verdict
                .and_then(|v| v.answer.clone())
                .unwrap_or_else(|| "(none)".into()),
            judge: verdict.map_or(String::new(), |v| {
                format!("{} {}", v.rule_outcome, v.llm_json)
            }),
            score: verdict.map_or(String::new(), |v| format!("{:.2}", v.score)),
            score_class: match verdict {
                Some(v) if crate::eval::judge::is_correct(v.score) => "ok",
                Some(_) => "bad",
                None => "",
            },
            summary_head: head_of(&summary, 80),
            summary,
        };
        if let Some(it) = iterations.last_mut() {
            it.candidates.push(row);
        }
    }
    let pending_note = if p.problem.status == "done" {
        "No candidates stored.".to_string()
    } else {
        "Candidates appear here once the problem is judged; its calls so far are in the calls table."
            .to_string()
    };
    Ok(ProblemPage {
        head: Head::of_run(
            run,
            mode,
            id.clone(),
            vec![("problems.html".into(), "problems".into())],
        ),
        status: p.problem.status.clone(),
        state: state_name(p.state),
        error: p.problem.error.clone(),
        question: p.problem.question.clone(),
        reference: p.problem.reference_answer.clone(),
        banks_href: RunPage::Banks(ordinal).file_name(),
        calls_href: (!mode.static_export)
            .then(|| format!("calls.html?problem={}", encode_query(&id))),
        pending_note,
        iterations,
    }
    .render()?)
}

// ------------------------------------------------------------------------ a candidate

#[derive(Template)]
#[template(path = "candidate.html")]
struct CandidatePage {
    head: Head,
    branch: &'static str,
    mode: String,
    status: &'static str,
    mean: String,
    answer: String,
    judge: String,
    calls: Vec<CallView>,
    /// (index, status, score, attempts, text, first line).
    verifications: Vec<(u32, String, String, u32, String, String)>,
}

struct CallView {
    anchor: String,
    role: String,
    key: String,
    meta: String,
    prompt: Option<Vec<Section>>,
    prompt_bytes: usize,
    prompt_note: String,
    think: Option<String>,
    reply: Option<String>,
    error: Option<String>,
}

fn call_meta(c: &CallSummary) -> String {
    let mut parts = vec![if c.ok {
        "answered".to_string()
    } else {
        "failed".to_string()
    }];
    if let Some(e) = &c.endpoint {
        parts.push(format!("endpoint {e}"));
    }
    if let Some(l) = c.latency_ms {
        parts.push(format!("{l} ms"));
    }
    if let (Some(p), Some(q)) = (c.prompt_tokens, c.completion_tokens) {
        parts.push(format!("{p} prompt + {q} completion tokens"));
    }
    if let Some(a) = c.attempts {
        parts.push(format!("{a} HTTP attempt(s)"));
    }
    if let Some(f) = &c.finish_reason {
        parts.push(format!("finish {f}"));
    }
    parts.join(" · ")
}

pub fn candidate_page(
    run: &Run,
    mode: Mode,
    ordinal: i64,
    iteration: u32,
    candidate: u32,
) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let (view, calls, verifications) = run.with_reader(|r| {
        let view = r
            .problem_candidates(&id, Some((iteration, candidate)))?
            .into_iter()
            .next();
        let mut summaries = r.iteration_calls(&id, iteration, Some(candidate))?;
        // In the order the method makes them: solution, verifications, summary, judge.
        summaries.sort_by_key(|c| {
            (
                Role::from_label(&c.role).map_or(usize::MAX, Role::index),
                c.idx,
                c.attempt,
            )
        });
        let mut seen_prompts: BTreeSet<String> = BTreeSet::new();
        let mut calls = Vec::new();
        for c in summaries {
            let Some((c, texts)) = r.call_with_texts(&c.call_key)? else {
                continue;
            };
            // Calls that share a prompt (the M verifications) show it once.
            let (prompt, prompt_note) = if seen_prompts.insert(texts.prompt_id.clone()) {
                (r.prompt_text(&texts.prompt_id)?, String::new())
            } else {
                (None, "same prompt as the call above".to_string())
            };
            let (think, reply) = match texts.content.as_deref() {
                Some(content) => {
                    let (think, rest) = split_think(content);
                    let think = match (think, texts.reasoning.clone()) {
                        (Some(t), _) => Some(t.to_string()),
                        (None, r) => r,
                    };
                    (think, Some(rest.to_string()))
                }
                None => (texts.reasoning.clone(), None),
            };
            calls.push(CallView {
                anchor: encode_query(&c.call_key),
                role: c.role.clone(),
                key: c.call_key.clone(),
                meta: call_meta(&c),
                prompt_bytes: prompt.as_ref().map_or(0, String::len),
                prompt: prompt.as_deref().map(prompt_sections),
                prompt_note,
                think,
                reply,
                error: (!c.ok).then(|| {
                    format!(
                        "{}: {}",
                        c.error_kind.clone().unwrap_or_default(),
                        c.error_message.clone().unwrap_or_default()
                    )
                }),
            });
        }
        let verifications = r.candidate_verifications(&id, iteration, candidate)?;
        Ok((view, calls, verifications))
    })?;
    if view.is_none() && calls.is_empty() {
        return Err(NotFound(format!(
            "problem {id} has no candidate {candidate} at iteration {iteration}"
        ))
        .into());
    }
    let verdict = view.as_ref().and_then(|v| v.verdict.as_ref());
    Ok(CandidatePage {
        head: Head::of_run(
            run,
            mode,
            format!("iteration {iteration}, candidate {candidate}"),
            vec![
                ("problems.html".into(), "problems".into()),
                (RunPage::Problem(ordinal).file_name(), id.clone()),
            ],
        ),
        branch: view.as_ref().map_or("", |v| branch_name(v.branch)),
        mode: view.as_ref().map_or(String::new(), |v| v.mode.clone()),
        status: view
            .as_ref()
            .map_or("not judged yet", |v| candidate_status_name(v.status)),
        mean: view
            .as_ref()
            .and_then(|v| v.average_score)
            .map_or(String::new(), |m| format!("{m:.2}")),
        answer: verdict
            .and_then(|v| v.answer.clone())
            .unwrap_or_else(|| "(none)".into()),
        judge: verdict.map_or(String::new(), |v| {
            format!("{} {} score {:.2}", v.rule_outcome, v.llm_json, v.score)
        }),
        calls,
        verifications: verifications
            .into_iter()
            .map(|v| {
                let text = v.text.unwrap_or_default();
                let first = head_of(&text, 80);
                (
                    v.idx,
                    format!("{:?}", v.status).to_lowercase(),
                    v.score.map_or(String::new(), |s| format!("{s}")),
                    v.attempts,
                    text,
                    first,
                )
            })
            .collect(),
    }
    .render()?)
}

// ----------------------------------------------------------------------------- banks

#[derive(Template)]
#[template(path = "banks.html")]
struct BanksPage {
    head: Head,
    banks: Vec<BankView>,
}

struct BankView {
    name: String,
    growth: String,
    versions: Vec<BankVersionView>,
}

struct BankVersionView {
    version: u32,
    iteration: String,
    size: usize,
    added: Vec<String>,
    removed: Vec<String>,
    kept: usize,
    items: Vec<String>,
    rejected: Vec<(String, String)>,
}

pub fn banks_page(run: &Run, mode: Mode, ordinal: i64) -> anyhow::Result<String> {
    let s = run.summary()?;
    let p = lookup_problem(&s, ordinal)?;
    let id = p.problem.problem_id.clone();
    let versions = run.with_reader(|r| Ok(r.bank_versions(&id)?))?;
    let mut banks: Vec<BankView> = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for (iteration, v) in versions {
        if banks.last().is_none_or(|b| b.name != *v.bank) {
            banks.push(BankView {
                name: v.bank.to_string(),
                growth: String::new(),
                versions: Vec::new(),
            });
            previous.clear();
        }
        let before: BTreeSet<&String> = previous.iter().collect();
        let after: BTreeSet<&String> = v.items.iter().collect();
        let view = BankVersionView {
            version: v.version,
            iteration: iteration.map_or("(initial)".into(), |t| format!("after iteration {t}")),
            size: v.items.len(),
            added: v
                .items
                .iter()
                .filter(|i| !before.contains(i))
                .cloned()
                .collect(),
            removed: previous
                .iter()
                .filter(|i| !after.contains(i))
                .cloned()
                .collect(),
            kept: v.items.iter().filter(|i| before.contains(i)).count(),
            items: v.items.to_vec(),
            rejected: v
                .rejected
                .iter()
                .map(|r| (r.item.clone(), r.reason.clone()))
                .collect(),
        };
        previous = v.items.to_vec();
        if let Some(bank) = banks.last_mut() {
            bank.versions.push(view);
        }
    }
    for bank in &mut banks {
        bank.growth = bank
            .versions
            .iter()
            .map(|v| v.size.to_string())
            .collect::<Vec<_>>()
            .join(" → ");
    }
    Ok(BanksPage {
        head: Head::of_run(
            run,
            mode,
            format!("banks of {id}"),
            vec![
                ("problems.html".into(), "problems".into()),
                (RunPage::Problem(ordinal).file_name(), id.clone()),
            ],
        ),
        banks,
    }
    .render()?)
}

// ----------------------------------------------------------------------------- calls

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
    shown: String,
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
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
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
    };
    let after = query.after.unwrap_or(0);
    let mut calls = run.with_reader(|r| Ok(r.calls_page(&filter, after, PAGE_ROWS + 1)?))?;
    let more = calls.len() > PAGE_ROWS;
    calls.truncate(PAGE_ROWS);
    let last = calls.last().map(|c| c.rowid);
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
        })
        .collect();
    let next_after = (more && last.is_some()).then(|| last.unwrap_or(0));
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
        shown: format!(
            "{} call(s) stored after row {after}{}.",
            rows_len(&calls),
            if more { ", more on the next page" } else { "" }
        ),
        rows,
        first: (after > 0).then(|| next_name(0)),
        next: next_after.map(next_name),
    };
    Ok((page.render()?, next_after))
}

fn rows_len(calls: &[CallSummary]) -> usize {
    calls.len()
}

// --------------------------------------------------------------------------- compare

/// The compare page's query.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompareQuery {
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    #[serde(default)]
    pub differ: Option<String>,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    head: Head,
    runs: Vec<(String, String)>,
    a: String,
    b: String,
    a_label: String,
    b_label: String,
    differ: bool,
    shown: String,
    rows: Vec<CompareRow>,
}

struct CompareRow {
    id: String,
    differs: bool,
    a_outcome: String,
    b_outcome: String,
    a_href: Option<String>,
    b_href: Option<String>,
    a_cells: String,
    b_cells: String,
}

fn outcome(p: Option<&ProblemSummary>) -> String {
    match p {
        None => "absent".into(),
        Some(p) => match p.first_solved {
            Some(t) => format!("solved (first at {t})"),
            None if p.state == ProblemState::Unfinished => "unfinished".into(),
            None => "never solved".into(),
        },
    }
}

fn cells_line(p: Option<&ProblemSummary>) -> String {
    p.map_or(String::new(), |p| {
        p.cells
            .iter()
            .map(|c| {
                c.share()
                    .map_or("–".into(), |s| format!("{:.0}", s * 100.0))
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

pub fn compare_page(
    a: &Run,
    b: &Run,
    runs: &[(String, String)],
    differ_only: bool,
) -> anyhow::Result<String> {
    let (sa, sb) = (a.summary()?, b.summary()?);
    let mut ids: Vec<&str> = sa
        .problems
        .iter()
        .map(|p| p.problem.problem_id.as_str())
        .collect();
    let in_a: BTreeSet<&str> = ids.iter().copied().collect();
    ids.extend(
        sb.problems
            .iter()
            .map(|p| p.problem.problem_id.as_str())
            .filter(|id| !in_a.contains(id)),
    );
    let mut rows = Vec::new();
    for id in &ids {
        let (pa, pb) = (sa.problem_by_id(id), sb.problem_by_id(id));
        let differs = pa.map(|p| p.first_solved.is_some()) != pb.map(|p| p.first_solved.is_some());
        if differ_only && !differs {
            continue;
        }
        let href = |run: &Run, p: Option<&ProblemSummary>| {
            p.map(|p| format!("r/{}/{}", run.entry.name, problem_href(p)))
        };
        rows.push(CompareRow {
            id: id.to_string(),
            differs,
            a_outcome: outcome(pa),
            b_outcome: outcome(pb),
            a_href: href(a, pa),
            b_href: href(b, pb),
            a_cells: cells_line(pa),
            b_cells: cells_line(pb),
        });
    }
    let differing = ids
        .iter()
        .filter(|id| {
            sa.problem_by_id(id).map(|p| p.first_solved.is_some())
                != sb.problem_by_id(id).map(|p| p.first_solved.is_some())
        })
        .count();
    Ok(ComparePage {
        head: Head {
            title: format!("{} vs {}", a.entry.label, b.entry.label),
            crumbs: vec![("./".into(), "runs".into())],
        },
        runs: runs.to_vec(),
        a: a.entry.name.clone(),
        b: b.entry.name.clone(),
        a_label: a.entry.label.clone(),
        b_label: b.entry.label.clone(),
        differ: differ_only,
        shown: format!(
            "{} problems, {differing} with a different outcome; {} shown",
            ids.len(),
            rows.len()
        ),
        rows,
    }
    .render()?)
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
