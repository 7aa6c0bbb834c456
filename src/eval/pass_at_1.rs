//! Pass@1 per iteration, as the paper defines it (paper-notes §4):
//!
//! Pass@1(t) = (1/P) Σ_i c_i(t) / n_i(t), where P is the number of problems of the run,
//! n_i(t) the number of candidates problem i produced at iteration t, and c_i(t) the sum
//! of their judge scores (each score is the mean over the R judge repeats, so c_i counts
//! "judged correct" fractionally, and averaging over repeats commutes with the sum).
//!
//! Our decisions for the cases the paper leaves open, so failures never raise the figure:
//! - a candidate whose solution call failed (no answer to judge) is in n_i(t) and not
//!   correct ([`counted_score`] under [`FailedCandidates::Wrong`], the default); the row
//!   counts them (`failed`). `judge.failed_candidates = "excluded"` leaves them out of
//!   n_i(t) instead, the figure then covering only the candidates that answered.
//! - a problem with no candidate at iteration t (the method stopped early, or every
//!   candidate was left out) scores 0 there and stays in the denominator P. Such problems
//!   are counted in the table (`empty`) so a reader can tell failures from wrong answers.
//!
//! A run that has not finished (interrupted, still going, or extended to more
//! iterations) has problems without a result for some iterations. They are not scored 0:
//! each row covers only the problems that have its iteration judged ([`Coverage`]: a
//! finished problem every iteration, an unfinished one the iterations judged so far), and
//! says how many (`problems`, of `problems_total` in the run, `unfinished_problems` of
//! them unfinished); the table lists each unfinished problem with how many iterations it
//! has judged, so a partial figure is never taken for the whole run's.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::interval::{Interval, sample_std_dev, t_interval_95};
use super::judge::{FailedCandidates, JudgeRecord, counted_score};

/// A score that cannot be added to the table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PassAt1Error {
    #[error("problem {0:?} is not part of this run")]
    UnknownProblem(String),
    #[error("problem {problem:?}: iteration {iteration} is outside 0..{iterations}")]
    IterationOutOfRange {
        problem: String,
        iteration: usize,
        iterations: usize,
    },
    #[error(
        "problem {problem:?}: iteration {iteration} has no result yet (the problem has \
         {covered} of its iterations judged, not this one)"
    )]
    NotCovered {
        problem: String,
        iteration: usize,
        covered: usize,
    },
    #[error("problem {problem:?} iteration {iteration}: score {score} is not in [0, 1]")]
    BadScore {
        problem: String,
        iteration: usize,
        score: f64,
    },
}

#[derive(Debug, Clone, Default)]
struct Cell {
    score_sum: f64,
    candidates: usize,
    undecided: usize,
    disagreements: usize,
    no_answer: usize,
    failed: usize,
}

/// Which iterations of a problem have a result the table counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// Every iteration: the problem is done (its empty iterations score 0), or failed
    /// (every iteration scores 0).
    All,
    /// Its first `n` iterations: it was done to a smaller T before the run was extended
    /// (unfinished in the extended run).
    First(usize),
    /// The problem has not finished (interrupted, or still running): the iterations
    /// judged so far, in any order (none yet: empty). Each is a whole iteration, every
    /// candidate judged, so it counts as a finished problem's does.
    Judged(Vec<usize>),
}

impl Coverage {
    /// Which of a run's `of` iterations this covers.
    fn mask(&self, of: usize) -> Vec<bool> {
        match self {
            Coverage::All => vec![true; of],
            Coverage::First(n) => (0..of).map(|t| t < *n).collect(),
            Coverage::Judged(judged) => {
                let mut mask = vec![false; of];
                for &t in judged {
                    if let Some(slot) = mask.get_mut(t) {
                        *slot = true;
                    }
                }
                mask
            }
        }
    }
}

/// A problem of the table that has not finished: it counts only in the rows of the
/// iterations it has judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedProblem {
    pub problem_id: String,
    /// How many of the run's iterations it has judged (those rows count it).
    pub iterations_judged: usize,
}

