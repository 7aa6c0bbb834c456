//! One run as the viewer holds it: a read-only store connection (opened on first use),
//! the run-wide figures every page header needs (cached until the store changes), and
//! the live progress, followed by reading only the calls stored since the last look.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use serde::Serialize;

use super::analyses::{self, AnalysesCache, Shown};
use super::catalog::RunEntry;
use super::tally::CallTally;
use crate::config::FailedCandidates;
use crate::engine::accounting::{Accounting, JudgeUse, ProblemState};
use crate::eval::chart::{Series, pass_at_1_svg};
use crate::eval::judge::{counted_score, is_correct};
use crate::eval::pass_at_1::PassAt1Table;
use crate::method::result::{Branch, CandidateStatus};
use crate::store::StoreReader;
use crate::store::browse::ChangeToken;
use crate::store::export::{is_unfinished, stored_iterations, stored_table};
use crate::store::read::{RoleUsageRow, StoredProblem};
use crate::store::requests::RequestMethod;
use crate::store::schema::{META_CONFIG, META_STATUS};

/// A problem × iteration cell of the problems grid.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// Judged candidates, and how many of them are correct ([`is_correct`]).
    pub judged: u32,
    pub correct: u32,
    /// Sum of the judged candidates' scores.
    pub score_sum: f64,
    pub candidates: u32,
    pub explore: u32,
    /// Candidates whose solution call failed.
    pub solution_failed: u32,
    /// Calls lost at this iteration.
    pub lost: u64,
    /// The candidates Pass@1 counts: the judged ones, and those whose solution call
    /// failed when the run's `judge.failed_candidates` counts them as wrong.
    pub counted: u32,
}

impl Cell {
    /// The problem's Pass@1 at this iteration ([`counted_score`] of each candidate).
    pub fn share(&self) -> Option<f64> {
        (self.counted > 0).then(|| self.score_sum / f64::from(self.counted))
    }
}

/// One problem's row of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct ProblemSummary {
    pub problem: StoredProblem,
    pub state: ProblemState,
    pub cells: Vec<Cell>,
    /// The first iteration with a correct candidate.
    pub first_solved: Option<u32>,
}

impl ProblemSummary {
    /// Share correct at the last iteration it has a result for.
    pub fn final_share(&self) -> Option<f64> {
        self.cells.iter().rev().find_map(Cell::share)
    }
}

/// The run-wide figures (see the module docs).
#[derive(Debug)]
pub struct RunSummary {
    /// `running`, `interrupted`, `completed`, `degraded`, `stopped` (the store's meta), or `unknown`.
    pub status: String,
    pub method: String,
    pub iterations: usize,
    pub problems: Vec<ProblemSummary>,
    pub accounting: Accounting,
    pub table: PassAt1Table,
    pub usage: Vec<RoleUsageRow>,
    /// The Pass@1 chart (`None`: no point to draw yet).
    pub chart_svg: Option<String>,
    /// In a `tmas serve --out` store: each request's method, by problem id (else empty).
    pub requests: BTreeMap<String, RequestMethod>,
}

impl RunSummary {
    pub fn problem_by_ordinal(&self, ordinal: i64) -> Option<&ProblemSummary> {
        self.problems.iter().find(|p| p.problem.ordinal == ordinal)
    }

    pub fn problem_by_id(&self, id: &str) -> Option<&ProblemSummary> {
        self.problems.iter().find(|p| p.problem.problem_id == id)
    }
}

/// What the live poll returns.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LiveStatus {
    pub status: String,
    pub problems_total: u64,
    pub problems_done: u64,
    pub problems_failed: u64,
    /// Iterations started, summed over problems (a done problem counts its T).
    pub iterations_reached: u64,
    pub iterations_total: u64,
    pub calls_stored: u64,
}

#[derive(Debug, Default)]
struct Progress {
    after: i64,
    calls: u64,
    /// Highest iteration seen per problem.
    reached: HashMap<String, u32>,
}

/// How many new calls one poll reads at most (the rest waits for the next poll).
const PROGRESS_BATCH: usize = 50_000;

