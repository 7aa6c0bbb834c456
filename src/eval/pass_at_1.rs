//! Pass@1 per iteration, as the paper defines it (paper-notes §4):
//!
//! Pass@1(t) = (1/P) Σ_i c_i(t) / n_i(t), where P is the number of problems of the run,
//! n_i(t) the number of candidates problem i produced at iteration t, and c_i(t) the sum
//! of their judge scores (each score is the mean over the R judge repeats, so c_i counts
//! "judged correct" fractionally, and averaging over repeats commutes with the sum).
//!
//! Our decision for the case the paper leaves open: a problem with no candidate at
//! iteration t (every solution call failed, or its run stopped before t) scores 0 there
//! and stays in the denominator P, so failures never raise the figure. Such problems are
//! counted in the table (`empty`) so a reader can tell failures from wrong answers.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::judge::JudgeRecord;

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
}

/// Collects judged candidates of a run, then computes the table.
#[derive(Debug, Clone)]
pub struct PassAt1Builder {
    problem_ids: Vec<String>,
    index: HashMap<String, usize>,
    iterations: usize,
    /// `cells[problem][iteration]`.
    cells: Vec<Vec<Cell>>,
}

impl PassAt1Builder {
    /// A builder for a run over `problem_ids` (duplicates count once) with `iterations`
    /// iterations (T).
    pub fn new<S: Into<String>>(
        problem_ids: impl IntoIterator<Item = S>,
        iterations: usize,
    ) -> Self {
        let mut problem_ids_out = Vec::new();
        let mut index = HashMap::new();
        for id in problem_ids {
            let id = id.into();
            if !index.contains_key(&id) {
                index.insert(id.clone(), problem_ids_out.len());
                problem_ids_out.push(id);
            }
        }
        let cells = vec![vec![Cell::default(); iterations]; problem_ids_out.len()];
        Self {
            problem_ids: problem_ids_out,
            index,
            iterations,
            cells,
        }
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
        if !(0.0..=1.0).contains(&score) {
            return Err(PassAt1Error::BadScore {
                problem: problem.to_owned(),
                iteration,
                score,
            });
        }
        let cell = &mut self.cells[p][iteration];
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

    /// The problem ids in order of first appearance.
    pub fn problem_ids(&self) -> &[String] {
        &self.problem_ids
    }

    /// The Pass@1 table, one row per iteration.
    pub fn build(&self) -> PassAt1Table {
        let problems = self.problem_ids.len();
        let rows = (0..self.iterations)
            .map(|t| {
                let mut row = PassAt1Row {
                    iteration: t,
                    problems,
                    ..PassAt1Row::default()
                };
                let mut rate_sum = 0.0;
                for cells in &self.cells {
                    let cell = &cells[t];
                    row.candidates += cell.candidates;
                    row.undecided += cell.undecided;
                    row.disagreements += cell.disagreements;
                    row.no_answer += cell.no_answer;
                    if cell.candidates == 0 {
                        row.empty_problems += 1;
                    } else {
                        rate_sum += cell.score_sum / cell.candidates as f64;
                    }
                }
                row.pass_at_1 = if problems == 0 {
                    0.0
                } else {
                    rate_sum / problems as f64
                };
                row
            })
            .collect();
        PassAt1Table { rows }
    }
}

/// Pass@1 of one iteration with the counts needed to read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassAt1Row {
    /// 0-based iteration (the paper's It0, It1, …).
    pub iteration: usize,
    /// In [0, 1].
    pub pass_at_1: f64,
    /// P: problems in the run (the denominator).
    pub problems: usize,
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
    /// Calls of this iteration (any role, the judge's included) that failed after the
    /// client's retries: the figure rests on fewer answers than the method asks for.
    #[serde(default)]
    pub calls_lost: u64,
}

/// Pass@1 per iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassAt1Table {
    pub rows: Vec<PassAt1Row>,
}

impl PassAt1Table {
    /// Pass@1 of the last iteration.
    pub fn final_pass_at_1(&self) -> Option<f64> {
        self.rows.last().map(|r| r.pass_at_1)
    }

    /// Sets each row's lost calls (`by_iteration[t]`, 0 past its end).
    pub fn set_calls_lost(&mut self, by_iteration: &[u64]) {
        for row in &mut self.rows {
            row.calls_lost = by_iteration.get(row.iteration).copied().unwrap_or(0);
        }
    }

    /// A fixed-width text table (Pass@1 in percent with two decimals, as the paper).
    pub fn render_text(&self) -> String {
        let mut out = String::from(
            "iteration  pass@1(%)  problems  candidates  empty  undecided  disagree  no-answer  calls lost\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "It{:<7} {:>10.2} {:>9} {:>11} {:>6} {:>10} {:>9} {:>10} {:>11}",
                r.iteration,
                r.pass_at_1 * 100.0,
                r.problems,
                r.candidates,
                r.empty_problems,
                r.undecided,
                r.disagreements,
                r.no_answer,
                r.calls_lost
            );
        }
        out
    }
}

/// The per-iteration Pass@1 table as CSV (`pass_at_1.csv`, `tmas export --format csv`).
pub fn pass_at_1_csv(table: &PassAt1Table) -> String {
    let mut csv = String::from(
        "iteration,pass_at_1,problems,candidates,empty_problems,undecided,disagreements,no_answer,calls_lost\n",
    );
    for row in &table.rows {
        csv.push_str(&format!(
            "{},{:.6},{},{},{},{},{},{},{}\n",
            row.iteration,
            row.pass_at_1,
            row.problems,
            row.candidates,
            row.empty_problems,
            row.undecided,
            row.disagreements,
            row.no_answer,
            row.calls_lost
        ));
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
        assert!(lines[0].ends_with("calls lost"), "{text}");
        assert!(
            lines[1].ends_with(" 0") && lines[2].ends_with(" 7"),
            "{text}"
        );
    }

    #[test]
    fn empty_run_is_zero_not_nan() {
        let table = PassAt1Builder::new(Vec::<String>::new(), 1).build();
        assert_eq!(table.rows[0].pass_at_1, 0.0);
    }
}