/// Collects judged candidates of a run, then computes the table.
#[derive(Debug, Clone)]
pub struct PassAt1Builder {
    problem_ids: Vec<String>,
    index: HashMap<String, usize>,
    iterations: usize,
    /// `cells[problem][iteration]`.
    cells: Vec<Vec<Cell>>,
    /// `covered[problem][iteration]`: whether the table counts that iteration of it.
    covered: Vec<Vec<bool>>,
    /// Per problem: whether it is unfinished (its coverage is not [`Coverage::All`]).
    unfinished: Vec<bool>,
    /// How a candidate without a judgment (failed solution call) counts.
    failed: FailedCandidates,
}

impl PassAt1Builder {
    /// A builder for a run over `problem_ids` (duplicates count once) with `iterations`
    /// iterations (T), every problem finished.
    pub fn new<S: Into<String>>(
        problem_ids: impl IntoIterator<Item = S>,
        iterations: usize,
    ) -> Self {
        Self::with_coverage(
            problem_ids.into_iter().map(|id| (id, Coverage::All)),
            iterations,
        )
    }

    /// A builder for a run over `problems` (duplicates count once, the first one's
    /// coverage) with `iterations` iterations (T), each problem covering the iterations
    /// it has a result for.
    pub fn with_coverage<S: Into<String>>(
        problems: impl IntoIterator<Item = (S, Coverage)>,
        iterations: usize,
    ) -> Self {
        let mut problem_ids_out = Vec::new();
        let mut index = HashMap::new();
        let mut covered = Vec::new();
        let mut unfinished = Vec::new();
        for (id, coverage) in problems {
            let id = id.into();
            if !index.contains_key(&id) {
                index.insert(id.clone(), problem_ids_out.len());
                problem_ids_out.push(id);
                covered.push(coverage.mask(iterations));
                unfinished.push(coverage != Coverage::All);
            }
        }
        let cells = vec![vec![Cell::default(); iterations]; problem_ids_out.len()];
        Self {
            problem_ids: problem_ids_out,
            index,
            iterations,
            cells,
            covered,
            unfinished,
            failed: FailedCandidates::default(),
        }
    }

    /// Counts candidates whose solution call failed by `rule` (default:
    /// [`FailedCandidates::Wrong`]).
    pub fn counting_failed(mut self, rule: FailedCandidates) -> Self {
        self.failed = rule;
        self
    }

    /// Adds one candidate slot of `problem` at `iteration`: its judgment, or `None` when
    /// its solution call failed (counted by the builder's [`FailedCandidates`] rule).
    pub fn record_candidate(
        &mut self,
        problem: &str,
        iteration: usize,
        judgment: Option<&JudgeRecord>,
    ) -> Result<(), PassAt1Error> {
        match judgment {
            Some(record) => self.record(problem, iteration, record),
            None => self.record_failed(problem, iteration),
        }
    }

    /// Adds a candidate whose solution call failed: score 0 in the denominator, or
    /// (excluded) only its count in the row's `failed`.
    pub fn record_failed(&mut self, problem: &str, iteration: usize) -> Result<(), PassAt1Error> {
        if let Some(score) = counted_score(None, self.failed) {
            self.record_score(problem, iteration, score, false, false)?;
        } else {
            // Checked as a scored candidate would be, though nothing is added.
            self.cell_mut(problem, iteration)?;
        }
        self.cell_mut(problem, iteration)?.failed += 1;
        Ok(())
    }

    fn cell_mut(&mut self, problem: &str, iteration: usize) -> Result<&mut Cell, PassAt1Error> {
        let &p = self
            .index
            .get(problem)
            .ok_or_else(|| PassAt1Error::UnknownProblem(problem.to_owned()))?;
        if iteration >= self.iterations {
            return Err(PassAt1Error::IterationOutOfRange {
                problem: problem.to_owned(),
                iteration,
                iterations: self.iterations,
            });
        }
        if !self.covered[p][iteration] {
            return Err(PassAt1Error::NotCovered {
                problem: problem.to_owned(),
                iteration,
                covered: self.covered[p].iter().filter(|c| **c).count(),
            });
        }
        Ok(&mut self.cells[p][iteration])
    }

    /// Adds one judged candidate of `problem` at `iteration` (0-based).
    pub fn record(
        &mut self,
        problem: &str,
        iteration: usize,
        record: &JudgeRecord,
    ) -> Result<(), PassAt1Error> {
        self.record_score(
            problem,
            iteration,
            record.score,
            record.undecided,
            record.disagreement,
        )?;
        if record.is_no_answer() {
            self.record_no_answer(problem, iteration)?;
        }
        Ok(())
    }

