//! The paper's analyses of a TMAS run, computed from its judged problem records (the run
//! store's `done` problems): each is a text table, a per-iteration chart and JSON.
//!
//! - [`guidelines`]: unique guidelines per problem per iteration (the guideline bank is
//!   append-only and de-duplicated, so its size is the number of distinct strategies
//!   tried; the paper's Figure 6).
//! - [`paradox`]: the verification paradox (Figures 7–8): the mean verification score of
//!   candidates on problems never solved in the run against problems solved at least
//!   once, their difference and a seeded permutation-test p-value.
//! - [`branches`]: explore vs exploit: the correct share of each branch per iteration and
//!   how often a problem's first correct answer came from an exploring candidate.
//! - [`bank_growth`]: entries per bank, rejected duplicates and entries the model tried to
//!   drop, per iteration.
//!
//! "Correct" follows Pass@1: a candidate's judge score (the share of judge runs that say
//! correct) is its correctness, and a candidate whose solution call failed counts as the
//! run's [`FailedCandidates`] rule says ([`super::judge::counted_score`]). A problem counts
//! as *solved* by a candidate whose score is above one half ([`super::judge::solved`]: a
//! strict majority of judge runs).
//!
//! Pure functions of the records: nothing here reads or writes files.

use serde::Serialize;

use super::chart::{Series, YAxis};
use super::judge::{FailedCandidates, JudgeRecord, counted_score, solved};
use crate::method::TmasOutcome;

pub(crate) mod bank_growth;
pub(crate) mod branches;
pub(crate) mod guidelines;
pub(crate) mod paradox;

/// One judged problem of a run.
#[derive(Debug, Clone, Copy)]
pub struct ProblemRun<'a> {
    pub id: &'a str,
    pub outcome: &'a TmasOutcome,
    /// `judgments[iteration][candidate]`, `None` where the solution call failed.
    pub judgments: &'a [Vec<Option<JudgeRecord>>],
    /// How a candidate without a judgment counts in the shares.
    pub failed: FailedCandidates,
}

impl ProblemRun<'_> {
    /// What candidate `c` of iteration `t` counts as in a share: its judge score, or for a
    /// failed candidate 0 or nothing ([`counted_score`]); `None` for a slot the record
    /// does not have.
    pub fn score(&self, t: usize, c: usize) -> Option<f64> {
        counted_score(self.judgments.get(t)?.get(c)?.as_ref(), self.failed)
    }

    /// Whether the problem was judged: a problem without a reference answer (a request
    /// `tmas serve` recorded) has no judgments, and the analyses that rest on correctness
    /// leave it out instead of counting it never solved.
    pub fn judged(&self) -> bool {
        !self.judgments.is_empty() || self.outcome.iterations.is_empty()
    }

    /// Whether some candidate of the run answered correctly.
    pub fn solved(&self) -> bool {
        solved(self.judgments.iter().flatten())
    }
}

/// Every analysis of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analyses {
    pub problems: usize,
    pub iterations: usize,
    pub unique_guidelines: guidelines::UniqueGuidelines,
    pub verification_paradox: paradox::Paradox,
    pub explore_exploit: branches::ExploreExploit,
    pub bank_growth: bank_growth::BankGrowth,
}

/// One chart to draw: file stem, title, y axis and lines.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    pub stem: &'static str,
    pub title: String,
    pub y: YAxis,
    pub series: Vec<Series>,
}

/// Permutations of the paradox's permutation test.
pub const PERMUTATIONS: u32 = 10_000;

impl Analyses {
    /// Computes every analysis; `seed` seeds the permutation test (same seed, same p).
    pub fn of(problems: &[ProblemRun<'_>], seed: u64) -> Self {
        let iterations = problems
            .iter()
            .map(|p| p.outcome.iterations.len())
            .max()
            .unwrap_or(0);
        // The banks' analyses read every problem; those about correctness only judged ones.
        let judged: Vec<ProblemRun<'_>> = problems.iter().filter(|p| p.judged()).copied().collect();
        Self {
            problems: problems.len(),
            iterations,
            unique_guidelines: guidelines::UniqueGuidelines::of(problems, iterations),
            verification_paradox: paradox::Paradox::of(&judged, iterations, seed, PERMUTATIONS),
            explore_exploit: branches::ExploreExploit::of(&judged, iterations),
            bank_growth: bank_growth::BankGrowth::of(problems, iterations),
        }
    }

    /// The four text tables, each under a heading.
    pub fn render_text(&self) -> String {
        self.texts().join("\n")
    }

    fn texts(&self) -> [String; 4] {
        [
            self.unique_guidelines.render_text(),
            self.verification_paradox.render_text(),
            self.explore_exploit.render_text(),
            self.bank_growth.render_text(),
        ]
    }

    /// Each analysis as its text table and its chart, in the order of
    /// [`Analyses::render_text`] and [`Analyses::charts`].
    pub fn sections(&self, run_name: &str) -> Vec<(String, ChartSpec)> {
        self.texts()
            .into_iter()
            .zip(self.charts(run_name))
            .collect()
    }

    /// One chart per analysis.
    pub fn charts(&self, run_name: &str) -> Vec<ChartSpec> {
        vec![
            self.unique_guidelines.chart(run_name),
            self.verification_paradox.chart(run_name),
            self.explore_exploit.chart(run_name),
            self.bank_growth.chart(run_name),
        ]
    }
}

/// Mean of `values`, `None` when empty.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A value for a text table: two decimals, or "-" when there is none.
pub(crate) fn cell(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// `(iteration, value)` points of the iterations that have a value.
pub(crate) fn points(values: &[Option<f64>]) -> Vec<(u32, f64)> {
    values
        .iter()
        .enumerate()
        .filter_map(|(t, v)| v.map(|v| (t as u32, v)))
        .collect()
}

#[cfg(test)]
mod tests;
