//! Explore vs exploit: the correct share of each branch per iteration (mean judge score
//! of its candidates, as Pass@1 counts them), and, for every problem the run solved, which
//! branch its first correct answer came from (the earliest iteration with a candidate
//! judged correct ([`crate::eval::judge::is_correct`]); several correct candidates there
//! may mix branches, so both "some" and "only" are counted).

use std::fmt::Write as _;

use serde::Serialize;

use super::{ChartSpec, ProblemRun, cell, mean, points};
use crate::eval::chart::{Series, YAxis, n_label};
use crate::eval::judge::is_correct;
use crate::method::Branch;

/// One branch at one iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BranchCell {
    pub candidates: usize,
    /// Mean judge score of the branch's candidates.
    pub correct_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExploreExploit {
    pub explore: Vec<BranchCell>,
    pub exploit: Vec<BranchCell>,
    /// Problems with at least one correct answer.
    pub solved_problems: usize,
    /// Solved problems whose first correct iteration had a correct exploring candidate.
    pub first_correct_on_explore: usize,
    /// … where every correct candidate of that iteration explored.
    pub first_correct_only_explore: usize,
}

impl ExploreExploit {
    pub fn of(problems: &[ProblemRun<'_>], iterations: usize) -> Self {
        let mut scores: [Vec<Vec<f64>>; 2] =
            [vec![Vec::new(); iterations], vec![Vec::new(); iterations]];
        let (mut solved, mut some, mut only) = (0, 0, 0);
        for p in problems {
            let mut first: Option<Vec<Branch>> = None;
            for (t, it) in p.outcome.iterations.iter().enumerate() {
                let mut correct = Vec::new();
                for c in &it.candidates {
                    let Some(score) = p.score(t, c.index as usize) else {
                        continue;
                    };
                    let b = usize::from(c.branch == Branch::Exploit);
                    if let Some(slot) = scores[b].get_mut(t) {
                        slot.push(score);
                    }
                    if is_correct(score) {
                        correct.push(c.branch);
                    }
                }
                if first.is_none() && !correct.is_empty() {
                    first = Some(correct);
                }
            }
            if let Some(branches) = first {
                solved += 1;
                some += usize::from(branches.contains(&Branch::Explore));
                only += usize::from(branches.iter().all(|b| *b == Branch::Explore));
            }
        }
        let cells = |v: &[Vec<f64>]| -> Vec<BranchCell> {
            v.iter()
                .map(|s| BranchCell {
                    candidates: s.len(),
                    correct_share: mean(s),
                })
                .collect()
        };
        Self {
            explore: cells(&scores[0]),
            exploit: cells(&scores[1]),
            solved_problems: solved,
            first_correct_on_explore: some,
            first_correct_only_explore: only,
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = String::from(
            "Explore vs exploit (correct share = mean judge score of the branch's candidates)\n\
             iteration  explore n  explore correct  exploit n  exploit correct\n",
        );
        for t in 0..self.explore.len() {
            let (e, x) = (&self.explore[t], &self.exploit[t]);
            let pct = |v: Option<f64>| cell(v.map(|v| v * 100.0));
            let _ = writeln!(
                out,
                "It{t:<8} {:>9} {:>15}% {:>10} {:>15}%",
                e.candidates,
                pct(e.correct_share),
                x.candidates,
                pct(x.correct_share)
            );
        }
        let _ = writeln!(
            out,
            "first correct answer on an explore branch: {} of {} solved problems ({} from exploring candidates only)",
            self.first_correct_on_explore, self.solved_problems, self.first_correct_only_explore
        );
        out
    }

    pub fn chart(&self, run: &str) -> ChartSpec {
        let shares =
            |v: &[BranchCell]| -> Vec<Option<f64>> { v.iter().map(|c| c.correct_share).collect() };
        ChartSpec {
            stem: "explore_exploit",
            title: format!("Correct share by branch — {run}"),
            y: YAxis::percent("Correct candidates (%)"),
            // Each branch with the table's `n` column: how many candidates its points
            // rest on (iterations without one have no point).
            series: [("explore", &self.explore), ("exploit", &self.exploit)]
                .into_iter()
                .map(|(name, cells)| {
                    let counts = cells.iter().map(|c| c.candidates).filter(|&n| n > 0);
                    Series::new(
                        format!("{name} ({} candidates)", n_label(counts)),
                        points(&shares(cells)),
                    )
                })
                .collect(),
        }
    }
}
