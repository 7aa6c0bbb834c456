//! The verification paradox (the paper's Figures 7–8): verifiers share the generator's
//! blind spots, so on problems the run never solved they may score candidates *higher*
//! than on problems it solved. Compared here: the mean verification score (the average
//! of a candidate's M scores) of every candidate of never-solved problems against every
//! candidate of problems solved at least once, their difference (never − solved) and a
//! two-sided permutation-test p-value.
//!
//! The test permutes which problems are "never solved" (keeping the group sizes), since a
//! problem's candidates are not independent of each other; the statistic is recomputed
//! over candidates each time. p = (permutations at least as extreme + 1) / (N + 1). The
//! permutations come from a generator seeded by the run seed, so a report is
//! reproducible.

use std::fmt::Write as _;

use serde::Serialize;

use super::{ChartSpec, ProblemRun, cell, points};
use crate::eval::chart::{Series, YAxis};
use crate::method::rng::DecisionRng;

/// One group of problems.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub problems: usize,
    /// Candidates with at least one verification score.
    pub candidates: usize,
    pub mean_score: Option<f64>,
    /// Per iteration: mean verification score of the group's candidates.
    pub per_iteration: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paradox {
    pub never_solved: Group,
    pub solved: Group,
    /// never − solved (positive: the verifiers liked the unsolved problems' candidates
    /// better). `None` when a group has no scored candidate.
    pub difference: Option<f64>,
    /// Two-sided permutation-test p-value of the difference.
    pub p_value: Option<f64>,
    pub permutations: u32,
    pub seed: u64,
}

/// Sum and count of a problem's candidates' verification scores, overall and per
/// iteration.
struct Scores {
    solved: bool,
    sum: f64,
    count: usize,
    by_iteration: Vec<(f64, usize)>,
}

fn scores(p: &ProblemRun<'_>, iterations: usize) -> Scores {
    let mut s = Scores {
        solved: p.solved(),
        sum: 0.0,
        count: 0,
        by_iteration: vec![(0.0, 0); iterations],
    };
    for (t, it) in p.outcome.iterations.iter().enumerate() {
        for c in &it.candidates {
            if let Some(score) = c.average_score {
                s.sum += score;
                s.count += 1;
                if let Some(slot) = s.by_iteration.get_mut(t) {
                    slot.0 += score;
                    slot.1 += 1;
                }
            }
        }
    }
    s
}

fn group(all: &[Scores], solved: bool, iterations: usize) -> Group {
    let members: Vec<&Scores> = all.iter().filter(|s| s.solved == solved).collect();
    let (sum, count) = members
        .iter()
        .fold((0.0, 0), |(a, n), s| (a + s.sum, n + s.count));
    let per_iteration = (0..iterations)
        .map(|t| {
            let (sum, n) = members.iter().fold((0.0, 0), |(a, n), s| {
                (a + s.by_iteration[t].0, n + s.by_iteration[t].1)
            });
            (n > 0).then(|| sum / n as f64)
        })
        .collect();
    Group {
        problems: members.len(),
        candidates: count,
        mean_score: (count > 0).then(|| sum / count as f64),
        per_iteration,
    }
}

/// never − solved for the labelling `never[i]` (true: problem i is in the never group).
fn statistic(all: &[Scores], never: &[bool]) -> Option<f64> {
    let (mut a, mut na, mut b, mut nb) = (0.0, 0, 0.0, 0);
    for (s, &n) in all.iter().zip(never) {
        if n {
            a += s.sum;
            na += s.count;
        } else {
            b += s.sum;
            nb += s.count;
        }
    }
    (na > 0 && nb > 0).then(|| a / na as f64 - b / nb as f64)
}

impl Paradox {
    pub fn of(
        problems: &[ProblemRun<'_>],
        iterations: usize,
        seed: u64,
        permutations: u32,
    ) -> Self {
        let all: Vec<Scores> = problems.iter().map(|p| scores(p, iterations)).collect();
        let never: Vec<bool> = all.iter().map(|s| !s.solved).collect();
        let difference = statistic(&all, &never);
        let p_value = difference.map(|observed| {
            let mut rng = DecisionRng::for_decision(seed, "verification-paradox", 0, 0, "permute");
            let mut labels = never.clone();
            let mut extreme = 0u32;
            for _ in 0..permutations {
                // Fisher–Yates shuffle of the group labels.
                for i in (1..labels.len()).rev() {
                    let j = rng.below(i + 1);
                    labels.swap(i, j);
                }
                if statistic(&all, &labels).is_some_and(|d| d.abs() >= observed.abs() - 1e-12) {
                    extreme += 1;
                }
            }
            f64::from(extreme + 1) / f64::from(permutations + 1)
        });
        Self {
            never_solved: group(&all, false, iterations),
            solved: group(&all, true, iterations),
            difference,
            p_value,
            permutations,
            seed,
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = String::from(
            "Verification paradox (mean verification score of candidates)\n\
             group          problems  candidates  mean score\n",
        );
        for (name, g) in [
            ("never solved", &self.never_solved),
            ("solved", &self.solved),
        ] {
            let _ = writeln!(
                out,
                "{name:<14} {:>8} {:>11} {:>11}",
                g.problems,
                g.candidates,
                cell(g.mean_score)
            );
        }
        let _ = writeln!(
            out,
            "difference (never - solved): {}   permutation p = {} ({} permutations of problem labels, seed {})",
            self.difference
                .map_or_else(|| "-".into(), |d| format!("{d:+.3}")),
            self.p_value
                .map_or_else(|| "- (needs both groups)".into(), |p| format!("{p:.4}")),
            self.permutations,
            self.seed
        );
        out.push_str("iteration  never solved  solved\n");
        for t in 0..self.solved.per_iteration.len() {
            let _ = writeln!(
                out,
                "It{t:<8} {:>12} {:>7}",
                cell(self.never_solved.per_iteration[t]),
                cell(self.solved.per_iteration[t])
            );
        }
        out
    }

    /// Both groups against iteration, on the table's scale (scores in [0, 1]); a group
    /// without scored candidates (say, every problem was solved) is left out.
    pub fn chart(&self, run: &str) -> ChartSpec {
        // The title says which comparison the chart can make.
        let groups = match (&self.never_solved, &self.solved) {
            (n, _) if n.problems == 0 => "solved problems only (every problem was solved)",
            (_, s) if s.problems == 0 => "never-solved problems only (no problem was solved)",
            (n, _) if n.candidates == 0 => "solved problems only (no scores on the others)",
            (_, s) if s.candidates == 0 => "never-solved problems only (no scores on the others)",
            _ => "never-solved vs solved problems",
        };
        ChartSpec {
            stem: "verification_paradox",
            title: format!("Mean verification score, {groups} — {run}"),
            y: YAxis::share("Mean verification score (0–1)"),
            series: [
                ("never solved", &self.never_solved),
                ("solved", &self.solved),
            ]
            .into_iter()
            .map(|(name, g)| {
                Series::new(
                    format!("{name} ({})", problems(g.problems)),
                    points(&g.per_iteration),
                )
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
        }
    }
}

/// "1 problem", "3 problems".
fn problems(n: usize) -> String {
    if n == 1 {
        "1 problem".into()
    } else {
        format!("{n} problems")
    }
}