pub struct Run {
    pub entry: RunEntry,
    /// Where trace ids link to (`tmas view --jaeger-url`).
    pub jaeger: Option<super::JaegerUrl>,
    reader: Mutex<Option<StoreReader>>,
    summary: Mutex<Option<(ChangeToken, Arc<RunSummary>)>>,
    progress: Mutex<Progress>,
    tally: Mutex<CallTally>,
    analyses: Arc<AnalysesCache>,
    /// Slept before each computation of the analyses ([`super::ANALYSES_DELAY_ENV`]).
    analyses_delay: Option<std::time::Duration>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A page that panicked leaves nothing half-written that another could misread.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Run {
    pub fn new(
        entry: RunEntry,
        jaeger: Option<super::JaegerUrl>,
        analyses_delay: Option<std::time::Duration>,
    ) -> Self {
        Self {
            entry,
            jaeger,
            reader: Mutex::new(None),
            summary: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
            tally: Mutex::new(CallTally::default()),
            analyses: Arc::new(AnalysesCache::default()),
            analyses_delay,
        }
    }

    /// Runs `f` on the run's read-only store connection (opened on first use).
    pub fn with_reader<T>(
        &self,
        f: impl FnOnce(&StoreReader) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut guard = lock(&self.reader);
        if guard.is_none() {
            let db = self.entry.db();
            if !db.is_file() {
                return Err(NotStarted(self.entry.label.clone()).into());
            }
            *guard = Some(StoreReader::open_read_only(&db)?);
        }
        let reader = guard.as_ref().context("the store connection is open")?;
        f(reader)
    }

    /// The run-wide figures, computed again only when the store changed.
    pub fn summary(&self) -> anyhow::Result<Arc<RunSummary>> {
        let token = self.with_reader(|r| Ok(r.change_token()?))?;
        if let Some((cached, summary)) = lock(&self.summary).as_ref()
            && *cached == token
        {
            return Ok(summary.clone());
        }
        let summary = Arc::new(self.with_reader(|r| {
            let mut tally = lock(&self.tally);
            tally.update(r, token.last_call)?;
            build_summary(r, &tally, &self.entry.label)
        })?);
        *lock(&self.summary) = Some((token, summary.clone()));
        Ok(summary)
    }

    /// The paper's analyses of the judged records stored now, if they are computed
    /// within `wait` (`None`: however long it takes); see [`super::analyses`]. The
    /// computation reads the store on a connection of its own, so the pages' connection
    /// is never held while it runs.
    pub fn analyses(&self, wait: Option<std::time::Duration>) -> anyhow::Result<Shown> {
        let now = self.with_reader(|r| Ok(r.records_token()?))?;
        let db = self.entry.db();
        let label = self.entry.label.clone();
        let delay = self.analyses_delay;
        Ok(self.analyses.get(now, wait, move || {
            if let Some(delay) = delay {
                std::thread::sleep(delay);
            }
            let reader = StoreReader::open_read_only(&db)?;
            analyses::compute(&reader, &label)
        }))
    }

    /// Progress now: problem counts and the iterations reached, from the calls stored
    /// since the previous poll.
    pub fn live(&self) -> anyhow::Result<LiveStatus> {
        self.with_reader(|reader| {
            let mut progress = lock(&self.progress);
            let rows = reader.call_progress_since(progress.after, PROGRESS_BATCH)?;
            for (rowid, problem, iteration) in rows {
                progress.after = rowid;
                progress.calls += 1;
                let slot = progress.reached.entry(problem).or_insert(iteration);
                *slot = (*slot).max(iteration);
            }
            let iterations = stored_iterations(reader)? as u64;
            let mut live = LiveStatus {
                status: reader
                    .meta(META_STATUS)?
                    .unwrap_or_else(|| "unknown".into()),
                problems_total: 0,
                problems_done: 0,
                problems_failed: 0,
                iterations_reached: 0,
                iterations_total: 0,
                calls_stored: progress.calls,
            };
            for problem in reader.problems()? {
                live.problems_total += 1;
                let reached = match problem.status.as_str() {
                    "done" => {
                        live.problems_done += 1;
                        problem.iterations.map_or(iterations, u64::from)
                    }
                    "failed" => {
                        live.problems_failed += 1;
                        0
                    }
                    _ => progress
                        .reached
                        .get(&problem.problem_id)
                        .map_or(0, |&t| u64::from(t) + 1),
                };
                live.iterations_reached += reached.min(iterations);
            }
            live.iterations_total = live.problems_total * iterations;
            Ok(live)
        })
    }
}

/// A run whose store does not exist yet (an experiment's variant not started).
#[derive(Debug, thiserror::Error)]
#[error("{0}: no run store yet (the run has not started)")]
pub struct NotStarted(pub String);

fn method_name(reader: &StoreReader) -> anyhow::Result<String> {
    let method = reader
        .meta(META_CONFIG)?
        .map_or(crate::config::MethodName::Tmas, |text| {
            crate::config::MethodName::of_stored_config(&text)
        });
    Ok(method.as_str().to_string())
}

/// The cell of (`problem`, iteration `t`), growing the row for an iteration past T (a run
/// extended while it is viewed).
fn cell_at<'a>(
    cells: &'a mut BTreeMap<&str, Vec<Cell>>,
    problem: &str,
    t: u32,
) -> Option<&'a mut Cell> {
    let row = cells.get_mut(problem)?;
    let t = t as usize;
    if t >= row.len() {
        row.resize(t + 1, Cell::default());
    }
    row.get_mut(t)
}