    /// Counts a candidate already recorded at (`problem`, `iteration`) as "no answer".
    pub fn record_no_answer(
        &mut self,
        problem: &str,
        iteration: usize,
    ) -> Result<(), PassAt1Error> {
        let &p = self
            .index
            .get(problem)
            .ok_or_else(|| PassAt1Error::UnknownProblem(problem.to_owned()))?;
        let cell =
            self.cells[p]
                .get_mut(iteration)
                .ok_or_else(|| PassAt1Error::IterationOutOfRange {
                    problem: problem.to_owned(),
                    iteration,
                    iterations: self.iterations,
                })?;
        cell.no_answer += 1;
        Ok(())
    }

    /// Adds one candidate's score in [0, 1] (mean over judge repeats).
    pub fn record_score(
        &mut self,
        problem: &str,
        iteration: usize,
        score: f64,
        undecided: bool,
        disagreement: bool,
    ) -> Result<(), PassAt1Error> {
        self.cell_mut(problem, iteration)?;
        if !(0.0..=1.0).contains(&score) {
            return Err(PassAt1Error::BadScore {
                problem: problem.to_owned(),
                iteration,
                score,
            });
        }
        let cell = self.cell_mut(problem, iteration)?;
        cell.score_sum += score;
        cell.candidates += 1;
        cell.undecided += usize::from(undecided);
        cell.disagreements += usize::from(disagreement);
        Ok(())
    }

    /// c_i(t) / n_i(t) of one problem, `None` when it has no candidate at `iteration`.
    pub fn problem_rate(&self, problem: &str, iteration: usize) -> Option<f64> {
        let cell = self.cells.get(*self.index.get(problem)?)?.get(iteration)?;
        (cell.candidates > 0).then(|| cell.score_sum / cell.candidates as f64)
    }

    /// Whether the table counts `iteration` of `problem` (false for a problem not in the
    /// run).
    pub fn covers(&self, problem: &str, iteration: usize) -> bool {
        self.index
            .get(problem)
            .and_then(|&p| self.covered[p].get(iteration))
            .copied()
            .unwrap_or(false)
    }

    /// Whether `problem` is in the run and unfinished (its coverage is not
    /// [`Coverage::All`]).
    pub fn is_unfinished(&self, problem: &str) -> bool {
        self.index.get(problem).is_some_and(|&p| self.unfinished[p])
    }

    /// The problem ids in order of first appearance.
    pub fn problem_ids(&self) -> &[String] {
        &self.problem_ids
    }

    /// The Pass@1 table, one row per iteration, each over the problems that have that
    /// iteration judged.
    pub fn build(&self) -> PassAt1Table {
        let rows = (0..self.iterations)
            .map(|t| {
                let mut row = PassAt1Row {
                    iteration: t,
                    ..PassAt1Row::default()
                };
                // Per-problem shares c_i(t) / n_i(t), an empty problem's as 0.
                let mut shares = Vec::new();
                let covering = self.cells.iter().zip(&self.covered).zip(&self.unfinished);
                for ((cells, _), unfinished) in covering.filter(|((_, covered), _)| covered[t]) {
                    row.problems += 1;
                    row.unfinished_problems += usize::from(*unfinished);
                    let cell = &cells[t];
                    row.candidates += cell.candidates;
                    row.undecided += cell.undecided;
                    row.disagreements += cell.disagreements;
                    row.no_answer += cell.no_answer;
                    row.failed_candidates += cell.failed;
                    if cell.candidates == 0 {
                        row.empty_problems += 1;
                        shares.push(0.0);
                    } else {
                        shares.push(cell.score_sum / cell.candidates as f64);
                    }
                }
                row.pass_at_1 = if row.problems == 0 {
                    0.0
                } else {
                    shares.iter().sum::<f64>() / row.problems as f64
                };
                row.std_dev = sample_std_dev(&shares);
                row
            })
            .collect();
        let unfinished = self
            .problem_ids
            .iter()
            .zip(&self.covered)
            .zip(&self.unfinished)
            .filter(|(_, unfinished)| **unfinished)
            .map(|((id, covered), _)| UnfinishedProblem {
                problem_id: id.clone(),
                iterations_judged: covered.iter().filter(|c| **c).count(),
            })
            .collect();
        PassAt1Table {
            rows,
            problems_total: Some(self.problem_ids.len()),
            unfinished,
        }
    }
}

/// Pass@1 of one iteration with the counts needed to read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassAt1Row {
    /// 0-based iteration (the paper's It0, It1, …).
    pub iteration: usize,
    /// In [0, 1] (0 when no problem finished this iteration yet).
    pub pass_at_1: f64,
    /// P: the problems that have this iteration judged (the denominator); all of the
    /// run's once it has finished.
    pub problems: usize,
    /// Of `problems`, those that have not finished (counted here because this iteration
    /// of theirs is judged; `PassAt1Table::unfinished` lists them).
    #[serde(default)]
    pub unfinished_problems: usize,
    /// Candidates judged at this iteration, over all problems.
    pub candidates: usize,
    /// Problems with no candidate at this iteration (scored 0).
    pub empty_problems: usize,
    /// Candidates scored by an undecided rule verdict (0) for lack of an LLM verdict.
    pub undecided: usize,
    /// Candidates where the rule and LLM verdicts disagree.
    pub disagreements: usize,
    /// Candidates with the verdict "no answer": no `\boxed{}` and not judged correct
    /// (a verdict of its own, apart from wrong answers).
    #[serde(default)]
    pub no_answer: usize,
    /// Candidates whose solution call failed, so they have no answer: counted as not
    /// correct in `candidates` (or, under `judge.failed_candidates = "excluded"`, left
    /// out of it).
    #[serde(default)]
    pub failed_candidates: usize,
    /// Calls of this iteration (any role, the judge's included) that failed after the
    /// client's retries: the figure rests on fewer answers than the method asks for.
    #[serde(default)]
    pub calls_lost: u64,
    /// Sample standard deviation of the per-problem shares c_i(t) / n_i(t) across the
    /// row's problems (absent with fewer than two problems, and in tables written before
    /// it was recorded): with `pass_at_1` and `problems` it gives the row's 95 % interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std_dev: Option<f64>,
}

impl PassAt1Row {
    /// The 95 % t-interval across problems of this row's Pass@1 (`crate::eval::interval`);
    /// `None` without a standard deviation.
    pub fn interval_95(&self) -> Option<Interval> {
        t_interval_95(self.pass_at_1, self.std_dev?, self.problems)
    }
}

/// Pass@1 per iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassAt1Table {
    pub rows: Vec<PassAt1Row>,
    /// Problems in the run, finished or not (absent in tables written before rows
    /// counted only finished problems: those counted every problem in every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problems_total: Option<usize>,
    /// The problems that have not finished, each with how many iterations it has judged
    /// (counted in those rows only), in the run's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<UnfinishedProblem>,
}

impl PassAt1Table {
    /// Pass@1 of the last iteration, once every problem of the run has finished it
    /// (`None` before, and for a table of no problem: there is no figure then).
    pub fn final_pass_at_1(&self) -> Option<f64> {
        if !self.unfinished.is_empty() {
            return None;
        }
        self.rows
            .last()
            .filter(|r| r.problems > 0)
            .filter(|r| self.problems_total.is_none_or(|total| r.problems == total))
            .map(|r| r.pass_at_1)
    }

    /// Whether some problem has not finished: some row covers fewer problems than the
    /// run has, or counts a problem whose later iterations are missing.
    pub fn is_partial(&self) -> bool {
        !self.unfinished.is_empty()
            || self
                .problems_total
                .is_some_and(|total| self.rows.iter().any(|r| r.problems < total))
    }