fn build_summary(
    reader: &StoreReader,
    tally: &CallTally,
    label: &str,
) -> anyhow::Result<RunSummary> {
    let iterations = stored_iterations(reader)?;
    let problems = reader.problems()?;
    let lost = tally.lost();
    let mut accounting = Accounting::build(&problems, &lost, &tally.answered(), iterations);
    accounting.judge = JudgeUse {
        calls: tally.judge_calls(),
        verdicts: reader.judge_verdicts()?,
    };
    let table = stored_table(reader)?;

    let mut cells: BTreeMap<&str, Vec<Cell>> = problems
        .iter()
        .map(|p| (p.problem_id.as_str(), vec![Cell::default(); iterations]))
        .collect();
    for v in reader.verdict_scores()? {
        if let Some(c) = cell_at(&mut cells, &v.problem_id, v.iteration) {
            c.judged += 1;
            c.score_sum += v.score;
            c.correct += u32::from(is_correct(v.score));
        }
    }
    for m in reader.candidate_marks()? {
        if let Some(c) = cell_at(&mut cells, &m.problem_id, m.iteration) {
            c.candidates += 1;
            c.explore += u32::from(m.branch == Branch::Explore);
            c.solution_failed += u32::from(m.status == CandidateStatus::SolutionFailed);
        }
    }
    for row in &lost {
        if let Some(c) = cell_at(&mut cells, &row.problem_id, row.iteration) {
            c.lost += row.calls;
        }
    }
    let failed_rule = match reader.meta(META_CONFIG)? {
        Some(text) => FailedCandidates::of_config_toml(&text)
            .map_err(|e| anyhow::anyhow!("run {label}: {e}"))?,
        None => FailedCandidates::default(),
    };
    for c in cells.values_mut().flatten() {
        // A failed candidate has no judgment: its counted score is 0 or nothing.
        let failed = counted_score(None, failed_rule).map_or(0, |_| c.solution_failed);
        c.counted = c.judged + failed;
    }
    let degraded: BTreeSet<&str> = accounting
        .problems_degraded
        .iter()
        .map(String::as_str)
        .collect();
    let failed: BTreeSet<&str> = accounting
        .problems_failed
        .iter()
        .map(|f| f.problem_id.as_str())
        .collect();
    let summaries = problems
        .iter()
        .map(|p| {
            let id = p.problem_id.as_str();
            let state = if failed.contains(id) {
                ProblemState::Failed
            } else if degraded.contains(id) {
                ProblemState::Degraded
            } else if is_unfinished(p, iterations) {
                ProblemState::Unfinished
            } else {
                ProblemState::Complete
            };
            let row = cells.get(id).cloned().unwrap_or_default();
            let first_solved = row.iter().position(|c| c.correct > 0).map(|t| t as u32);
            ProblemSummary {
                problem: p.clone(),
                state,
                cells: row,
                first_solved,
            }
        })
        .collect();

    let method = method_name(reader)?;
    let series = [Series::of_table(&table, &method)];
    let chart_svg = if series[0].points.is_empty() {
        None
    } else {
        Some(pass_at_1_svg(
            &format!("Pass@1 by iteration — {label}"),
            &series,
        )?)
    };
    Ok(RunSummary {
        status: reader
            .meta(META_STATUS)?
            .unwrap_or_else(|| "unknown".into()),
        method,
        iterations,
        problems: summaries,
        accounting,
        table,
        usage: tally.usage(),
        chart_svg,
        requests: reader.request_methods()?,
    })
}