    /// A line saying which problems are unfinished and how many iterations each has
    /// judged (the first `at_most` named); `None` when every problem finished.
    pub fn unfinished_line(&self, at_most: usize) -> Option<String> {
        if self.unfinished.is_empty() {
            return None;
        }
        let iterations = self.rows.len();
        let named: Vec<String> = self
            .unfinished
            .iter()
            .take(at_most)
            .map(|u| {
                format!(
                    "{} ({} of {iterations} judged)",
                    u.problem_id, u.iterations_judged
                )
            })
            .collect();
        let more = self.unfinished.len().saturating_sub(at_most);
        let more = if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "unfinished: {}, each counted only in the rows of the iterations it has judged \
             (column `unfinished`): {}{more}",
            crate::text::count_of(self.unfinished.len(), "problem"),
            named.join(", ")
        ))
    }

    /// Sets each row's lost calls (`by_iteration[t]`, 0 past its end).
    pub fn set_calls_lost(&mut self, by_iteration: &[u64]) {
        for row in &mut self.rows {
            row.calls_lost = by_iteration.get(row.iteration).copied().unwrap_or(0);
        }
    }

    /// A fixed-width text table (Pass@1 in percent with two decimals, as the paper). A
    /// table with unfinished problems has a column `unfinished` (of the row's problems,
    /// those not finished) and a last line naming them with their judged iterations.
    pub fn render_text(&self) -> String {
        let partial = !self.unfinished.is_empty();
        let mut out = String::from("iteration  pass@1(%)  problems");
        if partial {
            out.push_str("  unfinished");
        }
        out.push_str(
            "  candidates  empty  undecided  disagree  no-answer  failed  calls lost  95% CI (%)\n",
        );
        for r in &self.rows {
            // No problem has this iteration judged yet: there is no figure.
            let pass = if r.problems == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", r.pass_at_1 * 100.0)
            };
            // The interval across problems the chart draws around the point.
            let interval = match r.interval_95() {
                Some(i) if r.problems > 0 => format!("{:.2}-{:.2}", i.lo * 100.0, i.hi * 100.0),
                _ => "-".to_owned(),
            };
            let _ = write!(out, "It{:<7} {:>10} {:>9}", r.iteration, pass, r.problems);
            if partial {
                let _ = write!(out, " {:>11}", r.unfinished_problems);
            }
            let _ = writeln!(
                out,
                " {:>11} {:>6} {:>10} {:>9} {:>10} {:>7} {:>11}  {:>10}",
                r.candidates,
                r.empty_problems,
                r.undecided,
                r.disagreements,
                r.no_answer,
                r.failed_candidates,
                r.calls_lost,
                interval
            );
        }
        if let Some(line) = self.unfinished_line(10) {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// The per-iteration Pass@1 table as CSV (`pass_at_1.csv`, `tmas export --format csv`). A
/// table with unfinished problems has a last column `unfinished_problems` (of the row's
/// `problems`, those not finished).
pub fn pass_at_1_csv(table: &PassAt1Table) -> String {
    let partial = !table.unfinished.is_empty();
    let mut csv = String::from(
        "iteration,pass_at_1,problems,candidates,empty_problems,undecided,disagreements,no_answer,calls_lost,failed_candidates",
    );
    csv.push_str(if partial {
        ",unfinished_problems\n"
    } else {
        "\n"
    });
    for row in &table.rows {
        // No problem has this iteration judged yet: no figure (an empty field).
        let pass = if row.problems == 0 {
            String::new()
        } else {
            format!("{:.6}", row.pass_at_1)
        };
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{}",
            row.iteration,
            pass,
            row.problems,
            row.candidates,
            row.empty_problems,
            row.undecided,
            row.disagreements,
            row.no_answer,
            row.calls_lost,
            row.failed_candidates
        ));
        if partial {
            csv.push_str(&format!(",{}", row.unfinished_problems));
        }
        csv.push('\n');
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_arithmetic() {
        // Problem a: 8 candidates, 6 correct at t=0; problem b: 4 candidates, 1 correct.
        let mut b = PassAt1Builder::new(["a", "b"], 2);
        for i in 0..8 {
            b.record_score("a", 0, if i < 6 { 1.0 } else { 0.0 }, false, false)
                .unwrap();
        }
        for i in 0..4 {
            b.record_score("b", 0, if i < 1 { 1.0 } else { 0.0 }, false, false)
                .unwrap();
        }
        // t=1: a has judge means 0.75 and 0.25 (R = 4 repeats); b failed entirely.
        b.record_score("a", 1, 0.75, false, false).unwrap();
        b.record_score("a", 1, 0.25, false, true).unwrap();
        let table = b.build();
        let expected0 = (6.0 / 8.0 + 1.0 / 4.0) / 2.0;
        assert!((table.rows[0].pass_at_1 - expected0).abs() < 1e-12);
        assert_eq!(table.rows[0].candidates, 12);
        assert_eq!(table.rows[0].empty_problems, 0);
        assert!(
            (table.rows[1].pass_at_1 - 0.25).abs() < 1e-12,
            "b counts 0 and stays in P"
        );
        assert_eq!(table.rows[1].empty_problems, 1);
        assert_eq!(table.rows[1].disagreements, 1);
        assert_eq!(b.problem_rate("a", 1), Some(0.5));
        assert_eq!(b.problem_rate("b", 1), None);
        assert_eq!(table.final_pass_at_1(), Some(table.rows[1].pass_at_1));
    }

    #[test]
    fn records_from_judge() {
        let mut b = PassAt1Builder::new(vec!["p".to_owned()], 1);
        b.record("p", 0, &JudgeRecord::from_reply("3", "\\boxed{3}"))
            .unwrap();
        b.record(
            "p",
            0,
            &JudgeRecord::from_reply("all odd $n$", "\\boxed{odd integers}"),
        )
        .unwrap();
        b.record("p", 0, &JudgeRecord::from_reply("3", "it is 3, no box"))
            .unwrap();
        let table = b.build();
        assert!((table.rows[0].pass_at_1 - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(table.rows[0].undecided, 1);
        assert_eq!(table.rows[0].no_answer, 1);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut b = PassAt1Builder::new(["p"], 2);
        assert_eq!(
            b.record_score("q", 0, 1.0, false, false),
            Err(PassAt1Error::UnknownProblem("q".into()))
        );
        assert!(matches!(
            b.record_score("p", 2, 1.0, false, false),
            Err(PassAt1Error::IterationOutOfRange { .. })
        ));
        assert!(matches!(
            b.record_score("p", 0, 1.5, false, false),
            Err(PassAt1Error::BadScore { .. })
        ));
        assert!(matches!(
            b.record_score("p", 0, f64::NAN, false, false),
            Err(PassAt1Error::BadScore { .. })
        ));
        assert_eq!(b.build().rows[0].candidates, 0);
    }

    #[test]
    fn renders_text() {
        let mut b = PassAt1Builder::new(["a", "b"], 2);
        b.record_score("a", 0, 1.0, false, false).unwrap();
        let mut table = b.build();
        table.set_calls_lost(&[0, 7]);
        let text = table.render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("iteration"));
        assert!(
            lines[1].starts_with("It0") && lines[1].contains("50.00"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("It1") && lines[2].contains("0.00"),
            "{text}"
        );
        assert!(lines[0].ends_with("calls lost  95% CI (%)"), "{text}");
        let cells = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        // Calls lost, then the interval: shares 1 and 0 over two problems, t(1) = 12.706.
        assert_eq!(cells(lines[1])[9..], ["0", "0.00-100.00"], "{text}");
        // Both problems scored 0: a zero-width interval.
        assert_eq!(cells(lines[2])[9..], ["7", "0.00-0.00"], "{text}");
    }

    #[test]
    fn each_row_has_the_spread_of_its_problems_shares_and_their_interval() {
        let mut b = PassAt1Builder::new(["a", "b", "c"], 1);
        // Shares 1, 0.5 and (no candidate) 0: the empty problem counts as 0 here too.
        b.record_score("a", 0, 1.0, false, false).unwrap();
        b.record_score("b", 0, 1.0, false, false).unwrap();
        b.record_score("b", 0, 0.0, false, false).unwrap();
        let row = &b.build().rows[0];
        assert!((row.pass_at_1 - 0.5).abs() < 1e-12);
        assert_eq!(row.std_dev, Some(0.5), "{row:?}");
        let i = row.interval_95().expect("three problems");
        let half = 4.303 * 0.5 / 3f64.sqrt();
        assert!((i.lo - 0.0).abs() < 1e-12 && (i.hi - (0.5 + half).min(1.0)).abs() < 1e-12);
        let one = PassAt1Builder::new(["a"], 1).build();
        assert_eq!(one.rows[0].std_dev, None, "one problem has no spread");
        assert_eq!(one.rows[0].interval_95(), None);
    }

    #[test]
    fn failed_candidates_are_in_the_denominator_as_not_correct_unless_excluded() {
        // Problem a asked for 4 candidates at t = 0: 2 judged correct, 2 failed calls;
        // problem b: 1 judged correct, nothing failed.
        let right = JudgeRecord::from_reply("3", "\\boxed{3}");
        let fill = |b: &mut PassAt1Builder| {
            for j in [Some(&right), None, Some(&right), None] {
                b.record_candidate("a", 0, j).unwrap();
            }
            b.record_candidate("b", 0, Some(&right)).unwrap();
        };
        let mut wrong = PassAt1Builder::new(["a", "b"], 1);
        fill(&mut wrong);
        let row = &wrong.build().rows[0];
        assert!(
            (row.pass_at_1 - (2.0 / 4.0 + 1.0) / 2.0).abs() < 1e-12,
            "{row:?}"
        );
        assert_eq!((row.candidates, row.failed_candidates), (5, 2));
        assert_eq!(
            row.no_answer, 0,
            "a failed call is not a reply without a box"
        );
        assert_eq!(wrong.problem_rate("a", 0), Some(0.5));

        let mut excluded =
            PassAt1Builder::new(["a", "b"], 1).counting_failed(FailedCandidates::Excluded);
        fill(&mut excluded);
        let row = &excluded.build().rows[0];
        assert!((row.pass_at_1 - 1.0).abs() < 1e-12, "{row:?}");
        assert_eq!((row.candidates, row.failed_candidates), (3, 2));

        // Every candidate failed: 0 and in P either way (empty when excluded).
        for rule in [FailedCandidates::Wrong, FailedCandidates::Excluded] {
            let mut b = PassAt1Builder::new(["a", "b"], 1).counting_failed(rule);
            b.record_candidate("a", 0, None).unwrap();
            b.record_candidate("b", 0, Some(&right)).unwrap();
            assert!((b.build().rows[0].pass_at_1 - 0.5).abs() < 1e-12);
        }
        let text = wrong.build().render_text();
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("no-answer  failed  calls lost")
        );
        let csv = pass_at_1_csv(&wrong.build());
        assert!(csv.lines().nth(1).unwrap().ends_with(",0,2"), "{csv}");
        assert!(matches!(
            wrong.record_candidate("c", 0, None),
            Err(PassAt1Error::UnknownProblem(_))
        ));
    }

    #[test]
    fn empty_run_is_zero_not_nan() {
        let table = PassAt1Builder::new(Vec::<String>::new(), 1).build();
        assert_eq!(table.rows[0].pass_at_1, 0.0);
        assert_eq!(table.final_pass_at_1(), None, "no problem, no figure");
    }

    #[test]
    fn each_row_covers_the_problems_that_finished_its_iteration() {
        // a: done (all 3 iterations, iteration 2 empty); b: done to T = 1 before the run
        // was extended; c: unfinished; d: failed (scores 0 everywhere, as before).
        let mut b = PassAt1Builder::with_coverage(
            [
                ("a", Coverage::All),
                ("b", Coverage::First(1)),
                ("c", Coverage::Judged(Vec::new())),
                ("d", Coverage::All),
            ],
            3,
        );
        b.record_score("a", 0, 1.0, false, false).unwrap();
        b.record_score("a", 1, 0.5, false, false).unwrap();
        b.record_score("b", 0, 0.0, false, false).unwrap();
        assert_eq!(
            b.record_score("b", 1, 1.0, false, false),
            Err(PassAt1Error::NotCovered {
                problem: "b".into(),
                iteration: 1,
                covered: 1
            })
        );
        assert!(matches!(
            b.record_score("c", 0, 1.0, false, false),
            Err(PassAt1Error::NotCovered { .. })
        ));
        let table = b.build();
        let problems: Vec<usize> = table.rows.iter().map(|r| r.problems).collect();
        assert_eq!(problems, [3, 2, 2], "a, b, d; then a, d");
        let empty: Vec<usize> = table.rows.iter().map(|r| r.empty_problems).collect();
        assert_eq!(empty, [1, 1, 2]);
        assert!((table.rows[0].pass_at_1 - 1.0 / 3.0).abs() < 1e-12);
        assert!((table.rows[1].pass_at_1 - 0.25).abs() < 1e-12);
        assert_eq!(table.rows[2].pass_at_1, 0.0);
        assert_eq!(table.problems_total, Some(4));
        assert!(table.is_partial());
        assert_eq!(table.final_pass_at_1(), None, "c has not finished");

        // Once every problem finished, the final figure is the last row's.
        let mut done = PassAt1Builder::with_coverage([("a", Coverage::All)], 2);
        done.record_score("a", 1, 1.0, false, false).unwrap();
        let table = done.build();
        assert!(!table.is_partial());
        assert_eq!(table.final_pass_at_1(), Some(1.0));
    }

    #[test]
    fn an_unfinished_problem_counts_in_the_rows_of_its_judged_iterations_and_is_named() {
        // a: done; b: unfinished with iterations 0 and 2 judged (1's judging was cut).
        let mut b = PassAt1Builder::with_coverage(
            [("a", Coverage::All), ("b", Coverage::Judged(vec![2, 0]))],
            3,
        );
        for t in 0..3 {
            b.record_score("a", t, 1.0, false, false).unwrap();
        }
        b.record_score("b", 0, 0.0, false, false).unwrap();
        b.record_score("b", 2, 0.5, false, false).unwrap();
        assert!(matches!(
            b.record_score("b", 1, 1.0, false, false),
            Err(PassAt1Error::NotCovered { covered: 2, .. })
        ));
        let table = b.build();
        let problems: Vec<usize> = table.rows.iter().map(|r| r.problems).collect();
        assert_eq!(problems, [2, 1, 2]);
        let unfinished: Vec<usize> = table.rows.iter().map(|r| r.unfinished_problems).collect();
        assert_eq!(unfinished, [1, 0, 1]);
        assert!((table.rows[0].pass_at_1 - 0.5).abs() < 1e-12);
        assert!((table.rows[2].pass_at_1 - 0.75).abs() < 1e-12);
        assert_eq!(
            table.unfinished,
            [UnfinishedProblem {
                problem_id: "b".into(),
                iterations_judged: 2
            }]
        );
        // Every row counts every problem, yet the run is not finished: no final figure.
        let mut all = PassAt1Builder::with_coverage([("b", Coverage::Judged(vec![0]))], 1);
        all.record_score("b", 0, 1.0, false, false).unwrap();
        let all = all.build();
        assert_eq!(all.rows[0].problems, all.problems_total.unwrap());
        assert!(all.is_partial());
        assert_eq!(all.final_pass_at_1(), None);
        let text = table.render_text();
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("problems  unfinished"),
            "{text}"
        );
        assert!(
            text.contains("unfinished: 1 problem,") && text.contains("b (2 of 3 judged)"),
            "{text}"
        );
        let csv = pass_at_1_csv(&table);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",unfinished_problems"),
            "{csv}"
        );
        assert!(csv.lines().nth(2).unwrap().ends_with(",0"), "{csv}");
        // A table without unfinished problems keeps its columns.
        let done = PassAt1Builder::new(["a"], 1).build();
        assert!(!done.render_text().contains("unfinished"));
        assert!(!pass_at_1_csv(&done).contains("unfinished"));
    }

    #[test]
    fn a_row_no_problem_finished_shows_no_figure() {
        let table = PassAt1Builder::with_coverage([("a", Coverage::First(1))], 2).build();
        let text = table.render_text();
        let it1 = text.lines().nth(2).unwrap();
        assert!(it1.starts_with("It1") && it1.contains(" - "), "{text}");
        let csv = pass_at_1_csv(&table);
        assert!(csv.lines().nth(2).unwrap().starts_with("1,,0,"), "{csv}");
    }

    #[test]
    fn a_table_written_before_rows_counted_finished_problems_reads_as_whole() {
        let old = r#"{"rows":[{"iteration":0,"pass_at_1":0.5,"problems":2,"candidates":4,
            "empty_problems":0,"undecided":0,"disagreements":0}]}"#;
        let table: PassAt1Table = serde_json::from_str(old).unwrap();
        assert_eq!(table.problems_total, None);
        assert!(!table.is_partial());
        assert_eq!(table.final_pass_at_1(), Some(0.5));
    }
}
